"""Triton compiles in a worker process.

LLVM inside Triton aborts the whole process on some inputs (JAX users have
lost notebooks to it). pallas-prof therefore runs triton.compile in a
long-lived child process: a crash there becomes a CompileError in the
user's program, which keeps running, and the next compile starts a fresh
worker.

PALLAS_PROF_COMPILE_WORKER=0 compiles in-process instead.

A death is not always Triton's: WorkerCrashed.from_outside says when the
machine ended the worker (a signal Triton never sends itself, a disk that
would not take an answer); compile.py retries such failures, and any crash,
once on a fresh worker (replace()) before believing them.

Imports nothing of pallas_prof: it runs as a script (triton_run.py loaded by
path); compile.py and warmup.py call it, never the other way round.

Protocol: length-prefixed pickles over the worker's stdin/stdout; the
worker's stderr (LLVM's assertion messages, progress lines naming the stage
being compiled) goes to a log file the parent reads after a crash.
Each compile's own stderr also comes back with its error (worker_output.py).

Start-up (install() starts it on a GPU machine; a first pallas_call right
after waits for it): Triton's backends found in its folder, ptxas asked
beside the imports, and install()'s warm-ups never ahead of a request: one
in a child (_warm_up_in_child), one here only while no request waits
(_warm_up_here). Its own process group: closing it ends that child too (and
Ctrl-C in the user's terminal does not reach it). (Starting it without site,
`python -S`, did not shorten the start on the CPU machine: 420 against 400
ms, medians of 15: Triton imports what site's .pth files had imported.)
"""
from __future__ import annotations

import atexit
import os
import pickle
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

STAGE_MARK = "pallas-prof-worker: stage "
# set by the parent for the worker, which reads them without the package (pallas_prof/settings.py
# lists them): the warm-up request's file, the GPU's compute capability for ptxas's query
WARM_UP_ENV = "PALLAS_PROF_WORKER_WARM_UP"
ARCH_ENV = "PALLAS_PROF_WORKER_ARCH"


class WorkerCrashed(RuntimeError):
  """The worker (or its child) died during a compile: `how` (worker_output.how_it_ended),
  in `stage`, having written `output_tail`; `from_outside`: ended by the machine (a
  signal Triton never sends itself, a disk that would not take its answer, no worker
  to be had), not by Triton."""

  def __init__(self, how: str, stage: str | None, output_tail: str,
               from_outside: bool | None = None):
    super().__init__(f"compile worker died ({how}) in stage {stage}")
    self.how = how
    self.stage = stage
    self.output_tail = output_tail
    self.from_outside = (_output.ended_from_outside(how) if from_outside is None
                         else from_outside)


def _send(stream, obj) -> None:
  data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
  stream.write(struct.pack("<Q", len(data)))
  stream.write(data)
  stream.flush()


def _recv(stream):
  header = stream.read(8)
  if len(header) < 8:
    raise EOFError("worker closed its output")
  (size,) = struct.unpack("<Q", header)
  data = stream.read(size)
  if len(data) < size:
    raise EOFError("worker output cut short")
  return pickle.loads(data)


def enabled() -> bool:
  from ... import settings      # here: the worker runs this file without the package
  return settings.value("PALLAS_PROF_COMPILE_WORKER")


