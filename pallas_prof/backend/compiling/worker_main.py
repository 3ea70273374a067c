"""The compile worker process (compile_worker.py starts it): requests in, Triton's answers out.

Run as a script, by path, without the package: importing pallas_prof would import JAX,
which the worker never needs (its start-up delays the first compile). So it imports
nothing of pallas_prof and loads the modules beside it by path (triton_run.py, the
output capture, the batches).

Also the pipe's protocol, which the parent speaks too: length-prefixed pickles over the
worker's stdin and stdout, the stage marks the worker writes to its stderr (the parent reads
them after a crash), and the variables the parent sets for the worker.

Start-up (install() starts it on a GPU machine; a first pallas_call right
after waits for it): Triton's backends found in its folder, ptxas asked
beside the imports, and install()'s warm-ups never ahead of a request: one
in a child (_warm_up_in_child), one here only while no request waits
(_warm_up_here). (Starting it without site,
`python -S`, did not shorten the start on the CPU machine: 420 against 400
ms, medians of 15: Triton imports what site's .pth files had imported.)
"""
from __future__ import annotations

import gc
import importlib.util
import os
import pickle
import select
import shutil
import signal
import struct
import sys
import time
from typing import Any

STAGE_MARK = "pallas-prof-worker: stage "
# set by the parent for the worker, which reads them without the package (pallas_prof/settings.py
# lists them): the warm-up request's file, the GPU's compute capability for ptxas's query
WARM_UP_ENV = "PALLAS_PROF_WORKER_WARM_UP"
ARCH_ENV = "PALLAS_PROF_WORKER_ARCH"


def send(stream, obj) -> None:
  data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
  stream.write(struct.pack("<Q", len(data)))
  stream.write(data)
  stream.flush()


def recv(stream):
  header = stream.read(8)
  if len(header) < 8:
    raise EOFError("worker closed its output")
  (size,) = struct.unpack("<Q", header)
  data = stream.read(size)
  if len(data) < size:
    raise EOFError("worker output cut short")
  return pickle.loads(data)


def _serve(compile_module) -> None:
  """The worker's loop: requests in on stdin, results out on stdout.

  The worker imports Triton's compiler as it starts, before any request.
  Python's cyclic garbage collector then runs only between requests, once the
  answer is on its way: left to itself it would start a full collection in
  the middle of a compile, which after `import triton` walks every object
  Triton made (about half the compile of a norm kernel). Those objects are
  frozen (gc.freeze) once Triton is imported, so each collection only looks
  at what compiles left behind. They are frozen without a collection first:
  that one would walk them all (in the start-up a first pallas_call may wait
  for; figures in bench/results/archive/comment_figures.md) to free the
  ~500 objects the imports left unreachable, which now stay. (Freezing after
  every collection too cost the same, and would keep for good whatever
  became garbage later.)
  """
  gc.disable()
  _hangup_as_default()
  inp, out = sys.stdin.buffer, sys.stdout.buffer
  sys.stdout = sys.stderr        # stray prints must not corrupt the protocol
  _output.pause_for_test("start")
  compile_module.use_quick_triton_key()
  compile_module.import_compiler(int(os.environ.get(ARCH_ENV) or 90))
  gc.freeze()                    # Triton's modules: never walked by a collection
  warm_ups = _warm_up_requests()
  _warm_up_in_child(compile_module, warm_ups.get("child"))
  _warm_up_here(compile_module, warm_ups.get("here"), inp)

  def on_stage(name: str) -> None:
    sys.stderr.write(f"{STAGE_MARK}{name}\n")
    sys.stderr.flush()
    _output.pause_for_test(name)

  while True:
    try:
      request = recv(inp)
    except EOFError:           # the parent died (close() kills us)
      _leave()
    if request.get("op") == "batch":
      answer = _batch.compile_batch(
          request, lambda one: _run_one(compile_module, one, on_stage), _output)
    else:
      answer = _run_one(compile_module, request, on_stage)
    try:
      send(out, answer)
    except (BrokenPipeError, ConnectionResetError):
      _leave()                 # the parent died while this compile ran (SIGKILL)
    gc.collect()                 # what this compile left (short: the imports are frozen)
    _reap_children()


def _leave() -> None:
  """The parent is gone: the worker's folder (Triton's cache, the cubins) is this process's
  to remove, and it ends quietly. os._exit: no traceback, no flush of the broken pipe at
  exit."""
  shutil.rmtree(os.environ.get(_output.DIR_ENV) or "", ignore_errors=True)
  try:
    sys.stderr.flush()
  except (OSError, ValueError):
    pass
  os._exit(0)


