"""Several compiles at once in the compile worker (the tuner's candidates).

Each compile runs in a child forked from the worker, which has Triton
imported already, so a child starts in a millisecond or so and compiles on a
core of its own. A child that crashes (LLVM aborting) fails only its own
compile. Each child writes its answer to a file (an answer is up to a few MB
of PTX and IR, more than a pipe holds while the parent waits on the others);
a child that cannot write it (a full disk) says so by its exit status, so
that the parent does not take the machine's failure for Triton's.

Standard library only: the worker loads it by path (compile_worker.py).
"""
from __future__ import annotations

import os
import pickle
import shutil
import sys
import tempfile
from typing import Any, Callable


def compile_batch(batch: dict[str, Any], run_one: Callable[[dict[str, Any]], dict[str, Any]],
                  output) -> dict[str, Any]:
  """run_one of each of batch["requests"], at most batch["parallel"] at a time, each in a
  child; {"results": [answer, or {"crashed": how, "output": what it wrote}]}.
  `output`: worker_output, which names a child's end and keeps what it wrote."""
  requests = batch["requests"]
  parallel = max(1, int(batch.get("parallel") or 1))
  results: list[Any] = [None] * len(requests)
  folder = tempfile.mkdtemp(prefix="batch-", dir=os.environ.get("TRITON_CACHE_DIR") and
                            os.path.dirname(os.environ["TRITON_CACHE_DIR"]))
  running: dict[int, int] = {}        # pid -> request index
  waiting = list(range(len(requests)))
  try:
    while waiting or running:
      while waiting and len(running) < parallel:
        i = waiting.pop(0)
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
          _compile_in_child(requests[i], os.path.join(folder, str(i)), run_one, output)
        running[pid] = i
      pid, status = os.wait()
      i = running.pop(pid, None)
      if i is not None:
        results[i] = _answer_of(os.path.join(folder, str(i)), pid, status, output)
  finally:
    shutil.rmtree(folder, ignore_errors=True)
  return {"results": results}


def _compile_in_child(request: dict[str, Any], stem: str, run_one, output) -> None:
  """The child: one compile, its answer in `stem`.pickle, gone."""
  code = 1
  try:
    answer = run_one(request)
    try:
      with open(f"{stem}.tmp", "wb") as f:
        pickle.dump(answer, f, protocol=pickle.HIGHEST_PROTOCOL)
      os.replace(f"{stem}.tmp", f"{stem}.pickle")
      code = 0
    except OSError:
      code = output.ANSWER_NOT_WRITTEN
  finally:
    sys.stderr.flush()
    os._exit(code)


def _answer_of(stem: str, pid: int, status: int, output) -> Any:
  try:
    with open(f"{stem}.pickle", "rb") as f:
      return pickle.load(f)
  except OSError:
    pass
  returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
  result = {"crashed": output.how_it_ended(returncode)}
  left = output.left_by_child(pid)[-3000:].strip()
  if left:
    result["output"] = left
  return result
