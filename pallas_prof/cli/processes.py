"""Runs of several processes or hosts, merged into one report.

Under jax.distributed each process runs `pallas-prof run --out DIR/<its name>`
and writes its own run directory; report.json's "origin" says which host,
process id, JAX process index and devices made it. `pallas-prof report` given
several run directories, or a directory that holds several, merges them: one
row per kernel per device per process (terminal and report.html).
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import threading

from rich import box
from rich.table import Table
from rich.text import Text

from .report import RunReport
from .saved_runs import files as run_files
from .summary import Origin, summaries
from ..events import HOST_NAME, JAX_PROCESS_COUNT, JAX_PROCESS_INDEX, PROCESS_PID
from ..serial import to_json
from ..run_layout import HTML, REPORT


def origin() -> dict:
  """Where this run happened (after the user's program, so jax.distributed is known)."""
  # lazy: at the top it would load jax, numpy whenever this module is imported
  from ..backend import compat
  out = {HOST_NAME: socket.gethostname(), PROCESS_PID: os.getpid()}
  known = compat.distributed_process()
  if known is not None:
    out[JAX_PROCESS_INDEX], out[JAX_PROCESS_COUNT] = known
  if compat.backends_initialized():        # never create a backend just to describe it
    import jax
    try:
      out["devices"] = [f"{d.platform}:{d.id}" for d in jax.local_devices()]
    except RuntimeError:
      pass
  return out


FRESH_DIR_TRIES = 1000


def fresh_dir(path: str) -> str:
  """`path`, created now, or `path`-<pid> when another process took it first (processes of
  one jax.distributed program started in the same second would overwrite each other), or
  `path`-<pid>-<n> when that is taken too (two runs of one process in a second, or one pid
  on two hosts sharing the folder). mkdir is the claim: no two callers get one folder."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  candidates = [path, f"{path}-{os.getpid()}",
                *(f"{path}-{os.getpid()}-{n}" for n in range(2, FRESH_DIR_TRIES))]
  for candidate in candidates:
    try:
      os.mkdir(candidate)
      return candidate
    except FileExistsError:
      continue
  raise SystemExit(f"pallas-prof: {path} and {len(candidates) - 1} names beside it exist "
                   "already; give --out")


# --- signals: SIGTERM (and the other signals that end a process) end a run as Ctrl-C does

# the signals whose default action ends the process without a word: each ends a run as
# SIGTERM does (its report written), SIGHUP being a closed terminal or a dropped ssh session
ENDING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGHUP", "SIGUSR1", "SIGUSR2",
                                                         "SIGALRM") if hasattr(signal, name))
EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}    # the shell's 128 + the signal


def exit_code(signum: int) -> int:
  """The status a shell gives a process that `signum` ended: 128 + the signal."""
  return 128 + int(signum)


class Terminated(SystemExit):
  """SIGTERM (or another of ENDING_SIGNALS: `signum`), raised in the main thread as SIGINT
  raises KeyboardInterrupt: the script's `finally` blocks run, and the run writes its report
  before it exits 128 + the signal (143 for SIGTERM)."""

  def __init__(self, signum: int = signal.SIGTERM):
    self.signum = signal.Signals(signum)
    super().__init__(exit_code(signum))


received: list[int] = []      # the signals this run was sent, in order


def _raise_terminated(signum, frame):
  _stop_outside_imports(signum, frame, lambda: Terminated(signum))


def _raise_interrupt(signum, frame):
  # Python's own SIGINT handler, and a note of it: a KeyboardInterrupt that lands in a
  # finalizer or a callback is dropped by Python ("Exception ignored in ..."), and the run
  # must still end as a stopped one
  _stop_outside_imports(signum, frame, KeyboardInterrupt)


RESEND_S = 0.05       # how soon a signal held over an import is sent again
_deferred: set[int] = set()      # signals held over an import, not yet raised


def _stop_outside_imports(signum, frame, stop) -> None:
  """Raises `stop`, unless the main thread is importing: then the signal is sent again
  shortly, until it lands after the import. An import runs Python that C++ calls (nanobind
  makes jaxlib's enums with Python's enum module while the extension initialises), and an
  exception raised there reaches C++ that cannot pass it on: the process aborts
  (std::terminate), with no report. Seen in CI: Ctrl-C during the script's `import jax`."""
  if signum not in _deferred:
    received.append(signum)
  if _importing(frame):
    _deferred.add(signum)
    _send_again_soon(signum)
    return
  _deferred.discard(signum)
  raise stop()


def _importing(frame) -> bool:
  while frame is not None:
    if frame.f_globals.get("__name__", "").startswith("importlib._bootstrap"):
      return True
    frame = frame.f_back
  return False


def _send_again_soon(signum: int) -> None:
  def again():
    # only while the run still listens: after it, a SIGTERM sent again would kill the process
    if signum in _deferred and signal.getsignal(signum) in (_raise_interrupt,
                                                            _raise_terminated):
      signal.pthread_kill(threading.main_thread().ident, signum)
  timer = threading.Timer(RESEND_S, again)
  timer.daemon = True
  timer.start()


def _in_main_thread() -> bool:
  return threading.current_thread() is threading.main_thread()


def _ours_to_take(signum: int) -> bool:
  """Whether pallas-prof may handle `signum`: only where its action is the default one.
  An ignored SIGHUP (under nohup) stays ignored: the user asked the run to outlive its
  terminal; a handler of the user's own (set before pallas-prof started) stays theirs."""
  return signal.getsignal(signum) == signal.SIG_DFL


@contextlib.contextmanager
def terminate_as_exception():
  """While open, SIGTERM and ENDING_SIGNALS raise Terminated in the main thread (by default
  they would end the process at once: no report, a stale marker, the compile worker's temp
  folder left behind), and SIGINT its KeyboardInterrupt as ever; all are noted in
  `received`. A handler the user's script sets later replaces pallas-prof's for its signal,
  as it would without pallas-prof."""
  if not _in_main_thread():        # signal handlers belong to the main thread
    yield
    return
  received.clear()
  _deferred.clear()
  previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_terminated)}
  for signum in ENDING_SIGNALS:
    if _ours_to_take(signum):
      previous[signum] = signal.signal(signum, _raise_terminated)
  if signal.getsignal(signal.SIGINT) is signal.default_int_handler:    # not one of the user's
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupt)
  hook = sys.unraisablehook
  sys.unraisablehook = _quiet_stops(hook)
  try:
    yield
  finally:
    _deferred.clear()
    sys.unraisablehook = hook
    for s, handler in previous.items():
      signal.signal(s, handler)


