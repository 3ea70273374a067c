"""A path setting that names a FIFO, a device or a socket (issue 48, item 4).
PALLAS_PROF_TRACE_FILE naming a FIFO nobody reads hung `import pallas_prof` for ever (the
open for writing waits for a reader); PALLAS_PROF_PERFETTO renamed its file over the FIFO,
replacing what the user made. Every path setting now refuses such a file the same way: the
CLI before the script runs (exit 2, naming the variable), a read in a program with a warning
that names it (the run goes on as if it were unset), and the trace exporters named with one
in code with an error that names the file."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from . import inject
from .test_run_writes import _env

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATH_SETTINGS = ["PALLAS_PROF_TRACE_FILE", "PALLAS_PROF_PERFETTO"]


@pytest.fixture
def fifo(tmp_path):
  path = tmp_path / "pipe"
  os.mkfifo(path)
  return path


def _link(tmp_path, device: str) -> str:
  """A link in `tmp_path` to `device`: what pallas-prof must take as that device, while an
  old writer that renamed over it replaces the link, never the machine's device (as root,
  a rename over /dev/zero itself replaced it with a file)."""
  path = str(tmp_path / os.path.basename(device))
  os.symlink(device, path)
  return path


def _still_a_device(path) -> None:
  assert os.path.islink(path) and stat.S_ISCHR(os.stat(path).st_mode), \
      f"{path} was replaced by a file"


def _still_a_fifo(path) -> None:
  """Nothing persisted: the user's FIFO is there as it was, not replaced by a file."""
  assert stat.S_ISFIFO(os.lstat(path).st_mode), "the FIFO was replaced"


@pytest.mark.fault("fifo")
@pytest.mark.parametrize("name", PATH_SETTINGS)
def test_tracing_a_process_to_a_fifo_neither_hangs_nor_replaces_it(tmp_path, fifo, name):
  env = _env(tmp_path, str(tmp_path / "cache"))
  env.update({"PALLAS_PROF_TRACE": "1", name: str(fifo)})
  code = "import pallas_prof\nprint('imported', flush=True)\n"
  done = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True,
                        text=True, env=env, cwd=tmp_path, timeout=120)
  inject.assert_alive(done.returncode, done.stderr)
  assert done.returncode == 0 and "imported" in done.stdout, done.stderr
  inject.assert_clear(done.stderr, name, str(fifo), "FIFO")
  _still_a_fifo(fifo)


@pytest.mark.fault("fifo")
@pytest.mark.parametrize("name", PATH_SETTINGS)
def test_a_run_with_a_path_setting_on_a_fifo_is_refused_before_the_script(tmp_path, fifo,
                                                                          name):
  script = tmp_path / "never.py"
  script.write_text("open('ran', 'w').close()\n")
  env = _env(tmp_path, str(tmp_path / "cache"))
  env[name] = str(fifo)
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out",
                         str(tmp_path / "out"), str(script)], capture_output=True, text=True,
                        env=env, cwd=tmp_path, timeout=120)
  inject.assert_alive(done.returncode, done.stderr)
  assert done.returncode == 2, done.stdout + done.stderr
  inject.assert_clear(done.stderr, name, str(fifo), "FIFO", "not run")
  assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()
  _still_a_fifo(fifo)


EXPORTERS = """\
import os, sys
from pallas_prof.instrument.otlp_json import OtlpJsonFileExporter
from pallas_prof.instrument.perfetto_trace import PerfettoExporter
for make in (OtlpJsonFileExporter, PerfettoExporter):
  try:
    make(sys.argv[1])
    print(make.__name__, "took it")
  except OSError as e:
    print(make.__name__, "refused:", e)
"""


@pytest.mark.fault("fifo")
@pytest.mark.parametrize("special", ["fifo", "device"])
def test_trace_files_named_in_code_refuse_what_is_not_a_regular_file(tmp_path, fifo, special):
  """tracing(otlp_json=..., perfetto=...) given a FIFO or a device: an error naming the
  file, at once (the FIFO's open blocked; the Perfetto file's rename replaced it)."""
  path = str(fifo) if special == "fifo" else _link(tmp_path, "/dev/zero")
  done = subprocess.run([sys.executable, "-c", EXPORTERS, path], capture_output=True,
                        text=True, env=_env(tmp_path, str(tmp_path / "cache")), cwd=ROOT,
                        timeout=120)
  inject.assert_alive(done.returncode, done.stderr)
  lines = done.stdout.splitlines()
  assert len(lines) == 2 and all("refused:" in line for line in lines), done.stdout
  for line in lines:
    inject.assert_clear(line, path, "not a regular file")
  assert "FIFO" in done.stdout if special == "fifo" else "character device" in done.stdout
  if special == "fifo":
    _still_a_fifo(fifo)
  else:
    _still_a_device(path)


# --- the null device discards (the one special file taken as an output) -------------------

@pytest.mark.fault("fifo")
@pytest.mark.parametrize("name", PATH_SETTINGS)
def test_a_trace_setting_on_the_null_device_discards_the_traces(tmp_path, name):
  """PALLAS_PROF_TRACE_FILE=/dev/null (or PALLAS_PROF_PERFETTO) asks that the traces be thrown
  away: no warning, no trace file anywhere instead (the default pallas-prof-traces.jsonl in
  the working folder was written, after a warning that called /dev/null a device), and
  /dev/null stays the null device."""
  env = _env(tmp_path, str(tmp_path / "cache"))
  env.update({"PALLAS_PROF_TRACE": "1", "OTEL_TRACES_EXPORTER": "none", name: os.devnull})
  code = "import pallas_prof\npallas_prof.install()\nprint('imported', flush=True)\n"
  work = tmp_path / "work"
  work.mkdir()
  env["PYTHONPATH"] = ROOT
  done = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True,
                        text=True, env=env, cwd=work, timeout=120)
  inject.assert_alive(done.returncode, done.stderr)
  assert done.returncode == 0 and "imported" in done.stdout, done.stderr
  assert "Warning" not in done.stderr and name not in done.stderr, done.stderr
  assert os.listdir(work) == [], os.listdir(work)
  assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.fault("fifo")
