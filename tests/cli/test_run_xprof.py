"""`pallas-prof run --xprof DIR`: the script profiled by jax.profiler into DIR, the profile
holding pallas-prof's plane beside JAX's own, and the kernel's op there named for it (issue
41 item 1; docs/xprof.md). XProf's own converter reading such a plane back is checked in
tests/instrument/test_xplane.py."""
from __future__ import annotations

import glob
import os

from pallas_prof.instrument import xplane

from .test_cli import EXAMPLES, pallas_prof


def test_run_writes_a_jax_profile_with_pallas_profs_plane(tmp_path):
  logdir, out = tmp_path / "xprof", tmp_path / "run"
  result = pallas_prof("run", "--out", str(out), "--xprof", str(logdir),
                       os.path.join(EXAMPLES, "vector_add.py"), cache_dir=tmp_path / "cache")
  assert result.returncode == 0, result.stdout + result.stderr
  assert "--xprof" not in result.stdout + result.stderr     # no problem told
  [path] = glob.glob(os.path.join(str(logdir), "plugins", "profile", "*", "*.xplane.pb"))
  space = xplane.messages()["XSpace"].FromString(open(path, "rb").read())
  planes = {p.name: p for p in space.planes}
  assert "/host:CPU" in planes, list(planes)            # JAX's own profile of the script
  ours = planes[xplane.PLANE_NAME]
  names = {v.name for v in ours.event_metadata.values()}
  assert {"pallas_call add_kernel", "compile add_kernel", "advise add_kernel"} <= names, names
  assert "kernel add_kernel" in {line.name for line in ours.lines}
  # the run's own files are written as without --xprof
  assert (out / "report.json").is_file() and (out / "trace.perfetto.json").is_file()


def test_run_says_when_there_is_no_trace_to_add(tmp_path):
  logdir = tmp_path / "xprof"
  result = pallas_prof("run", "--out", str(tmp_path / "run"), "--no-trace", "--no-analysis",
                       "--xprof", str(logdir), os.path.join(EXAMPLES, "vector_add.py"),
                       cache_dir=tmp_path / "cache")
  assert result.returncode == 0, result.stdout + result.stderr
  said = result.stdout + result.stderr
  assert f"--xprof {logdir}: pallas-prof's plane was not added: --no-trace recorded none" in said
  # JAX's profile of the script is there all the same, without pallas-prof's plane
  [path] = glob.glob(os.path.join(str(logdir), "plugins", "profile", "*", "*.xplane.pb"))
  space = xplane.messages()["XSpace"].FromString(open(path, "rb").read())
  assert xplane.PLANE_NAME not in {p.name for p in space.planes}


def test_under_xprof_in_situ_capture_gives_way_to_jaxs_profiler(monkeypatch):
  """On the H200, `run --xprof` started CUPTI capture beside jax.profiler's own: the capture
  came back empty ("CUPTI recorded no kernel ... a jax.profiler trace started inside it?").
  Under --xprof it is not started, and the run says why."""
  from pallas_prof.cli.run_steps import capture
  from pallas_prof.profiler import driver
  from pallas_prof.profiler.timing import insitu
  started = []
  monkeypatch.setattr(driver, "gpu_status", lambda: (True, "a GPU"))
  monkeypatch.setattr(insitu, "capture", lambda: started.append(1) or _Capture())
  notes = []
  assert capture.start_insitu(True, notes, xprof=True) is None
  assert started == [] and notes == [capture.XPROF_HOLDS_CUPTI]
  assert capture.start_insitu(True, notes, xprof=False) is not None and started == [1]


class _Capture:
  def __enter__(self):
    return self


def test_the_profiled_run_turns_xlas_command_buffers_off(tmp_path):
  """On the H200 (jax 0.11.2) XLA launched every kernel of a jitted step from a command
  buffer, and the profile named each launch's op `command_buffer_1`: pallas-prof's label
  and line were nowhere. The profiled script runs with the buffers off, before JAX starts
  its backends; the CPU's XLA takes the flag too."""
  script = tmp_path / "flags.py"
  script.write_text("import os\nimport jax\n"
                    "print('XLA_FLAGS', os.environ.get('XLA_FLAGS'))\n"
                    "print(jax.numpy.ones(3).sum())\n")
  result = pallas_prof("run", "--out", str(tmp_path / "run"), "--xprof", str(tmp_path / "x"),
                       str(script), cache_dir=tmp_path / "cache")
  assert result.returncode == 0, result.stdout + result.stderr
  # set only while JAX's backends had not started (else the run says it was too late)
  assert "XLA_FLAGS --xla_gpu_enable_command_buffer=" in result.stdout
  assert "3.0" in result.stdout


def test_a_users_command_buffer_flag_is_kept_and_a_late_start_is_said(monkeypatch):
  from pallas_prof.backend import compat
  from pallas_prof.instrument import xprof_run
  env = {"XLA_FLAGS": "--xla_gpu_enable_command_buffer=FUSION --xla_dump_to=/tmp/d"}
  assert xprof_run.without_command_buffers(env) == xprof_run.USERS_COMMAND_BUFFERS
  assert env["XLA_FLAGS"] == "--xla_gpu_enable_command_buffer=FUSION --xla_dump_to=/tmp/d"
  env = {"XLA_FLAGS": "--xla_dump_to=/tmp/d"}
  monkeypatch.setattr(compat, "backends_initialized", lambda: False)
  assert xprof_run.without_command_buffers(env) == xprof_run.NO_COMMAND_BUFFERS
  assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d --xla_gpu_enable_command_buffer="
  env = {}
  monkeypatch.setattr(compat, "backends_initialized", lambda: True)
  assert xprof_run.without_command_buffers(env) == xprof_run.TOO_LATE and env == {}