def _hangup_as_default() -> None:
  """SIGHUP ends the worker, whatever its parent made of it. Under nohup the parent ignores
  SIGHUP and a child inherits that; the worker has a process group of its own, so a closed
  terminal never reaches it anyway, and a SIGHUP sent to it on purpose (a process manager
  ending it, the tests) must end it, as it ends any process."""
  if hasattr(signal, "SIGHUP"):
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _warm_up_requests() -> dict[str, Any]:
  """The warm-up requests the parent left for this worker (see _Worker._start)."""
  path = os.environ.get(WARM_UP_ENV)
  if not path:
    return {}
  try:
    with open(path, "rb") as f:
      return pickle.load(f)
  except (OSError, EOFError, pickle.UnpicklingError):
    return {}


class _RequestWaiting(Exception):
  pass


_warmed_here = ["no"]      # "no", "done", "skipped" (a request waited) or "stopped at <stage>"


def _warm_up_here(compile_module, request: dict[str, Any] | None, inp) -> None:
  """Compiles `request` (a tiny kernel) in this process while no request waits on
  `inp`: a process's first compile pays one-time costs of Triton and LLVM that a
  compile of anything pays (first minus second compile of one kernel,
  bench/first_call/first_call_cpu.py; an MLIR context and LLVM's targets made up front did
  not remove them). A request that comes meanwhile stops it before
  Triton's next stage, so it waits at most for one stage of a tiny kernel."""
  if request is None:
    return

  def waiting() -> bool:
    return bool(select.select([inp], [], [], 0)[0])

  def stop_if_asked(stage: str) -> None:
    if waiting():
      raise _RequestWaiting(stage)

  status = "skipped"
  if not waiting():
    try:
      error = compile_module.run_triton(request, on_stage=stop_if_asked).get("error") or {}
    except _RequestWaiting as stopped:       # before the first stage
      error = {"type": "_RequestWaiting", "message": str(stopped)}
    status = ("done" if not error else f"stopped at {error['message']}"
              if error["type"] == "_RequestWaiting" else f"failed: {error['type']}")
  _warmed_here[0] = status


def _warm_up_in_child(compile_module, request: dict[str, Any] | None) -> None:
  """install()'s warm-up compile (warmup.py), in a child forked now that Triton
  is imported, its answer in a file beside the request. What it prepares on
  disk (libdevice's common functions, libdevice_link.py) serves later compiles,
  and this process takes requests at once: a first pallas_call right after
  install() waits for the worker's start-up only, never for a warm-up compile
  ahead of it (it did, on the H200 machine). Forked before any
  compile, while this process has no other thread."""
  path = os.environ.get(WARM_UP_ENV)
  if not path or request is None:
    return
  sys.stderr.flush()
  if os.fork() != 0:
    return
  code = 1
  try:
    # the protocol's pipes are the worker's: a child holding them open would hide
    # the worker's death from the parent until the child ended too
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.nice(10)         # where cores are few, the compiles a program waits for go first
    answer = _run_one(compile_module, request, lambda name: None)   # no stage marks in the log
    with open(path + ".tmp", "wb") as f:
      pickle.dump(answer, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path + ".tmp", path + ".answer")
    code = 0
  finally:
    sys.stderr.flush()
    os._exit(code)


def _reap_children() -> None:
  """Collects the warm-up child once it has ended (batches wait for their own)."""
  try:
    while os.waitpid(-1, os.WNOHANG)[0] > 0:
      pass
  except ChildProcessError:
    pass


def _run_one(compile_module, request: dict[str, Any], on_stage) -> dict[str, Any]:
  if request.get("op") == "ping":          # the worker is up (benchmarks of its start, tests)
    import gc
    return {"pid": os.getpid(), "end_ns": time.time_ns(), "frozen": gc.get_freeze_count(),
            "full_collections": gc.get_stats()[2]["collections"], "warmed_here": _warmed_here[0]}
  if request.get("op") == "ptxas":
    on_stage("cubin")
    return _output.with_output(lambda: compile_module.run_ptxas(request))
  return _output.with_output(lambda: compile_module.run_triton(request, on_stage=on_stage))


def _load_beside(name: str):
  """A module beside this file, loaded by path: not through the pallas_prof package,
  nor with this folder on sys.path (its module names would shadow others)."""
  here = os.path.dirname(os.path.abspath(__file__))
  if sys.path and os.path.abspath(sys.path[0] or os.curdir) == here:
    sys.path.pop(0)              # Python put the script's folder first
  spec = importlib.util.spec_from_file_location(f"pallas_prof_{name}",
                                                os.path.join(here, f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  sys.modules[spec.name] = module      # dataclasses look their module up there
  spec.loader.exec_module(module)
  return module


if __package__:
  from . import worker_batch as _batch
  from . import worker_output as _output
else:                        # run as the worker's script: no package
  _output = _load_beside("worker_output")
  _batch = _load_beside("worker_batch")

if __name__ == "__main__":
  _serve(_load_beside("triton_run"))
