"""Triton's one-time start-up, paid in the background when pallas-prof is installed.

install() on a GPU machine starts the compile worker (Python, `import
triton`, ptxas's version) while the user's program is still starting, and
this process imports the lowering rules meanwhile; a real compile simply
waits for the worker. Once Triton is imported the worker forks a child that
compiles a tiny kernel (warmup_kernel.py) the way real kernels compile, which
prepares on disk what expf-using kernels share (libdevice_link.py) and shows
the toolchain works; the worker itself takes requests at once, so the first
pallas_call never waits behind that compile. While no request waits, the
worker also compiles a tinier kernel itself, stopping at the next stage when
one comes: a process's first compile pays one-time costs that any compile
pays (first minus second compile of one kernel: bench/first_call/first_call_cpu.py).
PALLAS_PROF_WARMUP=0 skips all of it.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable

from ... import settings
from .. import hooks
from . import compile_worker
from .compile_cache import launch_ptx_version, libdevice_cache, triton_options

_warmup_thread: threading.Thread | None = None
# what the background warm-up did, seconds from its start (for diagnostics and
# the benchmarks): started_ns (time.time_ns()), gpu_asked_s (the compute capability
# known), then gpu None (none: nothing more) or worker_started_s, rules_imported_s;
# or error. status() adds the warm-up compile's outcome once the worker's child has it
warmup_status: dict[str, Any] = {}


def warm_up_request(compute_capability: int) -> dict[str, Any]:
  """The tiny kernel's compile request (see warmup_kernel.py), the way the GPU
  path compiles: to PTX (jaxlib assembles the cubin), with the libdevice and
  the options real kernels get."""
  # the kernel's file, not its module: importing it would import Triton into
  # this process (a long import, holding the GIL while the user's program runs),
  # which only the worker needs
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warmup_kernel.py")
  return {"path": path, "name": "pallas_prof_warmup",
          "signature": {"x_ref": "*fp16", "y_ref": "*fp16", "o_ref": "*fp16"},
          "attrs": {(i,): [["tt.divisibility", 16]] for i in range(3)},
          "options": triton_options(num_warps=4, num_stages=2,
                                    ptx_version=launch_ptx_version(compute_capability)),
          "target": ("cuda", compute_capability), "need_cubin": False,
          "libdevice_cache": libdevice_cache()}


def tiny_warm_up_request(compute_capability: int) -> dict[str, Any]:
  """The tiny kernel the worker compiles in its own process while idle (warmup_kernel.py)."""
  return dict(warm_up_request(compute_capability), name="pallas_prof_warmup_tiny",
              signature={"x_ref": "*fp32", "o_ref": "*fp32"},
              attrs={(i,): [["tt.divisibility", 16]] for i in range(2)})


def warm_up(compute_capability: int) -> dict[str, Any]:
  """Starts the worker if needed and compiles the tiny kernel in it, waiting for
  the answer (the benchmarks' and tests' way to have a warm worker)."""
  return compile_worker.compile(warm_up_request(compute_capability))


def start_warmup(compute_capability: int | Callable[[], int | None] | None) -> None:
  """Starts the compile worker, which compiles the tiny kernel in a child of its
  own, and imports the lowering rules here, in the background.

  Triton's one-time start-up (imports, ptxas) then overlaps the user's own
  start-up instead of delaying the first pallas_call. compute_capability: the
  GPU's, or a function that asks for it (in the background thread); None, or
  None from the function: no GPU, nothing starts. PALLAS_PROF_WARMUP=0 skips it.
  """
  global _warmup_thread
  if (_warmup_thread is not None or compute_capability is None
          or not settings.value("PALLAS_PROF_WARMUP")):
    return

  def warm():
    t0 = time.perf_counter()
    warmup_status["started_ns"] = time.time_ns()
    try:
      cc = compute_capability() if callable(compute_capability) else compute_capability
      warmup_status["gpu_asked_s"] = time.perf_counter() - t0
      if cc is None:
        warmup_status["gpu"] = None      # no GPU: no worker (the interpreter needs none)
        return
      compile_worker.start(warm_up=warm_up_request(int(cc)),  # the worker boots ...
                           warm_up_here=tiny_warm_up_request(int(cc)))
      warmup_status["worker_started_s"] = time.perf_counter() - t0
      from ..lowering import rules  # noqa: F401 - ... while this process imports the lowering rules
      # and what a first lowering imports on its own (the tuner, which picks the compile
      # the GPU path launches: hooks.selector())
      hooks.selector().prepare()
      warmup_status["rules_imported_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - a failed warm-up only loses the head start
      warmup_status["error"] = f"{type(e).__name__}: {str(e)[:500]}"

  _warmup_thread = threading.Thread(target=warm, name="pallas-prof-warmup", daemon=True)
  _warmup_thread.start()


def status() -> dict[str, Any]:
  """warmup_status, and once the worker's child has compiled the tiny kernel:
  worker_ready_s (that compile's start: the worker had imported Triton),
  compiled_s (its end) and stages_s, or error; seconds from start_warmup."""
  out = dict(warmup_status)
  answer = compile_worker.warm_up_answer()
  if answer is None or "started_ns" not in out:
    return out
  t0 = out["started_ns"]
  out["worker_ready_s"] = (answer["start_ns"] - t0) / 1e9
  out["compiled_s"] = (answer["end_ns"] - t0) / 1e9
  out["stages_s"] = {name: (end - start) / 1e9 for name, start, end, *_ in answer.get("records", [])}
  if answer.get("error"):
    out["error"] = f"{answer['error']['type']}: {answer['error']['message'][:500]}"
  return out


def wait_for_warm_up(timeout: float = 60.0) -> dict[str, Any]:
  """status() once the warm-up compile has finished (or failed), or as it is at
  the timeout (tests and benchmarks)."""
  deadline = time.monotonic() + timeout
  if _warmup_thread is not None:
    _warmup_thread.join(timeout)
  while True:
    out = status()
    if "compiled_s" in out or "error" in out or time.monotonic() >= deadline:
      return out
    time.sleep(0.01)
