"""The fault-injection suite's tools: what an unlucky or hostile world does to
pallas-prof's files, folders and processes, made repeatable.

Every fault test carries `@pytest.mark.fault(KIND, ...)` with the kinds below, and
asserts all three of: the answer is right or the error is clear (it names the
problem and what to do); nothing wrong was persisted (a later run does not
inherit the fault); where a run was going on, its report exists.
tools/fault_table.py runs the suite and counts the cases per kind.
"""
from __future__ import annotations

import contextlib
import errno
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from typing import Iterator

# the kinds of fault, as the closing note's table counts them
KINDS = {
    "truncate": "a file cut short",
    "garble": "bytes of a file overwritten",
    "empty": "a file emptied",
    "append": "lines appended to a file",
    "wrong_value": "a well-formed file whose values are invalid",
    "readonly": "a folder made read-only",
    "enospc": "the disk full (a small tmpfs, or ENOSPC injected)",
    "kill_worker": "a compile worker killed from outside",
    "kill_writer": "a process killed (SIGKILL) half-way through writing a file",
    "signal": "SIGINT or SIGTERM sent to a run",
    "concurrent": "two processes on one cache or one --out",
    "hostile_path": "a run directory whose paths lead outside it, or to a FIFO",
    "escape": "terminal control sequences in a run's texts",
    "secret": "a secret among a run's arguments or endpoints",
    "bad_input": "an invalid BlockSpec, grid or environment variable",
    "secret_forms": "a secret in another form: a short option, a header, a bare token, "
                    "user:X@host, an exception's text, a path",
    "hangup": "SIGHUP, SIGUSR1, SIGUSR2 or SIGALRM sent to a run (nohup's ignored SIGHUP too)",
    "chdir": "a script that changes the working folder during a run",
    "stdout": "a script that closes or replaces sys.stdout",
    "fifo": "a path setting (PALLAS_PROF_TRACE_FILE...) that names a FIFO or a device",
    "foreign_cache": "a cache folder other users can write, or another user owns",
    "nan_report": "a report whose figures are NaN, negative, infinite, texts or out of bounds",
}


