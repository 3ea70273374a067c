"""Triton's one-time start-up, paid in the background when pallas-prof is installed.

The compile worker boots (Python, `import triton`, LLVM, libdevice, ptxas)
and compiles a tiny kernel (warmup_kernel.py) while the user's program is
still starting; a real compile simply waits for the worker. This process
imports the lowering rules meanwhile. PALLAS_PROF_WARMUP=0 skips it.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

from . import compile_worker
from .compile_cache import libdevice_cache, triton_options

_warmup_thread: threading.Thread | None = None
# what the background warm-up did, seconds from its start (for diagnostics and
# the benchmarks): worker_started_s, rules_imported_s, compiled_s, or error
warmup_status: dict[str, Any] = {}


def warm_up(compute_capability: int) -> dict[str, Any]:
  """Starts the worker and compiles a tiny kernel in it (see warmup_kernel.py),
  the way the GPU path compiles: to PTX (jaxlib assembles the cubin), with the
  libdevice and the options real kernels get."""
  # the kernel's file, not its module: importing it would import Triton into
  # this process (0.27-0.52 s on the H200 machine's host, holding the GIL while
  # the user's program runs), which only the worker needs
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warmup_kernel.py")
  request = {"path": path, "name": "pallas_prof_warmup",
             "signature": {"x_ref": "*fp16", "y_ref": "*fp16", "o_ref": "*fp16"},
             "attrs": {(i,): [["tt.divisibility", 16]] for i in range(3)},
             "options": triton_options(num_warps=4, num_stages=2),
             "target": ("cuda", compute_capability), "need_cubin": False,
             "libdevice_cache": libdevice_cache()}
  return compile_worker.compile(request)


def start_warmup(compute_capability: int) -> None:
  """Starts the compile worker and compiles a tiny kernel there, in the background.

  Triton's one-time start-up (imports, LLVM, libdevice, ptxas) then overlaps
  the user's own start-up instead of delaying the first pallas_call; a real
  compile simply waits for the worker. PALLAS_PROF_WARMUP=0 skips it.
  """
  global _warmup_thread
  if _warmup_thread is not None or os.environ.get("PALLAS_PROF_WARMUP", "1") == "0":
    return

  def warm():
    t0 = time.perf_counter()
    try:
      compile_worker.start()           # the worker boots (Python, Triton's import) ...
      warmup_status["worker_started_s"] = time.perf_counter() - t0
      from . import rules  # noqa: F401 - ... while this process imports the lowering rules
      warmup_status["rules_imported_s"] = time.perf_counter() - t0
      result = warm_up(compute_capability)
      warmup_status["compiled_s"] = time.perf_counter() - t0
      if result.get("error"):
        warmup_status["error"] = f"{result['error']['type']}: {result['error']['message'][:500]}"
      warmup_status["stages_s"] = {name: (end - start) / 1e9
                                   for name, start, end, *_ in result.get("records", [])}
    except Exception as e:  # noqa: BLE001 - a failed warm-up only loses the head start
      warmup_status["error"] = f"{type(e).__name__}: {str(e)[:500]}"

  _warmup_thread = threading.Thread(target=warm, name="pallas-prof-warmup", daemon=True)
  _warmup_thread.start()
