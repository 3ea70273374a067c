"""Outside failures are not Triton failures (issue 38, item 3b).

A compile worker killed from outside, a disk that fills while the worker writes, a
damaged compile-cache entry: each is the machine's failure. The compile is retried
once on a fresh worker with the cache bypassed; the call gets its kernel (or a clear
error that says it was the machine's and what to do), no workaround plan is saved,
and the settings shown are the ones compiled. A crash of Triton's that reproduces
still gets today's workaround and its saved plan; a saved plan is checked when read.

Each test asserts the suite's three properties (tests/faults/inject.py): the answer
is right or the error clear; nothing wrong persisted (a later compile, or process,
does not inherit the fault); where a run was going on, its report exists.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import warnings

import jax
import jax.numpy as jnp
import pytest

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend.compiling import compile_cache, compile_worker, worker_output
from pallas_prof.backend.compiling.failures import machine_faults, workarounds
from tests.faults import inject
from tests.faults.inject import Killer
from testkit.helpers import pallas

TARGET = ("cuda", 90)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# where a worker is ended from outside, and by what: drawn once, from a fixed seed, so
# that every run (and every xdist worker) collects the same cases
_DRAW = random.Random(38)
KILL_POINTS = [(point, _DRAW.choice(worker_output.OUTSIDE_SIGNALS))
               for point in ("start", "ttir", "ttgir", "llir", "ptx", "cubin")]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
  """A cache of the test's own, no plan or compile remembered, no warning given yet, and
  a worker started for this test (so it has this test's environment) and ended after."""
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.delenv(workarounds.ENV, raising=False)
  monkeypatch.setattr(machine_faults, "_warned", [])
  monkeypatch.setattr(workarounds, "_warned", [])
  from pallas_prof.backend import cache_files
  monkeypatch.setattr(cache_files, "_warned", set())
  backend_compile.clear_memory_cache()
  workarounds.forget_all()
  compile_worker.replace()
  yield
  compile_worker.replace()
  workarounds.forget_all()


def lowered(name: str, num_warps: int = 4):
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0

  fn = pallas(kernel, jax.ShapeDtypeStruct((64,), jnp.float32), name=name,
              compiler_params=pallas_prof.CompilerParams(num_warps=num_warps))
  jax.jit(fn).lower(jax.ShapeDtypeStruct((64,), jnp.float32))
  return kernel_registry.find(name)[-1]


def plan_files() -> list[str]:
  """The saved plans a compile would read (a bad one set aside ends in .bad)."""
  folder = os.path.join(os.environ["PALLAS_PROF_CACHE_DIR"], "workarounds")
  return sorted(n for n in os.listdir(folder) if n.endswith(".json")) \
      if os.path.isdir(folder) else []


def assert_plain(ck, rec):
  """The kernel as the call asked for it: compiled whole, with its own settings."""
  assert ck.ptx and ck.cubin and not ck.generated.workarounds
  assert (ck.num_warps, ck.num_stages) == (rec.generated.num_warps, rec.generated.num_stages)
  assert ck.generated.source == rec.generated.source


def assert_nothing_persisted(rec):
  """No plan, in memory or on disk; a later compile in a fresh worker, from the disk's
  cache, gives the plain kernel with no warning."""
  assert workarounds._memory == {} and plan_files() == []
  backend_compile.clear_memory_cache()
  compile_worker.replace()
  with warnings.catch_warnings(record=True) as later:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert_plain(ck, rec)
  assert ck.cache == "disk" and not [w for w in later if "pallas-prof" in str(w.message)]
  assert workarounds._memory == {} and plan_files() == []


def machine_warnings(caught) -> list[str]:
  return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)
          and "pallas-prof" in str(w.message)]


def pausing_at(monkeypatch, tmp_path, point: str) -> str:
  folder = tmp_path / "paused"
  folder.mkdir()
  monkeypatch.setenv(worker_output.TEST_PAUSE_ENV, f"{point}:{folder}")
  return str(folder)