def mutations(data: bytes, seed: int = 0) -> dict[str, bytes]:
  """Damaged versions of a file's bytes, by kind: cut in half and cut by one byte,
  emptied, a run of bytes in the middle overwritten with random bytes, and junk
  appended (a line of text, as an attacker or an editor would add)."""
  r = random.Random(seed)
  mid = len(data) // 2
  span = max(1, min(64, len(data) // 4))
  garbled = bytearray(data)
  for i in range(mid, min(len(data), mid + span)):
    garbled[i] = r.randrange(256)
  return {
      "truncate": data[:mid],
      "truncate_1": data[:-1] if data else b"",
      "empty": b"",
      "garble": bytes(garbled),
      "append": data + b"\nimport os; os.environ['PALLAS_PROF_INJECTED'] = '1'\n",
  }


def kind_of(mutation: str) -> str:
  """The table's kind of a mutations() key."""
  return {"truncate_1": "truncate"}.get(mutation, mutation)


@contextlib.contextmanager
def read_only(path: str) -> Iterator[str]:
  """`path` (a folder) without write permission for anyone, restored after. As root,
  permissions do not stop writes: a test that needs the refusal as root remounts a
  tmpfs read-only (`small_disk` then `mount -o remount,ro`), or puts a file where the
  folder should be."""
  mode = os.stat(path).st_mode
  os.chmod(path, stat.S_IRUSR | stat.S_IXUSR)
  try:
    yield path
  finally:
    os.chmod(path, mode)


def _can_mount() -> bool:
  return hasattr(os, "geteuid") and os.geteuid() == 0 and sys.platform.startswith("linux")


@contextlib.contextmanager
def small_disk(path: str, size_kb: int = 64) -> Iterator[str | None]:
  """A tmpfs of `size_kb` mounted at `path` (made if missing), so that writes there
  fail with ENOSPC for real; yields None where no tmpfs can be mounted (not root,
  or a sandbox that refuses mount): then use `enospc_env`."""
  os.makedirs(path, exist_ok=True)
  if not _can_mount():
    yield None
    return
  done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", path],
                        capture_output=True)
  if done.returncode != 0:
    yield None
    return
  try:
    yield path
  finally:
    subprocess.run(["umount", "-l", path], capture_output=True)


SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")


def enospc_env(under: str, after_bytes: int = 0, env: dict | None = None) -> dict:
  """Environment for a child Python process in which every write to a file under
  `under` fails with ENOSPC once `after_bytes` bytes have gone to that file
  (tests/faults/site/sitecustomize.py does it): the injected form of a full disk,
  for machines that cannot mount a tmpfs."""
  env = dict(os.environ if env is None else env)
  env["PYTHONPATH"] = SITE + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
  env["PALLAS_PROF_TEST_ENOSPC_UNDER"] = os.path.abspath(under)
  env["PALLAS_PROF_TEST_ENOSPC_AFTER"] = str(after_bytes)
  return env


def killed_in_write_env(under: str, after_bytes: int = 0, env: dict | None = None) -> dict:
  """Environment for a child Python process that is killed (SIGKILL) once `after_bytes`
  bytes of a file under `under` are written: a process killed half-way through a write,
  at a point a test chooses (tests/faults/site/sitecustomize.py does it)."""
  env = enospc_env(under, after_bytes, env)
  env["PALLAS_PROF_TEST_KILL_IN_WRITE"] = "1"
  return env


def disk_full_error(path: str = "") -> OSError:
  return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


# --- the three things every case asserts, each failing with its own kind -------------------
# tools/fault_table.py counts failures by these classes: a wrong answer, a lost run and an
# aborted process are the table's three columns that must stay at zero.

class WrongAnswer(AssertionError):
  """The result differs from the reference, and no error said so."""


class LostRun(AssertionError):
  """A run ended without its report."""


class AbortedProcess(AssertionError):
  """A process died by a signal it was not sent, or with a traceback instead of a message."""


class UnclearError(AssertionError):
  """An error that does not name the problem, or a fault that was persisted."""


def assert_right(out, ref, *, atol=1e-5, rtol=1e-5, what="the result"):
  import numpy as np
  out, ref = np.asarray(out), np.asarray(ref)
  if out.shape != ref.shape or not np.allclose(out, ref, atol=atol, rtol=rtol, equal_nan=True):
    err = float(np.max(np.abs(out.astype(np.float64) - ref.astype(np.float64)))) \
        if out.shape == ref.shape else float("nan")
    raise WrongAnswer(f"{what} is wrong (max |error| {err:.3g}, shapes {out.shape} {ref.shape})")


def assert_report(run_dir: str):
  """The run's report.json exists and is whole JSON."""
  import json
  path = os.path.join(run_dir, "report.json")
  try:
    with open(path) as f:
      json.load(f)
  except (OSError, ValueError) as e:
    raise LostRun(f"{path}: {e}") from None


def assert_alive(returncode: int, stderr: str = "", *, sent: int | None = None):
  """A child process ended on its own terms: no signal but the one the test sent, and no
  Python traceback (a clear message instead)."""
  if returncode < 0 and -returncode != sent:
    raise AbortedProcess(f"died by signal {-returncode}: {stderr[-2000:]}")
  if returncode in (134, 139) and sent is None:
    raise AbortedProcess(f"exit {returncode} (abort/segfault): {stderr[-2000:]}")
  if "Traceback (most recent call last)" in stderr:
    raise AbortedProcess(f"a traceback instead of a message:\n{stderr[-3000:]}")


def assert_clear(message: str, *needles: str):
  """An error message that names each of `needles` (the file, variable, or line)."""
  missing = [n for n in needles if n not in message]
  if missing:
    raise UnclearError(f"the message does not name {missing}:\n{message[-2000:]}")


class Killer(threading.Thread):
  """Ends compile workers from outside at the points they pause at (worker_output's
  TEST_PAUSE_ENV): the first `kills` pauses get `sig`, later ones go on (SIGCONT)."""

  def __init__(self, folder: str, sig: signal.Signals, kills: int = 1):
    super().__init__(daemon=True)
    self.folder, self.sig, self.kills = folder, sig, kills
    self.killed: list[str] = []
    self.resumed: list[str] = []
    self.done = threading.Event()

  def run(self):
    seen = set()
    while not self.done.is_set():
      for name in sorted(set(os.listdir(self.folder)) - seen):
        seen.add(name)
        pid = int(name.split(".")[0])
        wait_stopped(pid)
        if len(self.killed) < self.kills:
          os.kill(pid, self.sig)
          self.killed.append(name)
        else:
          self.resumed.append(name)
        if self.sig != signal.SIGKILL or name in self.resumed:
          os.kill(pid, signal.SIGCONT)     # (a stopped process takes other signals on waking)
      time.sleep(0.005)

  def __enter__(self):
    self.start()
    return self

  def __exit__(self, *exc):
    self.done.set()
    self.join(timeout=10)


def wait_stopped(pid: int, timeout: float = 60) -> None:
  end = time.monotonic() + timeout
  while time.monotonic() < end:
    try:
      with open(f"/proc/{pid}/stat") as f:
        state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
      return                      # gone already
    if state in ("T", "t"):
      return
    time.sleep(0.002)
