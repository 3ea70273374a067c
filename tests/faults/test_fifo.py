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
  path = str(fifo) if special == "fifo" else os.devnull
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
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