# --- a worker ended from outside ----------------------------------------------------------

@pytest.mark.fault("kill_worker")
@pytest.mark.parametrize("point,signame", KILL_POINTS)
def test_a_worker_ended_from_outside_is_retried_and_plans_nothing(point, signame, monkeypatch,
                                                                   tmp_path):
  rec = lowered(f"killed_at_{point}")
  folder = pausing_at(monkeypatch, tmp_path, point)
  with Killer(folder, signal.Signals[signame]) as killer, \
      warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert len(killer.killed) == 1 and killer.resumed, (killer.killed, killer.resumed)
  assert_plain(ck, rec)
  (said,) = machine_warnings(caught)
  assert f"({signame}) from outside Triton" in said and "no workaround" in said
  assert f"`{rec.name}`" in said
  monkeypatch.delenv(worker_output.TEST_PAUSE_ENV)
  assert_nothing_persisted(rec)


@pytest.mark.fault("kill_worker")
def test_a_worker_killed_every_time_gives_a_clear_error_and_saves_nothing(monkeypatch,
                                                                         tmp_path):
  rec = lowered("killed_every_time")
  folder = pausing_at(monkeypatch, tmp_path, "ttgir")
  with Killer(folder, signal.SIGKILL, kills=99) as killer, pytest.raises(
      pallas_prof.CompileError) as info:
    workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert len(killer.killed) == 2           # the compile and its one retry
  err = info.value
  assert err.fault == "machine" and err.diagnosis.kind == "machine"
  text = str(err)
  assert f"cannot compile kernel `{rec.name}` (ttgir stage)" in text
  assert "killed (SIGKILL) from outside Triton" in text and "out-of-memory killer" in text
  assert "retried: once, on a fresh compile worker" in text and "failed again" in text
  assert "nothing was saved" in err.hint and "dmesg" in err.hint and "run again" in err.hint
  assert "workaround" not in err.details
  monkeypatch.delenv(worker_output.TEST_PAUSE_ENV)
  assert workarounds._memory == {} and plan_files() == []
  ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert_plain(ck, rec)
  assert_nothing_persisted(rec)


# --- a disk that fills while the worker writes ----------------------------------------------

def full_disk_for_workers(monkeypatch, tmp_path, starts: int) -> str:
  """The first `starts` workers get their folder (where Triton writes its cache) on a
  disk that is full: inject.enospc_env in their environment, the folder under `full`."""
  full = tmp_path / "full"
  full.mkdir()
  env = inject.enospc_env(str(full))
  original = compile_worker._Worker._start
  started = []

  def start(self, *args, **kwargs):
    started.append(1)
    if len(started) > starts:
      return original(self, *args, **kwargs)
    with monkeypatch.context() as m:
      for name in ("PYTHONPATH", "PALLAS_PROF_TEST_ENOSPC_UNDER", "PALLAS_PROF_TEST_ENOSPC_AFTER"):
        m.setenv(name, env[name])
      m.setattr(tempfile, "tempdir", str(full))
      return original(self, *args, **kwargs)

  monkeypatch.setattr(compile_worker._Worker, "_start", start)
  return str(full)


@pytest.mark.fault("enospc")
def test_a_full_disk_once_is_retried_and_plans_nothing(monkeypatch, tmp_path):
  rec = lowered("disk_full_once")
  full_disk_for_workers(monkeypatch, tmp_path, starts=1)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert_plain(ck, rec)
  (said,) = machine_warnings(caught)
  assert "the disk is full" in said and "No space left on device" in said
  assert "no workaround" in said
  assert_nothing_persisted(rec)


