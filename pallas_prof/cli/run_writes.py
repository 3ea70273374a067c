"""Writing a run's folder so that a fault loses as little as it can, and says what it lost.

    claim(out, force)   the folder the run writes in: refused (exit 2, before the script
                        runs) when it holds another run's files, is being written by one,
                        or cannot be written at all; with --force, a sibling folder that
                        replaces it when the run ends
    RunFiles            each file written whole or not at all (safe_files.write_atomic);
                        each one that fails (a full disk, a read-only folder) kept as
                        missing: a note in report.json, a line at the end of the output

The order of the writes is run.py's: report.json first, then the traces, the kernels'
files and report.html, then report.json again with what went missing.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import shutil
import socket
import sys
import tempfile
import warnings

from .. import run_layout
from ..safe_files import write_atomic
from . import processes, run_directory
from .report import Traces

REPORT = run_layout.REPORT
MARKER = ".pallas-prof-writing"   # "host pid" of the run writing the folder; gone when it ends
FILE_MODE = 0o644                 # a run's files are the user's record, readable as theirs are
REPORT_ROOM = 4096                # held back beyond report.json's size, for the notes it gains
GAVE_WAY = f"removed to make room for {REPORT} on the full disk"
WRITING = ("pallas-prof was still writing this run's other files when it saved this report; "
           "it stopped before it could say which of them were written (a full disk, a killed "
           "process): some files listed here may be missing")


class RunResult:
  """What `run.run_and_report` gives `run` and `advise`: the report, where the run is, the
  script's outcome, the kernel's error that ended it, the command's exit code, the
  lines to print last (what could not be written, or put in place), and what masks the
  secrets in what is printed of the error (the report is masked already)."""

  def __init__(self, report, out_dir, outcome, kernel_error, exit_code, closing,
               redact=None):
    self.report, self.out_dir, self.outcome = report, out_dir, outcome
    self.redact = redact
    self.kernel_error, self.exit_code = kernel_error, exit_code
    self.closing = [line for line in closing if line]

  def tell(self) -> None:
    # lazy: at the top it would load numpy whenever this module is imported
    from .terminal.render import say
    for line in self.closing:
      say(line)


class OutFolder:
  """Where the run writes (`path`) and where its files end up (`final`): the same folder,
  except with --force, where `path` is a sibling that replaces `final` at the end."""

  def __init__(self, path: str, final: str):
    self.path, self.final = path, final

  @property
  def aside(self) -> bool:
    return self.path != self.final


def refuse(message: str):
  """Ends the command before the script runs: nothing is lost yet."""
  print(f"pallas-prof: {message}", file=sys.stderr)
  raise SystemExit(2)


def claim(out: str | None, force: bool = False) -> OutFolder:
  """The run's folder, marked as this run's (MARKER, created exclusively: of two runs
  started at once on one --out, one gets it, the other is refused)."""
  if out is None:
    new_parent = _missing_parent(run_directory.default_out_dir())
    path = _or_refuse(lambda: processes.fresh_dir(run_directory.default_out_dir()),
                      run_directory.default_out_dir())
    _mark(path)
    _ignore_in_git(new_parent)
    return OutFolder(path, path)
  taken = _taken_by(out)
  if taken is None:
    new_parent = _missing_parent(out)
    _or_refuse(lambda: os.makedirs(out, exist_ok=True), out)
    _mark(out)
    _ignore_in_git(new_parent)
    return OutFolder(out, out)
  if _writer_alive(out):
    refuse(f"{taken}; give each run its own --out")
  if not force:
    refuse(f"{taken}: a run there would mix its files with them. Give an empty or new "
           "folder, or add --force to replace them with this run's")
  if not os.path.exists(os.path.join(out, REPORT)) and \
      not os.path.exists(os.path.join(out, MARKER)):
    refuse(f"{taken}, and none of a pallas-prof run (no {REPORT}): --force replaces only "
           "a run's folder. Give another --out")
  parent, name = os.path.split(os.path.abspath(out))
  aside = _or_refuse(lambda: tempfile.mkdtemp(prefix=f".{name}.pallas-prof-new-", dir=parent),
                     parent)
  os.chmod(aside, 0o755)
  return OutFolder(aside, out)


GITIGNORE = ("# made by pallas-prof with the folder: its runs are records, not sources "
             "(remove this file to keep them in git)\n*\n")


def _missing_parent(run_dir: str) -> str | None:
  """The folder the run's folder goes in, where it does not exist yet (pallas-prof makes it)."""
  parent = os.path.dirname(os.path.abspath(run_dir))
  return None if os.path.exists(parent) else parent