class _Worker:
  def __init__(self):
    self.proc: subprocess.Popen | None = None
    self.workdir: str | None = None
    self.log_path: str | None = None
    self.warm_up_path: str | None = None
    self.lock = threading.Lock()

  def _start(self, warm_up: dict[str, Any] | None = None,
             warm_up_here: dict[str, Any] | None = None) -> None:
    here = os.path.abspath(__file__)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here))))
    self._remove_workdir()              # a crashed worker's (its log has been read)
    self.workdir = tempfile.mkdtemp(prefix="pallas-prof-worker-")
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PALLAS_PROF_TRACE"] = "0"          # spans are made by the parent
    env["JAX_PLATFORMS"] = "cpu"            # the worker never touches a GPU
    # Triton stores every compile in its own cache, which pallas-prof never reads
    # (it keeps its own): in the worker that cache lives and dies with the worker,
    # instead of growing ~/.triton/cache by every kernel's stages
    env["TRITON_CACHE_DIR"] = os.path.join(self.workdir, "triton-cache")
    env[_output.DIR_ENV] = self.workdir
    # Triton's own switch: its backends from its folder, not by reading the entry
    # points of every installed distribution (a visible part of `import triton` where
    # many are installed); the worker compiles for NVIDIA's, which is there
    env.setdefault("TRITON_BACKENDS_IN_TREE", "1")
    env.pop(WARM_UP_ENV, None)
    self.warm_up_path = None
    if warm_up is not None or warm_up_here is not None:
      self.warm_up_path = os.path.join(self.workdir, "warm-up.pickle")
      with open(self.warm_up_path, "wb") as f:
        pickle.dump({"child": warm_up, "here": warm_up_here}, f,
                    protocol=pickle.HIGHEST_PROTOCOL)
      env[WARM_UP_ENV] = self.warm_up_path
      env[ARCH_ENV] = str(int((warm_up or warm_up_here)["target"][1]))
    self.log_path = os.path.join(self.workdir, "worker.log")
    log = open(self.log_path, "w")
    # run as a script, not `-m pallas_prof...`: importing the package would import
    # JAX, which the worker never needs (its start-up delays the first compile)
    self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                 env=env, close_fds=True, process_group=0)
    log.close()

  def close(self) -> None:
    """Ends the worker and removes its folder (at exit, in tests), not waiting for a compile
    in flight (the warm-up's): a short script must not linger at exit for it."""
    holds = self.lock.acquire(timeout=0.05)
    try:
      self._end()
    finally:
      if holds:
        self.lock.release()

  def _end(self) -> None:
    proc, self.proc = self.proc, None
    if proc is not None and proc.poll() is None:
      _kill_group(proc)         # the worker and its children (a warm-up compile in flight)
      try:
        proc.wait(timeout=5)
      except subprocess.TimeoutExpired:
        pass
    self._remove_workdir()

  def replace(self) -> None:
    """Ends the worker once no compile is in flight, so that the next compile starts a
    fresh one (with a folder, and a Triton cache, of its own): a retry must not meet
    what the last worker was left with."""
    with self.lock:
      self._end()

  def _remove_workdir(self) -> None:
    if self.workdir:
      shutil.rmtree(self.workdir, ignore_errors=True)
      self.workdir = None

  def ensure_started(self, warm_up: dict[str, Any] | None = None,
                     warm_up_here: dict[str, Any] | None = None) -> None:
    with self.lock:
      if self.proc is None or self.proc.poll() is not None:
        try:
          self._start(warm_up, warm_up_here)
        except OSError:         # the next compile tries again, and says why if it fails
          self.proc = None
          self._remove_workdir()

  def warm_up_answer(self) -> dict[str, Any] | None:
    """What the worker's warm-up child answered (run_triton's result), once it has."""
    if not self.warm_up_path:
      return None
    try:
      with open(self.warm_up_path + ".answer", "rb") as f:
        return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
      return None

  def call(self, request: dict[str, Any]) -> dict[str, Any]:
    asked = time.time_ns()
    with self.lock:
      queued = time.time_ns() - asked        # behind other compiles (the warm-up's, say)
      if self.proc is None or self.proc.poll() is not None:
        self._start_for_a_request()
      try:
        _send(self.proc.stdin, request)
        result = _recv(self.proc.stdout)
      except (EOFError, BrokenPipeError, OSError, pickle.UnpicklingError):
        raise self._crashed() from None
      except BaseException:    # Ctrl-C, SIGTERM: its answer would go to the next request
        self._end()
        raise
    result["queued_ns"] = queued
    return result

  def _start_for_a_request(self) -> None:
    """_start(); a worker that cannot be started (no room for its folder, no
    processes left) is the machine's failure, said as a WorkerCrashed."""
    try:
      self._start()
    except OSError as e:
      self.proc = None
      self._remove_workdir()
      raise WorkerCrashed(f"could not be started: {e}", None, "(no output)",
                          from_outside=True) from None

  def _crashed(self) -> WorkerCrashed:
    proc, self.proc = self.proc, None
    try:
      code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      proc.kill()
      code = proc.wait()
    _kill_group(proc)          # a child it left (its group keeps the id until they are gone)
    how = _output.how_it_ended(code)
    text = ""
    try:
      with open(self.log_path) as f:
        text = f.read()
    except OSError:
      pass
    text += _output.left_by_crash(self.workdir)   # what the compile that died had written
    stage = None
    for line in text.splitlines():
      if line.startswith(STAGE_MARK):
        stage = line[len(STAGE_MARK):].strip()
    tail = "\n".join(ln for ln in text.splitlines() if not ln.startswith(STAGE_MARK))[-3000:]
    return WorkerCrashed(how, stage, tail.strip() or "(no output)")