@pytest.mark.fault("enospc")
def test_a_disk_that_stays_full_gives_a_clear_error_and_saves_nothing(monkeypatch, tmp_path):
  rec = lowered("disk_stays_full")
  full = full_disk_for_workers(monkeypatch, tmp_path, starts=2)
  with pytest.raises(pallas_prof.CompileError) as info:
    workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  err = info.value
  assert err.fault == "machine"
  text = str(err)
  assert "the disk is full" in text and f"[Errno 28] No space left on device: '{full}" in text
  assert "retried: once, on a fresh compile worker" in text
  assert "free space in" in err.hint and "TMPDIR" in err.hint and "run again" in err.hint
  assert "workaround" not in err.details and err.reproducer == {}
  # nothing kept: no plan, no cache entry; the next worker (a disk with room) compiles it
  assert workarounds._memory == {} and plan_files() == []
  assert compile_cache.remembered(compile_cache.compile_key(rec.generated, TARGET)) is None
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert_plain(ck, rec)
  assert ck.cache == "miss" and machine_warnings(caught) == []    # not the failed worker's
  assert_nothing_persisted(rec)


@pytest.mark.fault("enospc")
def test_a_batch_child_that_cannot_write_its_answer_says_so(tmp_path):
  """The tuner's batch: a child whose answer the disk will not take ends with
  ANSWER_NOT_WRITTEN, which the parent words as the machine's (from outside)."""
  folder = tmp_path / "worker"
  (folder / "triton-cache").mkdir(parents=True)
  script = textwrap.dedent(f"""
      import sys
      sys.path.insert(0, {os.path.join(ROOT, "pallas_prof", "backend", "compiling")!r})
      import worker_batch, worker_output
      print(worker_batch.compile_batch({{"requests": [{{"n": 1}}, {{"n": 2}}], "parallel": 2}},
                                       lambda r: {{"answer": r["n"]}}, worker_output))
      """)
  env = inject.enospc_env(str(folder))
  env["TRITON_CACHE_DIR"] = str(folder / "triton-cache")
  done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                        env=env, timeout=120)
  assert done.returncode == 0, done.stderr
  how = worker_output.ANSWER_NOT_WRITTEN_HOW
  assert done.stdout.strip() == str({"results": [{"crashed": how}, {"crashed": how}]})
  assert compile_worker.WorkerCrashed(how, None, "").from_outside
  assert os.listdir(folder) == ["triton-cache"]        # the batch's folder went
  # without the full disk, the answers come back
  env = dict(os.environ, TRITON_CACHE_DIR=str(folder / "triton-cache"))
  done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                        env=env, timeout=120)
  assert done.stdout.strip() == str({"results": [{"answer": 1}, {"answer": 2}]})


@pytest.mark.fault("enospc")
def test_the_tuner_s_batch_retries_a_compile_the_machine_failed(monkeypatch):
  """compile_kernels: a candidate whose child could not write its answer is compiled again
  (on the worker itself), not dropped as a failure of Triton's."""
  recs = [lowered("batch_a"), lowered("batch_b", num_warps=8)]
  original = compile_worker.compile_many

  def first_answer_lost(requests, parallel=None):
    answers = original(requests, parallel)
    return [compile_worker.WorkerCrashed(worker_output.ANSWER_NOT_WRITTEN_HOW, "cubin", ""),
            *answers[1:]]

  monkeypatch.setattr(compile_worker, "compile_many", first_answer_lost)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = backend_compile.compile_kernels([r.generated for r in recs], TARGET, parallel=2)
  for ck, rec in zip(out, recs):
    assert not isinstance(ck, Exception), ck
    assert_plain(ck, rec)
  (said,) = machine_warnings(caught)
  assert "could not write its answer" in said
  assert plan_files() == []
  backend_compile.clear_memory_cache()
  assert all(compile_cache.load_from_disk(ck.key, rec.generated).ptx
             for ck, rec in zip(out, recs))


# --- a damaged compile-cache entry ----------------------------------------------------------