def _ignore_in_git(made: str | None) -> None:
  """A folder of runs pallas-prof made (pallas-prof-out/, runs/) keeps out of the user's git,
  as pytest's .pytest_cache does: a .gitignore of `*` in it. Never in a folder that was
  there before, never over a file of the user's; a convenience, so a failure is no error."""
  if made is None:
    return
  try:
    with open(os.path.join(made, ".gitignore"), "x") as f:
      f.write(GITIGNORE)
  except OSError:
    pass


def _or_refuse(make, where: str):
  try:
    return make()
  except OSError as e:
    refuse(f"cannot write in {where} ({_reason(e)}); {_what_to_do(e)}")


def _what_to_do(e: OSError) -> str:
  if e.errno == errno.ENOSPC:
    return "free space on that disk, or give --out on another"
  if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
    return "give --out a folder you can write"
  return "give another --out"


def _reason(e: OSError) -> str:
  return e.strerror or type(e).__name__


def _taken_by(out: str) -> str | None:
  """Why `out` cannot simply be written (another run's files, a file), or None."""
  if not os.path.lexists(out):
    return None
  if not os.path.isdir(out):
    refuse(f"--out {out} is a file, not a folder; give a folder")
  try:
    names = sorted(os.listdir(out))
  except OSError as e:
    refuse(f"cannot read --out {out} ({_reason(e)}); {_what_to_do(e)}")
  if not names:
    return None
  if MARKER in names:
    writer = _marker(out)
    return (f"--out {out} is being written by another pallas-prof run ({writer})"
            if _writer_alive(out) else
            f"--out {out} holds the files of a run that did not finish ({writer or 'unknown'})")
  shown = ", ".join(n + ("/" if os.path.isdir(os.path.join(out, n)) else "") for n in names[:4])
  more = f" and {len(names) - 4} more" if len(names) > 4 else ""
  return f"--out {out} is not empty (it holds {shown}{more})"


def _marker(out: str) -> str:
  try:
    with open(os.path.join(out, MARKER)) as f:
      host, pid = f.read(200).split()[:2]
    return f"process {int(pid)} on {host}"
  except (OSError, ValueError):
    return ""


def _writer_alive(out: str) -> bool:
  """Whether the run named in `out`'s MARKER still runs (a process on another host is
  taken as running: it cannot be asked)."""
  try:
    with open(os.path.join(out, MARKER)) as f:
      host, pid = f.read(200).split()[:2]
    pid = int(pid)
  except (OSError, ValueError):
    return False
  if host != socket.gethostname():
    return True
  if pid == os.getpid():
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def _mark(path: str) -> None:
  """MARKER, made whole in one step: written under a name of this process's own, then linked
  to MARKER, which fails where another run's is there. (Made empty and then written, another
  run that read it in between took a live run for a dead one.)"""
  mine = os.path.join(path, f"{MARKER}.{os.getpid()}")
  try:
    fd = os.open(mine, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, FILE_MODE)
    try:
      os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
    finally:
      os.close(fd)
    try:
      os.link(mine, os.path.join(path, MARKER))
    except FileExistsError:
      refuse(f"--out {path} was taken by another pallas-prof run as this one started "
             f"({_marker(path) or 'its marker is there'}); give each run its own --out")
    except OSError:     # a file system without hard links: made exclusively, then written
      _mark_in_place(path)
  except OSError as e:
    refuse(f"cannot write in {path} ({_reason(e)}); {_what_to_do(e)}")
  finally:
    with contextlib.suppress(OSError):
      os.unlink(mine)


def _mark_in_place(path: str) -> None:
  try:
    fd = os.open(os.path.join(path, MARKER), os.O_CREAT | os.O_EXCL | os.O_WRONLY, FILE_MODE)
  except FileExistsError:
    refuse(f"--out {path} was taken by another pallas-prof run as this one started "
           f"({_marker(path) or 'its marker is there'}); give each run its own --out")
  try:
    os.write(fd, f"{socket.gethostname()} {os.getpid()}\n".encode())
  except OSError as e:
    os.close(fd)
    _unmark(path)
    refuse(f"cannot write in {path} ({_reason(e)}); {_what_to_do(e)}")
  os.close(fd)


def _unmark(path: str) -> None:
  try:
    os.unlink(os.path.join(path, MARKER))
  except OSError:
    pass


def finish(folder: OutFolder) -> tuple[str, str | None]:
  """The run's files in their place: the marker removed and, with --force, the old folder
  swapped for the new one. Returns (where the run is, a problem to tell or None)."""
  _unmark(folder.path)
  if not folder.aside:
    return folder.path, None
  parent, name = os.path.split(os.path.abspath(folder.final))
  try:
    old = tempfile.mkdtemp(prefix=f".{name}.pallas-prof-old-", dir=parent)
  except OSError as e:
    return folder.path, _not_swapped(folder, e)
  try:
    os.rename(folder.final, old)       # over the empty folder mkdtemp made
  except FileNotFoundError:
    pass                               # removed while the run went on: nothing to replace
  except OSError as e:
    os.rmdir(old)
    return folder.path, _not_swapped(folder, e)
  try:
    os.rename(folder.path, folder.final)
  except OSError as e:
    if os.path.isdir(old):
      os.rename(old, folder.final)
    return folder.path, _not_swapped(folder, e)
  shutil.rmtree(old, ignore_errors=True)
  return folder.final, None