def test_trace_files_named_in_code_take_the_null_device(tmp_path):
  link = _link(tmp_path, os.devnull)
  for path in (os.devnull, link):
    done = subprocess.run([sys.executable, "-c", EXPORTERS, path], capture_output=True,
                          text=True, env=_env(tmp_path, str(tmp_path / "cache")), cwd=ROOT,
                          timeout=120)
    inject.assert_alive(done.returncode, done.stderr)
    assert done.stdout.splitlines() == ["OtlpJsonFileExporter took it",
                                        "PerfettoExporter took it"], done.stdout + done.stderr
  _still_a_device(link)
  assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


# --- the files the commands write where the user says: show --eject, report --html-out ----

OUTPUTS = {
    "show --eject": lambda run, path: ["show", "softmax_kernel", "--dir", run, "--eject", path],
    "report --html-out": lambda run, path: ["report", run, "--html", "--html-out", path],
}


def _special(tmp_path, what: str) -> str:
  if what == "fifo":
    path = str(tmp_path / "pipe")
    os.mkfifo(path)
    return path
  if what == "device":
    return _link(tmp_path, "/dev/zero")
  path = str(tmp_path / "folder")
  os.mkdir(path)
  return path


def _kept(path: str, what: str) -> None:
  if what == "fifo":
    _still_a_fifo(path)
  elif what == "device":
    _still_a_device(path)
  else:
    assert os.path.isdir(path) and os.listdir(path) == [], "the folder was changed"


@pytest.fixture(scope="module")
def a_run(tmp_path_factory):
  from tests.faults.cli_runs import SOFTMAX, pallas_prof
  out = tmp_path_factory.mktemp("run") / "softmax"
  done = pallas_prof("run", "--out", str(out), SOFTMAX,
                     cache_dir=tmp_path_factory.mktemp("cache"))
  assert done.returncode == 0, done.stdout + done.stderr
  return str(out)


@pytest.mark.fault("fifo")
@pytest.mark.parametrize("what", ["fifo", "device", "folder"])
@pytest.mark.parametrize("command", list(OUTPUTS))
def test_an_output_option_on_a_fifo_device_or_folder_is_refused(tmp_path, a_run, command, what):
  """`show --eject FIFO` blocked for ever; `report --html-out` renamed its page over a FIFO or
  a device (as root over /dev/zero itself: the machine's device became a file) and ended in
  a traceback on a folder. Each is refused, naming the option and the file; nothing of the
  user's is replaced."""
  path = _special(tmp_path, what)
  args = OUTPUTS[command](a_run, path)
  env = dict(_env(tmp_path, str(tmp_path / "cache")), PYTHONPATH=ROOT)
  try:
    done = subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
  except subprocess.TimeoutExpired:
    raise inject.AbortedProcess(f"`pallas-prof {' '.join(args)}` hung on a {what}") from None
  inject.assert_alive(done.returncode, done.stderr)
  assert done.returncode != 0, done.stdout + done.stderr
  assert "Traceback" not in done.stderr, done.stderr
  inject.assert_clear(done.stderr, command.split()[-1], path, "not a regular file")
  _kept(path, what)


@pytest.mark.fault("fifo")
@pytest.mark.parametrize("command", list(OUTPUTS))
def test_an_output_option_on_the_null_device_writes_nothing(tmp_path, a_run, command):
  link = _link(tmp_path, os.devnull)
  args = OUTPUTS[command](a_run, link)
  env = dict(_env(tmp_path, str(tmp_path / "cache")), PYTHONPATH=ROOT)
  done = subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                        text=True, env=env, cwd=tmp_path, timeout=120, stdin=subprocess.DEVNULL)
  assert done.returncode == 0, done.stdout + done.stderr
  _still_a_device(link)
  assert set(os.listdir(tmp_path)) <= {"cache", "tmp", "null"}, os.listdir(tmp_path)


@pytest.mark.fault("fifo")
@pytest.mark.parametrize("what", ["fifo", "file", "under a file"])
def test_run_xprof_on_what_is_not_a_folder_is_refused_before_the_script(tmp_path, what):
  """`run --xprof PATH` where PATH is a FIFO or a file (or lies under one): JAX's profiler
  failed to export there after the script had run, a traceback that lost the run (no
  report.json). Refused before the script runs, naming the option and the path."""
  script = tmp_path / "never.py"
  script.write_text("open('ran', 'w').close()\n")
  if what == "fifo":
    path = str(tmp_path / "pipe")
    os.mkfifo(path)
  else:
    (tmp_path / "a_file").write_text("mine\n")
    path = str(tmp_path / "a_file") + ("/xprof" if what == "under a file" else "")
  env = _env(tmp_path, str(tmp_path / "cache"))
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out",
                         str(tmp_path / "out"), "--xprof", path, str(script)],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                        stdin=subprocess.DEVNULL)
  inject.assert_alive(done.returncode, done.stderr)
  assert "Traceback" not in done.stderr, done.stderr
  assert done.returncode == 2, done.stdout + done.stderr
  inject.assert_clear(done.stderr, "--xprof", path, "not a folder", "not run")
  assert not (tmp_path / "ran").exists() and not (tmp_path / "out").exists()
  if what == "fifo":
    _still_a_fifo(path)
  else:
    assert (tmp_path / "a_file").read_text() == "mine\n"
