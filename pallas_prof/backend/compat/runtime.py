"""JAX's and Triton's running state, read without changing it: devices and their compute
capability, whether JAX's backends exist, jax.distributed's process, whether jax.profiler
traces, Triton's interpret knob; and JAX's dispatch of compiled programs,
wrapped so that a kernel's failure in a host callback reaches the caller as itself
(running/runtime_errors.py).
"""
from __future__ import annotations

import warnings

import jax


def set_triton_interpret(enabled: bool) -> bool:
  """Sets Triton's interpret knob; returns the previous value."""
  # lazy: keeps triton out of this module's import (start-up time)
  import triton
  previous = bool(triton.knobs.runtime.interpret)
  triton.knobs.runtime.interpret = enabled
  return previous


def gpu_compute_capability(device=None) -> int | None:
  """The compute capability (e.g. 90) of a CUDA device, None without one (or on ROCm)."""
  try:
    devices = [device] if device is not None else jax.local_devices(backend="gpu")
  except RuntimeError:
    return None
  if not devices:
    return None
  cc = str(getattr(devices[0], "compute_capability", None) or "").replace(".", "")
  return int(cc) if cc.isdigit() else None     # an AMD GPU's is its arch: "gfx942"


def backends_initialized() -> bool:
  """Whether JAX has created its XLA backends. Until it has, jax.distributed.initialize()
  may still be called, so nothing before a user's program may ask JAX for devices; once it
  has, XLA has read XLA_FLAGS. Read without JAX's backend lock (backends_are_initialized
  takes it): install() must not wait for another thread's backend start."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src import xla_bridge
  return bool(getattr(xla_bridge, "_backends", None))


def distributed_process() -> tuple[int, int] | None:
  """(process index, process count) once jax.distributed.initialize() ran, else None;
  reads JAX's state without creating a backend."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src import distributed
  state = distributed.global_state
  if getattr(state, "client", None) is None:
    return None
  return int(state.process_id), int(state.num_processes)


def jax_profiler_session_active() -> bool:
  """Whether jax.profiler is tracing (it holds CUPTI, which allows one subscriber)."""
  try:
    # lazy: private to JAX, absent in some releases (the except says what then)
    from jax._src import profiler as jax_profiler
  except ImportError:
    return False
  state = getattr(jax_profiler, "_profile_state", None)
  # jax 0.10/0.11 call the running session `profile_session`, 0.12 `session`
  for name in ("session", "profile_session"):
    if hasattr(state, name):
      return getattr(state, name) is not None
  _warn_once("jax-profiler-state",
             "pallas-prof cannot tell whether jax.profiler is tracing in this JAX version "
             f"({jax.__version__}): it will not step aside for it, and the two may clash over "
             "CUPTI (stop jax.profiler's trace before pallas-prof profiles)")
  return False


_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
  if key not in _warned:
    _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=3)



# --- JAX's dispatch of compiled programs (running/runtime_errors.py) ----------------

# where JAX logs a host callback's exception before jaxlib raises its text as a
# JaxRuntimeError
CALLBACK_LOGGERS = ("jax._src.callback", "jax._src.debugging")


def wrap_python_executions(wrapper, keep_in_python) -> bool:
  """Executions JAX runs from Python (pxla.ExecuteReplicated) go through wrapper(run, has
  host callbacks); while keep_in_python(), programs with host callbacks get no C++ fast path.

  False, and nothing changed, where this JAX has neither (a release that moved them):
  a kernel's failure then reaches the caller as JAX's JaxRuntimeError, as before."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src import pjit
  from jax._src.interpreters import pxla
  execute = getattr(getattr(pxla, "ExecuteReplicated", None), "__call__", None)
  fastpath = getattr(pjit, "_get_fastpath_data", None)
  if execute is None or fastpath is None:
    return False

  def call(self, *args):
    return wrapper(lambda: execute(self, *args), bool(self.has_host_callbacks))

  def fastpath_data(executable, *args, **kwargs):
    callbacks = getattr(getattr(executable, "unsafe_call", None), "has_host_callbacks", False)
    return None if callbacks and keep_in_python() else fastpath(executable, *args, **kwargs)

  pxla.ExecuteReplicated.__call__, pjit._get_fastpath_data = call, fastpath_data
  return True


def forget_failed_tokens() -> None:
  """Waits out JAX's runtime tokens and forgets them. On a GPU the token of a program
  whose host callback failed keeps that failure, and JAX's exit handlers wait on it and
  print it again as an "Exception ignored in atexit callback" traceback, after the
  kernel's failure has been reported. Nothing to do where this JAX keeps no such set."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src import dispatch
  tokens = getattr(dispatch, "runtime_tokens", None)
  if tokens is None:
    return
  try:
    tokens.block_until_ready()
  except Exception:  # noqa: BLE001 - the failure already reported, or another of the same run
    pass
  finally:
    if hasattr(tokens, "clear"):
      tokens.clear()