def _not_swapped(folder: OutFolder, e: OSError) -> str:
  return (f"--force could not put this run in place of {folder.final} ({_reason(e)}): the "
          f"old run is still there, and this one is in {folder.path}")


class RunFiles:
  """The files of one run as they are written, each whole or not at all; `missing` holds
  each one that could not be written, by its path in the run folder, with the reason."""

  def __init__(self, root: str):
    self.root = root
    self.missing: dict[str, str] = {}
    self._reserve: str | None = None

  def write(self, path: str, data: bytes | str) -> bool:
    try:
      write_atomic(path, data, mode=FILE_MODE)
      return True
    except OSError as e:
      self.lost(path, e)
      return False

  def lost(self, path: str, error: OSError) -> None:
    self.missing[os.path.relpath(os.path.join(self.root, path), self.root)] = _reason(error)

  def attempt(self, path: str, action) -> None:
    """action() (which writes `path`), its OSError kept as `path` missing."""
    try:
      action()
    except OSError as e:
      self.lost(path, e)

  def hold_room(self, nbytes: int) -> None:
    """Holds `nbytes` of the disk back (a file of that size, allocated) for report.json's
    last version: the kernels' files filling the disk must not leave it without room."""
    path = os.path.join(self.root, ".pallas-prof-room")
    try:
      fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    except OSError:
      return
    try:
      os.posix_fallocate(fd, 0, nbytes + REPORT_ROOM)
      self._reserve = path
    except (OSError, AttributeError):
      os.close(fd)
      fd = None
      os.unlink(path)
    finally:
      if fd is not None:
        os.close(fd)

  def release_room(self) -> None:
    if self._reserve is not None:
      try:
        os.unlink(self._reserve)
      except OSError:
        pass
      self._reserve = None

  def notes(self) -> list[str]:
    """One note per reason, naming the files it cost."""
    by_reason: dict[str, list[str]] = {}
    for path, reason in self.missing.items():
      by_reason.setdefault(reason, []).append(path)
    return [f"{len(paths)} file(s) of this run are missing ({reason}): "
            f"{', '.join(sorted(paths))}; {_fix(reason)}"
            for reason, paths in by_reason.items()]


def _fix(reason: str) -> str:
  if reason in (os.strerror(errno.ENOSPC), GAVE_WAY):
    return "free space on the run folder's disk (or give --out on another) and run again"
  if reason in (os.strerror(errno.EACCES), os.strerror(errno.EROFS), os.strerror(errno.EPERM)):
    return "give --out a folder you can write and run again"
  return "run again to write them"


def closing_line(where: str, files: RunFiles, report: str) -> str | None:
  """The last line of a run that lost files: the folder, what is missing, what to do.
  `report`: which report.json the folder has, "final", "first" (written before the other
  files, without their fate) or "none"."""
  if not files.missing:
    return None
  missing = sorted(files.missing)
  shown = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
  reasons = sorted(set(files.missing.values()))
  fix = _fix(reasons[0])
  said = {"final": f"The notes of its {REPORT} list them",
          "first": f"Its {REPORT} was written before them and does not say which are missing",
          "none": f"Without a {REPORT}, what is printed above is this run's only record"}
  return (f"pallas-prof: the run is in {where}/, but {len(missing)} of its files are missing "
          f"({'; '.join(reasons)}): {shown}. {said[report]}. {fix[0].upper()}{fix[1:]}.")


# --- the write phase, in its order -----------------------------------------------------

def write_run(files: RunFiles, report, stop_tracing, save_kernels, add_probes):
  """Writes the run: report.json first (a full disk makes the traces give way to it), the
  traces, the kernels' files, report.html, then report.json again with what is missing.
  Returns (the final report, which report.json the folder has: see closing_line)."""
  # lazy: at the top it would load markupsafe whenever this module is imported
  from .html import write_or_warn
  first = dataclasses.replace(report, notes=(*report.notes, WRITING))
  state = "first" if _write_first(files, first, stop_tracing) else "none"
  if state == "first":
    files.hold_room(len(first.to_json(indent=1).encode()))
  stop_tracing()
  save_kernels()
  run_directory.save_diffs(files.root, report, files.attempt, files.write)
  add_probes()
  html = os.path.join(files.root, run_layout.HTML)
  files.attempt(html, lambda: write_or_warn(files.root, _final(report, files)))
  files.release_room()
  final = _final(report, files)
  report_path = os.path.join(files.root, REPORT)
  files.missing.pop(REPORT, None)
  files.attempt(report_path, lambda: final.save(files.root))
  return final, ("final" if REPORT not in files.missing else state)