@pytest.mark.fault("empty")
@pytest.mark.parametrize("emptied", [("ptx", "cubin"), ("ptx",)])
@pytest.mark.parametrize("need_cubin", [True, False])
def test_a_damaged_cache_entry_is_compiled_again_without_a_plan(emptied, need_cubin):
  rec = lowered("damaged_" + "_".join(emptied) + f"_{need_cubin}")
  first = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  entry = compile_cache._disk_dir(first.key)
  for stage in emptied:
    with open(os.path.join(entry, f"kernel.{stage}"), "wb"):
      pass
  backend_compile.clear_memory_cache()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower,
                                            need_cubin=need_cubin)
  assert ck.cache == "miss" and ck.ptx == first.ptx
  assert (ck.num_warps, ck.generated.workarounds) == (rec.generated.num_warps, ())
  if need_cubin:
    assert_plain(ck, rec)
  # the cache's check of the entry against its manifest finds the damage before any
  # compile is tried: one warning, the cache's (backend/cache_files.py), none of a machine
  from pallas_prof.backend import cache_files
  said = [str(w.message) for w in caught if issubclass(w.category, cache_files.CacheWarning)]
  assert len(said) == 1 and entry in said[0], said
  assert any(f"kernel.{stage} has 0 bytes" in said[0] for stage in emptied), said
  assert machine_warnings(caught) == []
  assert workarounds._memory == {} and plan_files() == []
  # the damaged entry set aside, the new one in its place
  import glob
  assert [p for p in glob.glob(entry + ".bad-*") if os.path.isdir(p)]
  with open(os.path.join(entry, "kernel.ptx")) as f:
    assert f.read() == first.ptx
  assert_nothing_persisted(rec)


# --- a crash of Triton's that reproduces ----------------------------------------------------

def crashing(rec, tmp_path):
  """rec's kernel whose compile aborts its process every time (as LLVM's abort() would),
  saying so on stderr first; its relower gives kernels that compile."""
  path = tmp_path / "crashing_kernel.py"
  path.write_text("import os\nos.write(2, b'LLVM says: something broke\\n')\nos.abort()\n")
  # (the file is checked against the source before the compile: the source is its text)
  return dataclasses.replace(rec.generated, path=str(path), source=path.read_text())


@pytest.mark.fault("kill_worker")
def test_a_crash_that_reproduces_still_gets_its_workaround_and_its_plan(tmp_path):
  rec = lowered("crashes_every_time")
  bad = crashing(rec, tmp_path)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(bad, TARGET, rec.relower)
  assert machine_warnings(caught) == []
  # today's workaround: another num_warps, said everywhere, and compiled with it
  assert ck.generated.num_warps == 8 == ck.num_warps
  assert any("num_warps=8 instead of 4" in w for w in ck.generated.workarounds)
  (name,) = plan_files()
  with open(os.path.join(os.environ["PALLAS_PROF_CACHE_DIR"], "workarounds", name)) as f:
    saved = json.load(f)
  assert saved["format"] == workarounds.PLAN_FORMAT and saved["fault"] == "triton"
  assert saved["num_warps"] == 8 and "crashed (signal SIGABRT)" in saved["because"]
  # a later process reads the plan back, checked, and goes straight to it
  workarounds.forget_all()
  backend_compile.clear_memory_cache()
  key = compile_cache.compile_key(bad, TARGET)
  assert workarounds._remembered(key, bad).num_warps == 8
  again = workarounds.compile_working_around(bad, TARGET, rec.relower)
  assert again.generated.num_warps == 8 and again.cache == "disk"