def _kill_group(proc: subprocess.Popen) -> None:
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except ProcessLookupError:      # none left
    pass
  except PermissionError:
    if proc.poll() is None:
      proc.kill()


_worker = _Worker()
atexit.register(_worker.close)


def _forget_parent_worker() -> None:
  """In a forked child: the worker, its pipes and its folder are the parent's.
  Using them would interleave two processes' requests, and the child's exit
  would kill the parent's worker; the child starts a worker of its own instead."""
  _worker.proc = None
  _worker.workdir = None
  _worker.log_path = None
  _worker.warm_up_path = None
  _worker.lock = threading.Lock()       # it may have been held by another thread


if hasattr(os, "register_at_fork"):
  os.register_at_fork(after_in_child=_forget_parent_worker)


def compile(request: dict[str, Any]) -> dict[str, Any]:  # noqa: A001 - the module's verb
  """run_triton(request), in the worker process (or in-process when disabled)."""
  if not enabled():
    from .triton_run import run_ptxas, run_triton, triton_lock
    with triton_lock():      # file descriptor 2 is the process's: one compile at a time
      return _with_output(lambda: run_ptxas(request) if request.get("op") == "ptxas"
                          else run_triton(request))
  return _worker.call(request)


def replace() -> None:
  """A fresh worker for the next compile (a retry after a failure that may be the
  machine's); nothing to do when compiles run in this process."""
  if enabled():
    _worker.replace()


def compile_many(requests: list[dict[str, Any]], parallel: int | None = None) -> list[Any]:
  """compile() of each request, up to `parallel` (default: the cores, at most 8) at
  once in children of the worker. Each answer is compile()'s, or a WorkerCrashed
  for a compile whose child died (a crash of the worker itself raises)."""
  if not requests:
    return []
  parallel = parallel or min(8, os.cpu_count() or 1)
  if not enabled() or len(requests) == 1 or parallel == 1:
    out: list[Any] = []
    for request in requests:
      try:
        out.append(compile(request))
      except WorkerCrashed as crash:
        out.append(crash)
    return out
  answer = _worker.call({"op": "batch", "requests": list(requests), "parallel": parallel})
  queued = answer.get("queued_ns", 0)
  out = []
  for result in answer["results"]:
    if "crashed" in result:
      out.append(WorkerCrashed(result["crashed"], result.get("stage"),
                               result.get("output") or "(no output)"))
    else:
      result["queued_ns"] = queued
      out.append(result)
  return out


def start(warm_up: dict[str, Any] | None = None,
          warm_up_here: dict[str, Any] | None = None) -> None:
  """Starts the worker process if it is not running, without waiting for it.

  warm_up: a compile request the new worker runs in a child as soon as Triton
  is imported, answering other requests meanwhile (warm_up_answer() says
  what it gave). warm_up_here: one it compiles itself while no request waits,
  stopping at the next stage when one comes (a ping's answer says how far it got)."""
  if enabled():
    _worker.ensure_started(warm_up, warm_up_here)


def warm_up_answer() -> dict[str, Any] | None:
  return _worker.warm_up_answer()


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
  import gc
  gc.disable()
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
      request = _recv(inp)
    except EOFError:           # the parent died (close() kills us): the folder is ours to remove
      shutil.rmtree(os.environ.get(_output.DIR_ENV) or "", ignore_errors=True)
      return
    if request.get("op") == "batch":
      _send(out, _batch.compile_batch(
          request, lambda one: _run_one(compile_module, one, on_stage), _output))
    else:
      _send(out, _run_one(compile_module, request, on_stage))
    gc.collect()                 # what this compile left (short: the imports are frozen)
    _reap_children()


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
  import select

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
    return _with_output(lambda: compile_module.run_ptxas(request))
  return _with_output(lambda: compile_module.run_triton(request, on_stage=on_stage))


def _with_output(run) -> dict[str, Any]:
  """run() (a compile, or ptxas) with its stderr kept: a failed one's error carries it."""
  with _output.compiler_output() as output:
    result = run()
  if "error" in result and output:
    result["error"]["stderr"] = output[0]
  return result


def _load_beside(name: str):
  """A module beside this file, loaded by path: not through the pallas_prof package,
  nor with this folder on sys.path (its module names would shadow others)."""
  import importlib.util
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
  from . import worker_output as _output
else:                        # run as the worker's script: no package
  _output = _load_beside("worker_output")
  _batch = _load_beside("worker_batch")

if __name__ == "__main__":
  _serve(_load_beside("triton_run"))
