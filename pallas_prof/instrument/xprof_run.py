"""`pallas-prof run --xprof DIR`: the script profiled by jax.profiler, for XProf.

XLA on a GPU records a jitted program's kernels into command buffers (CUDA graphs) by
default. A kernel launched from a graph carries the graph's op (`command_buffer_1`) in
the profile, not its own: XProf then shows a pallas-prof kernel by its Triton function's
name only, without the label and line its op is named for (backend/running/xla_names.py),
and pallas-prof's per-equation tracks find no launch of it to sit under. So for the
profiled run the command buffers are turned off, unless the user's XLA_FLAGS choose
otherwise; the run says which.
"""
from __future__ import annotations

import contextlib
import os

import jax

from . import xplane
from ..backend import compat

COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer"
NO_COMMAND_BUFFERS = (
    "--xprof: XLA's command buffers (CUDA graphs) were off for this run "
    f"(XLA_FLAGS={COMMAND_BUFFER_FLAG}=), so each kernel's launch carries its own op, named "
    "for its label and line, in the profile; set the flag in XLA_FLAGS to choose otherwise")
USERS_COMMAND_BUFFERS = (
    f"--xprof: XLA_FLAGS sets {COMMAND_BUFFER_FLAG}, kept as given: kernels XLA launches from "
    "a command buffer show in XProf under the buffer's op, not their own label and line")
TOO_LATE = (
    "--xprof: JAX's backends were running before the script, so XLA's command buffers could "
    "not be turned off: kernels launched from one show under the buffer's op in XProf")


def without_command_buffers(environ=os.environ) -> str:
  """Turns XLA's command buffers off for this process (before JAX starts its backends);
  returns what to tell the user."""
  flags = environ.get("XLA_FLAGS", "")
  if COMMAND_BUFFER_FLAG in flags:
    return USERS_COMMAND_BUFFERS
  if compat.backends_initialized():   # through the module: a test patches it
    return TOO_LATE
  environ["XLA_FLAGS"] = f"{flags} {COMMAND_BUFFER_FLAG}=".strip()
  return NO_COMMAND_BUFFERS


def jax_profile(logdir: str | None):
  """The script under jax.profiler (`--xprof DIR`), for XProf."""
  return jax.profiler.trace(logdir) if logdir else contextlib.nullcontext()


def add_plane(logdir: str | None, no_trace: bool, perfetto: str) -> str | None:
  """`--xprof DIR`: pallas-prof's plane added to the profile JAX wrote; a problem to tell."""
  if not logdir:
    return None
  if no_trace:
    return f"--xprof {logdir}: pallas-prof's plane was not added: --no-trace recorded none"
  try:
    xplane.add_to_profile(perfetto, logdir)
  except OSError as e:
    return _not_written(logdir, perfetto, e)
  except (ValueError, xplane.ProfileNotFound) as e:
    return f"--xprof {logdir}: pallas-prof's plane was not added: {e}"
  return None


def _not_written(logdir: str, perfetto: str, error: OSError) -> str:
  """A plane that could not be read or written (a full disk): which file, what it holds
  now, and the call that adds the plane once there is room, from the run's own trace."""
  where = error.filename or logdir
  if os.path.abspath(where) == os.path.abspath(perfetto):
    return (f"--xprof {logdir}: pallas-prof's plane was not added: the run's trace {perfetto} "
            f"cannot be read ({error.strerror or error}); JAX's profile is there without it")
  return (f"--xprof {logdir}: pallas-prof's plane was not added to {where} "
          f"({error.strerror or error}): JAX's profile there is whole, without pallas-prof's "
          "tracks. Once the file can be written (room on its disk, a folder you may write), "
          "add them from the run's trace: python -c "
          f"\"from pallas_prof.instrument import xplane; xplane.add_to_profile({perfetto!r}, "
          f"{logdir!r})\"")