@pytest.mark.fault("kill_worker")
def test_a_crash_that_does_not_reproduce_plans_nothing(monkeypatch, tmp_path):
  """A SIGSEGV once (a bad memory bit as likely as a bug) is compiled again; the retry
  compiles, so no workaround is searched for and none saved."""
  rec = lowered("crashes_once")
  original = compile_worker.compile
  crashes = []

  def crash_once(request):
    if request.get("op") == "compile" and not crashes:
      crashes.append(request["name"])
      raise compile_worker.WorkerCrashed("signal SIGSEGV", "llir", "Segmentation fault")
    return original(request)

  monkeypatch.setattr(compile_worker, "compile", crash_once)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert crashes == [rec.name]
  assert_plain(ck, rec)
  (said,) = machine_warnings(caught)
  assert "crashed (signal SIGSEGV)" in said and "no workaround" in said
  assert_nothing_persisted(rec)


# --- a saved plan is data to check ----------------------------------------------------------

GOOD_PLAN = {"format": workarounds.PLAN_FORMAT, "fault": "triton", "scan_forms": [],
             "num_warps": 8, "notes": ["num_warps=8 instead of 4 (a last resort)"],
             "because": "Triton's compiler crashed (signal SIGABRT) in the llir stage"}
BAD_VALUES = {
    "the issue's plan: a worker killed from outside, format 1": dict(
        GOOD_PLAN, format=None, because="Triton's compiler crashed (signal SIGKILL)"),
    "a worker killed from outside": dict(
        GOOD_PLAN, because="Triton's compiler crashed (signal SIGKILL) in the ttir stage"),
    "a full disk": dict(GOOD_PLAN, because="the ttir stage failed: [Errno 28] No space left "
                                           "on device"),
    "num_warps -8": dict(GOOD_PLAN, num_warps=-8),
    "num_warps 3": dict(GOOD_PLAN, num_warps=3),
    "num_warps 0": dict(GOOD_PLAN, num_warps=0),
    "num_warps 1e9": dict(GOOD_PLAN, num_warps=1e9),
    "num_warps '8'": dict(GOOD_PLAN, num_warps="8"),
    "num_warps 16, not one tried for 4": dict(GOOD_PLAN, num_warps=16),
    "nothing changed": dict(GOOD_PLAN, num_warps=None),
    "a scan form of no scan": dict(GOOD_PLAN, num_warps=None, scan_forms=[[0, "squeeze"]]),
    "an unknown field": dict(GOOD_PLAN, run="os.system('true')"),
    "no failure named": dict(GOOD_PLAN, because=""),
    "another fault": dict(GOOD_PLAN, fault="kernel"),
    "not an object": [GOOD_PLAN],
}


def plan_cases():
  good = json.dumps(GOOD_PLAN).encode()
  cases = [pytest.param(data, id=name, marks=pytest.mark.fault(inject.kind_of(name)))
           for name, data in inject.mutations(good, seed=38).items()]
  cases += [pytest.param(json.dumps(d).encode(), id=name, marks=pytest.mark.fault("wrong_value"))
            for name, d in BAD_VALUES.items()]
  return cases


def write_plan(gk, data: bytes) -> str:
  path = workarounds._plan_file(compile_cache.compile_key(gk, TARGET))
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(data)
  return path


@pytest.mark.parametrize("data", plan_cases())
def test_a_bad_saved_plan_is_set_aside_with_one_warning(data):
  rec = lowered("with_a_bad_plan")
  path = write_plan(rec.generated, data)
  other = write_plan(lowered("with_another_bad_plan", num_warps=2).generated, data)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert_plain(ck, rec)                          # not applied
  (said,) = machine_warnings(caught)
  assert f"ignored the saved workaround plan {path}: " in said
  assert f"moved to {path}.bad" in said and "compiled as it is" in said
  assert not os.path.exists(path) and os.path.exists(path + ".bad")
  # a second bad plan in the same process: set aside too, without a second warning
  second = lowered("with_another_bad_plan", num_warps=2)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(second.generated, TARGET, second.relower)
  assert_plain(ck, second) and machine_warnings(caught) == []
  assert not os.path.exists(other) and os.path.exists(other + ".bad")
  assert_nothing_persisted(rec)