def _write_first(files: RunFiles, first, stop_tracing) -> bool:
  path = os.path.join(files.root, REPORT)
  files.attempt(path, lambda: first.save(files.root))
  if files.missing.get(REPORT) != os.strerror(errno.ENOSPC):
    return REPORT not in files.missing
  stop_tracing()                # the trace files are closed before they give way
  traces = [n for n in first.traces.files() if os.path.isfile(os.path.join(files.root, n))]
  if not _room_with(files.root, traces, len(first.to_json(indent=1).encode())):
    return False                 # removing them would not make room: they stay
  for name in traces:
    try:
      os.unlink(os.path.join(files.root, name))
      files.missing[name] = GAVE_WAY
    except FileNotFoundError:
      pass
    except OSError as e:
      files.lost(os.path.join(files.root, name), e)
  del files.missing[REPORT]
  files.attempt(path, lambda: first.save(files.root))
  return REPORT not in files.missing


def _room_with(root: str, names: list[str], needed: int) -> bool:
  """Whether the disk of `root` has room for `needed` bytes once `names` are removed."""
  try:
    disk = os.statvfs(root)
    freed = sum(os.path.getsize(os.path.join(root, n)) for n in names)
  except OSError:
    return False
  return disk.f_bavail * disk.f_frsize + freed >= needed + REPORT_ROOM


def _final(report, files: RunFiles):
  """`report` without the files that are missing, with a note on each reason."""
  missing = files.missing
  kernels = tuple(dataclasses.replace(k, files={what: p for what, p in k.files.items()
                                                if not _under_missing(p, missing)})
                  for k in report.kernels)
  traces = Traces(**{field: (name if name and name not in missing else None)
                     for field, name in dataclasses.asdict(report.traces).items()})
  return dataclasses.replace(report, kernels=kernels, traces=traces,
                             notes=(*report.notes, *files.notes()))


def _under_missing(path: str, missing: dict[str, str]) -> bool:
  return path in missing or any(path.startswith(m + os.sep) for m in missing)


def stop_tracing(tracer, running, files: RunFiles) -> None:
  """Ends the spans (the Perfetto file is written now); a trace file that could not be
  written whole is removed and kept as missing (a part of one would pass for all)."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)   # told once, at the end of the run
    running.close()
  for path, error in (tracer.file_failures() if tracer is not None else ()):
    try:
      os.unlink(path)
    except OSError:
      pass
    files.lost(path, error)


def save_kernels(out_dir: str, records, files: RunFiles, redact=None) -> None:
  """Each kernel's files (run_directory.save_kernel), each failure kept as missing; with
  `redact` (entries.redactor), the secrets in their JSON files masked (kernel.json's
  source locations name the user's files)."""
  write = files.write if redact is None else masked_json(files.write, redact)
  for rec in records:
    # the source that was compiled (a tuned or worked-around lowering), with its stages
    compiled_from = (rec.compiled.generated if rec.compiled is not None else None) \
        or rec.generated
    kernel_dir = os.path.join(out_dir, run_layout.kernel_dir(
        run_directory.kernel_dir_name(rec.label)))
    files.attempt(kernel_dir, lambda: run_directory.save_kernel(
        out_dir, rec.label, compiled_from, rec.compiled, aliases=rec.input_output_aliases,
        write=write))
    _remove_if_empty(kernel_dir)      # none of its files written: no folder that says otherwise
  _remove_if_empty(os.path.join(out_dir, run_layout.KERNELS))


def masked_json(write, redact):
  """`write(path, data)`, with every string of a JSON file's data masked by `redact`; the
  file is written as it was made where nothing in it needed masking."""
  def masked(path: str, data) -> None:
    if path.endswith(".json") and isinstance(data, str):
      meta = json.loads(data)
      masked_meta = redact(meta)
      if masked_meta is not meta:
        data = json.dumps(masked_meta, indent=1)
    return write(path, data)
  return masked


def _remove_if_empty(folder: str) -> None:
  try:
    os.rmdir(folder)
  except OSError:
    pass                              # not empty (or not there): as it should be


def add_probe_tracks(path: str, reports, files: RunFiles) -> None:
  """The probed kernels' SM tracks, added to the Perfetto file (GPU runs with --probes)."""
  if any(k.probes is not None for r in reports for k in r.kernels):
    # lazy: at the top it would load jax, numpy, opentelemetry whenever this module is imported
    from ..instrument.probe_tracks import add_to_trace
    files.attempt(path, lambda: add_to_trace(path, reports))