def _quiet_stops(hook):
  """sys.unraisablehook without the traceback Python prints for a stop it drops (a
  KeyboardInterrupt or Terminated raised in a finalizer or a GC callback): the run says
  it was stopped, in a note; other unraisable errors are printed as before."""
  def quiet(unraisable):
    if isinstance(unraisable.exc_value, (KeyboardInterrupt, Terminated)):
      return
    hook(unraisable)
  return quiet


@contextlib.contextmanager
def signals_held():
  """While the run's files are written, SIGINT, SIGTERM and those of ENDING_SIGNALS that
  are pallas-prof's to handle are noted, not raised: a run stopped then still ends with all
  its files whole. Yields the list of those held."""
  held: list[int] = []
  if not _in_main_thread():
    yield held
    return

  def hold(signum, frame):
    received.append(signum)
    held.append(signum)

  held.extend(sorted(_deferred))      # held over an import that is not over yet
  _deferred.clear()

  held_here = [*EXIT_CODES, *(s for s in ENDING_SIGNALS
                              if signal.getsignal(s) in (signal.SIG_DFL, _raise_terminated))]
  previous = {s: signal.signal(s, hold) for s in held_here}
  try:
    yield held
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)


# --- a reader that left: `pallas-prof ... | head` -----------------------------------------

SIGPIPE_EXIT = 128 + signal.SIGPIPE    # the shell's status of a process a closed pipe ended


def reader_gone(stream=None) -> bool:
  """Whether the pipe `stream` (stdout) writes into has no reader left: a BrokenPipeError
  of the script's on stdout is the end `| head` asks for; one on a socket of its own is a
  failure like any other. A pipe's writing end polls as an error once its reader left."""
  try:
    poller = select.poll()
    poller.register((stream or sys.stdout).fileno(), select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))
  except (AttributeError, OSError, ValueError):     # no poll, no file behind the stream
    return False


def stdout_to_nowhere() -> int:
  """After the reader of stdout left: what is still buffered for it goes nowhere (not into
  a BrokenPipeError at exit); the status a Unix tool ends with there."""
  os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
  return SIGPIPE_EXIT


def was_terminated() -> bool:
  """Whether the run was sent a signal that ends it as SIGTERM does (not a Ctrl-C)."""
  return any(s != signal.SIGINT for s in received)


def stop_signal() -> int:
  """The signal that stops the run: the first of the ending ones it was sent, else SIGINT."""
  return next((s for s in received if s != signal.SIGINT), signal.SIGINT)


def stop_exception() -> BaseException:
  """The exception that stops a run sent a signal: KeyboardInterrupt for Ctrl-C, else
  Terminated with the signal."""
  return Terminated(stop_signal()) if was_terminated() else KeyboardInterrupt()


def signal_name(signum: int) -> str:
  return signal.Signals(signum).name


def find_runs(paths: list[str]) -> list[str]:
  """The run directories among `paths`: each one itself, or the runs directly inside it
  (a parent holding one directory per process), in name order."""
  runs: list[str] = []
  for p in paths:
    if os.path.exists(os.path.join(p, REPORT)):
      runs.append(p)
      continue
    if not os.path.isdir(p):
      raise SystemExit(f"pallas-prof: {p!r} is not a directory")
    inside = sorted(os.path.join(p, d) for d in os.listdir(p)
                    if os.path.exists(os.path.join(p, d, REPORT)))
    for run in inside:
      _refuse_link_out(p, run)
    if not inside:
      raise SystemExit(f"pallas-prof: no {REPORT} in {p!r} nor in the directories "
                       "directly inside it; give a directory `pallas-prof run` wrote")
    runs.extend(inside)
  return runs