def test_a_good_saved_plan_is_applied():
  """The control for the cases above: the same plan, well formed, is read and used."""
  rec = lowered("with_a_good_plan")
  path = write_plan(rec.generated, json.dumps(GOOD_PLAN).encode())
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(rec.generated, TARGET, rec.relower)
  assert machine_warnings(caught) == [] and os.path.exists(path)
  assert ck.generated.num_warps == 8 == ck.num_warps


# --- a run: its report, and the settings it shows ------------------------------------------

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    from jax.experimental import pallas as pl
    import pallas_prof
    from pallas_prof.backend.compiling import compile_worker
    pallas_prof.install()
    PLANT = {plant!r}
    if PLANT:      # Triton's compiler crashing on this kernel at 4 warps, every time
      original = compile_worker.compile

      def crashes_at_4_warps(request):
        if request.get("op") == "compile" and request["options"]["num_warps"] == 4:
          raise compile_worker.WorkerCrashed("signal SIGSEGV", "llir", "Segmentation fault")
        return original(request)
      compile_worker.compile = crashes_at_4_warps

    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] * 2.0 + 1.0

    x = jnp.arange(256, dtype=jnp.float32)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         name="the_kernel")(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2.0 + 1.0)
    print("the answer is right")
    """)


def pallas_prof_run(tmp_path, plant: bool, env: dict | None = None):
  script = tmp_path / "script.py"
  script.write_text(SCRIPT.format(plant=plant))
  out = tmp_path / "run"
  env = dict(env or os.environ, COLUMNS="200",
             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env.pop("PALLAS_PROF_TRACE", None)
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out", str(out),
                         str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                        timeout=600)
  report = json.loads((out / "report.json").read_text())
  return done, report


def kernel_row(stdout: str) -> str:
  """The kernel's row of the kernels table (the first line that starts with its label)."""
  return next(ln for ln in stdout.splitlines() if ln.startswith("the_kernel#"))


@pytest.mark.fault("kill_worker")
def test_a_run_whose_worker_is_killed_reports_the_settings_it_compiled(tmp_path):
  folder = tmp_path / "paused"
  folder.mkdir()
  env = dict(os.environ, **{worker_output.TEST_PAUSE_ENV: f"ttgir:{folder}"})
  with Killer(str(folder), signal.SIGKILL) as killer:
    done, report = pallas_prof_run(tmp_path, plant=False, env=env)
  assert len(killer.killed) == 1, done.stderr
  assert done.returncode == 0 and "the answer is right" in done.stdout, done.stderr
  assert report["exit_code"] == 0 and report["errors"] == []
  (kernel,) = report["kernels"]
  assert (kernel["num_warps"], kernel["workarounds"]) == (4, [])
  assert kernel["resources"]["num_warps"] == 4 and kernel["compile"]["cache"] == "miss"
  assert f" 4/{kernel['num_stages']} " in kernel_row(done.stdout)
  assert done.stderr.count("from outside Triton") == 1
  assert plan_files() == []


@pytest.mark.fault("kill_worker")
def test_a_run_shows_the_settings_a_workaround_compiled_with(tmp_path):
  """Where a crash of Triton's reproduces and the workaround takes another num_warps,
  report.json and the terminal show that num_warps, not the call's."""
  done, report = pallas_prof_run(tmp_path, plant=True)
  assert done.returncode == 0 and "the answer is right" in done.stdout, done.stderr
  (kernel,) = report["kernels"]
  assert kernel["num_warps"] == 8 == kernel["resources"]["num_warps"]
  assert kernel["num_stages"] == kernel["resources"]["num_stages"]
  assert any("num_warps=8 instead of 4" in w for w in kernel["workarounds"])
  assert f" 8/{kernel['num_stages']} " in kernel_row(done.stdout)
  (name,) = plan_files()
  with open(os.path.join(os.environ["PALLAS_PROF_CACHE_DIR"], "workarounds", name)) as f:
    assert json.load(f)["num_warps"] == 8