def _refuse_link_out(folder: str, run: str) -> None:
  """A run found inside `folder` must be there: a link to a run elsewhere would merge what
  the folder does not hold (as `show` refuses a kernel's link out of its run)."""
  target = run_files.leads_out(folder, os.path.basename(run))
  if target is not None:
    raise SystemExit(f"pallas-prof: {run} is a link that leads outside {folder} (to "
                     f"{target}); `report` merges only the runs a folder holds, not what its "
                     "links point to: remove the link, or name that run as an argument "
                     "of its own if you mean to merge it")


def load_runs(run_dirs: list[str]) -> list[tuple[str, RunReport]]:
  """(directory, report) of each run, ordered by JAX process index, then host and pid."""
  loaded = [(d, RunReport.load(d)) for d in run_dirs]

  def key(item):
    o = Origin.of(item[1].origin) or Origin()
    return (1 << 30 if o.process_index is None else o.process_index, o.host or "",
            o.pid or 0, item[0])

  return sorted(loaded, key=key)


def process_name(run_dir: str, run: RunReport) -> str:
  """"process 0/2 vm pid 11917" (summary.Origin.words); a run from before report.json said
  where it ran: its directory's name."""
  origin = Origin.of(run.origin)
  return origin.words if origin else os.path.basename(os.path.normpath(run_dir))


def short_name(run_dir: str, run: RunReport) -> str:
  """"0/2 vm:11917": JAX process index/count, host:pid (the terminal table's cell)."""
  origin = Origin.of(run.origin)
  return origin.short if origin else os.path.basename(os.path.normpath(run_dir))


def rows(runs: list[tuple[str, RunReport]]) -> list[dict]:
  """One row per kernel per device profile per process."""
  out = []
  for run_dir, run in runs:
    origin = Origin.of(run.origin) or Origin()
    for s in summaries(run):
      comp, rt = s.compile, s.runtime
      median_s = rt.median_s if rt is not None else None
      out.append({
          "process": short_name(run_dir, run), "run_dir": run_dir,
          "devices": ", ".join(origin.devices),
          "device": s.device_text,
          "kernel": s.label, "grid": s.grid_text,
          "compile_ms": comp.total_ms if comp is not None else None,
          "cache": comp.cache if comp is not None else None,
          "median_us": median_s * 1e6 if median_s is not None else None,
          "launches": s.cpu_launches, "exit_code": run.exit_code,
      })
  return out


def merged_table(runs: list[tuple[str, RunReport]]) -> Table:
  table_rows = rows(runs)
  gpu = any(r["median_us"] is not None for r in table_rows)
  t = Table(title=f"kernels of {len(runs)} processes", box=box.SIMPLE_HEAVY,
            title_justify="left")
  for col in ("process host:pid", "device", "kernel", "grid", "compile",
              "median µs" if gpu else "CPU launches"):
    t.add_column(col, justify="left" if col in ("process host:pid", "device", "kernel", "grid")
                 else "right", overflow="fold",
                 no_wrap=col in ("process host:pid", "device", "kernel"))   # one line a row at 80 wide
  for r in table_rows:
    compile_text = (f"{r['cache']} cache" if r["cache"] in ("memory", "disk")
                    else "-" if r["compile_ms"] is None else f"{r['compile_ms']:.0f} ms")
    last = (("-" if r["median_us"] is None else f"{r['median_us']:.1f}") if gpu
            else str(r["launches"] if r["launches"] is not None else "-"))
    cells = (r["process"], r["device"] or r["devices"] or "-", r["kernel"], r["grid"],
             compile_text, last)
    t.add_row(*(Text(c) for c in cells))          # as written: no rich markup in labels
  return t


def report_merged(paths: list[str], *, html: bool = False, html_out: str | None = None,
                  as_json: bool = False) -> int:
  """`pallas-prof report DIR...` for several runs."""
  runs = load_runs(find_runs(paths))
  if as_json:
    print(to_json({"runs": [{"dir": d, "process": process_name(d, r), "report": r}
                           for d, r in runs]}, indent=1))
    return 0
  if html:
    # lazy: at the top it would load markupsafe whenever this module is imported
    from .html import write_merged_html
    out = html_out or os.path.join(_common_parent([d for d, _ in runs]), HTML)
    print(write_merged_html(runs, [process_name(d, r) for d, r in runs], out))
    return 0
  # lazy: at the top it would load numpy whenever this module is imported
  from .terminal.render import console
  con = console()
  con.print(merged_table(runs))
  for d, r in runs:
    if r.errors or r.exit_code:
      con.print(f"{process_name(d, r)}: exit {r.exit_code}, "
                f"{len(r.errors)} lowering error(s) ({d})", markup=False)
  return 0


def _common_parent(dirs: list[str]) -> str:
  return os.path.commonpath([os.path.abspath(d) for d in dirs]) if len(dirs) > 1 \
      else os.path.dirname(os.path.abspath(dirs[0]))
