"""Tuning num_warps/num_stages (pallas_prof/tune/params.py) without a GPU.

The CUDA driver is the host-memory stand-in of the profiler's tests
(tests/profiler/fake_cuda.py): launches run the kernel under Triton's
interpreter, and event times are scripted from the launch's block size
(32 x num_warps threads). So what is checked is the tuner's logic (which
candidates run, on which inputs, which one is kept, what is cached), never a
measurement.
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import os

import pytest

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.backend.options import TunedSettings as S
from pallas_prof.profiler import driver
from pallas_prof.tune import params, validate
from testkit.examples import load_example, lowered_record, sds
from tests.profiler.fake_cuda import FakeDriver

# the tests check which candidates run and which is kept, not the budget: a loaded machine
# running the interpreter's launches must not spend the default 30 s and drop a candidate
UNHURRIED = 3600.0

# scripted milliseconds per launch, by threads per block (32 x num_warps)
MS_BY_THREADS = {64: 0.9, 128: 0.5, 256: 0.2}


class ScriptedDriver(FakeDriver):
  """Every launch writes the kernel's outputs (run once per input set: memo_outputs); a
  launch's time follows its block size; a launch with `wrong_threads` threads per block
  writes a wrong result."""

  def __init__(self, gk, wrong_threads=None):
    super().__init__(gk, interpret_launches=10**9, memo_outputs=True)
    self.wrong_threads = wrong_threads
    self.block_of_launch = []

  def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params_, extra):
    if self.functions.get(int(fn)) != "pallas_prof_l2_flush":
      self.block_of_launch.append(bx)
    out = super().cuLaunchKernel(fn, gx, gy, gz, bx, by, bz, shared, stream, params_, extra)
    if bx == self.wrong_threads and self.functions.get(int(fn)) != "pallas_prof_l2_flush":
      # the output is the kernel's second parameter (softmax: x in, out)
      ctypes.c_float.from_address(self.launches[-1][3][1]).value += 1.0   # device = host memory
    return out

  def cuEventElapsedTime(self, start, end):
    launches = self.events[int(end)] - self.events[int(start)]
    return 0, MS_BY_THREADS[self.block_of_launch[-1]] * launches


@pytest.fixture
def softmax_gk(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  pallas_prof.install()
  rec = lowered_record(load_example("softmax").softmax, sds((4, 128), "float32"))
  yield rec.generated
  pallas_prof.uninstall()


def _lowered_as(gk, options, **took_effect):
  """What lowering gk's pallas_call again with `options` gives, without lowering it: gk
  with them as its options; `took_effect` overrides what the lowering could not use (a
  grid of no grouped order, no load TMA can serve)."""
  options = options.replace(**took_effect)
  return dataclasses.replace(gk, options=options)


def _install(monkeypatch, gk, **kwargs):
  fake = ScriptedDriver(gk, **kwargs)
  monkeypatch.setattr(driver, "_driver", lambda: fake)
  monkeypatch.setattr(driver, "_initialized", {"done": False, "error": None})
  return fake


def _tune(gk, settings):
  """tune_kernel as the GPU path calls it: the candidates compiled together by the
  compile worker's children (compile_all's default), the ones compiled recorded."""
  compiled = []

  def compile_fn(g):
    compiled.append((g.num_warps, g.num_stages))
    return compile_kernel(g, ("cuda", 90))

  def compile_all(gs):
    compiled.extend((g.num_warps, g.num_stages) for g in gs)
    return params._compile_all(gs, ("cuda", 90))
  relower = lambda options: _lowered_as(gk, options)
  ck = params.tune_kernel(gk, compile_kernel(gk, ("cuda", 90)), relower, ("cuda", 90), settings,
                          compile_fn=compile_fn, compile_all=compile_all)
  return ck, compiled


def test_the_fastest_candidate_with_the_default_outputs_is_chosen(softmax_gk, monkeypatch):
  params.clear_results()
  # 2 warps (64 threads) writes a wrong element: dropped although it would be timed
  fake = _install(monkeypatch, softmax_gk, wrong_threads=64)
  settings = params.Autotune(configs=[{"num_warps": 8}, {"num_warps": 2}, {"num_warps": 4}],
                             min_launches=5, min_seconds=0.0, budget_s=UNHURRIED)
  ck, compiled = _tune(softmax_gk, settings)
  assert (ck.generated.num_warps, ck.generated.num_stages) == (8, 3)
  assert sorted(compiled) == [(2, 3), (8, 3)]          # the default's compile is reused
  [t] = params.results()
  assert t.default == S(4, 3) and t.best == S(8, 3) and not t.from_cache
  by = {(c.settings.num_warps, c.settings.num_stages): c for c in t.candidates}
  assert by[(4, 3)].median_s == pytest.approx(0.5e-3)
  assert by[(8, 3)].median_s == pytest.approx(0.2e-3)
  assert by[(2, 3)].median_s is None and "differ from the default" in by[(2, 3)].error
  assert t.speedup == pytest.approx(2.5)
  assert set(fake.block_of_launch) == {64, 128, 256}


def test_a_cached_choice_is_used_without_launching(softmax_gk, monkeypatch, tmp_path):
  params.clear_results()
  _install(monkeypatch, softmax_gk)
  settings = params.Autotune(configs=[{"num_warps": 8}], min_launches=5, min_seconds=0.0,
                             budget_s=UNHURRIED)
  _tune(softmax_gk, settings)
  [saved] = [f for f in os.listdir(tmp_path / "tune") if f.startswith("params-")]
  data = json.loads((tmp_path / "tune" / saved).read_text())
  assert data["best"] == {"num_warps": 8, "num_stages": 3, "launch_group": 0, "tma": False,
                        "persistent": 0, "loop_stages": 0}
  assert {"gpu", "jax", "triton", "pallas_prof", "source", "target"} <= set(data["identity"])
  fake = _install(monkeypatch, softmax_gk)              # a fresh "process": nothing launched yet
  ck, compiled = _tune(softmax_gk, settings)
  assert ck.generated.num_warps == 8 and compiled == [(8, 3)]
  assert fake.block_of_launch == []                     # no timing
  assert params.results()[-1].from_cache
  # other configs are another tuning: not answered by this cache entry
  fake = _install(monkeypatch, softmax_gk)
  _tune(softmax_gk, params.Autotune(configs=[{"num_stages": 2}], min_launches=5, min_seconds=0.0,
                                    budget_s=UNHURRIED))
  assert fake.block_of_launch and not params.results()[-1].from_cache


def test_settings_from_compiler_params_and_the_environment(monkeypatch):
  monkeypatch.delenv(params.ENV, raising=False)
  assert params.settings(pallas_prof.CompilerParams()) is None
  assert params.settings(pallas_prof.CompilerParams(autotune=True)) == params.Autotune()
  custom = pallas_prof.Autotune(configs=[{"num_warps": 8, "num_stages": 4}], budget_s=5)
  assert params.settings(pallas_prof.CompilerParams(autotune=custom)) is custom
  assert params.settings(None) is None
  monkeypatch.setenv(params.ENV, "1")
  assert params.settings(None) == params.Autotune()
  assert params.settings(pallas_prof.CompilerParams()) == params.Autotune()
  assert params.settings(pallas_prof.CompilerParams(autotune=False)) is None   # said no
  hash(pallas_prof.CompilerParams(autotune=custom))       # JAX hashes compiler params


def test_bad_autotune_configs_say_what_is_wrong():
  with pytest.raises(ValueError, match="unknown: \\['block'\\]"):
    pallas_prof.Autotune(configs=[{"block": 64}])
  with pytest.raises(ValueError, match="power of two"):
    pallas_prof.Autotune(configs=[{"num_warps": 3}])
  with pytest.raises(ValueError, match="num_stages must be an int"):
    pallas_prof.Autotune(configs=[{"num_stages": 0}])


def test_a_tuning_file_written_from_results_is_applied_without_tuning(softmax_gk, monkeypatch,
                                                                        tmp_path, capsys):
  """What `pallas-prof tune` does after its child process: results -> table -> tuning
  file; then PALLAS_PROF_TUNED=file makes the GPU path compile the chosen config."""
  from pallas_prof.cli import tune as cli
  params.clear_results()
  monkeypatch.setenv("COLUMNS", "100")
  _install(monkeypatch, softmax_gk)
  _tune(softmax_gk, params.Autotune(configs=[{"num_warps": 8}], min_launches=5, min_seconds=0.0,
                                    budget_s=UNHURRIED))
  params.write_results(str(tmp_path / "results.json"))
  tunings = params.read_results(str(tmp_path / "results.json"))
  cli.print_table(tunings)
  table = capsys.readouterr().out
  assert "softmax_kernel" in table and "2.50x" in table and "2 of 2" in table, table
  assert "4w 3s 500.0us" in table and "8w 3s 200.0us" in table, table
  cli.write_tuning_file(str(tmp_path / "tuning.json"), tunings)

  fake = _install(monkeypatch, softmax_gk)
  monkeypatch.delenv(params.ENV, raising=False)
  monkeypatch.setenv(params.TUNED_ENV, str(tmp_path / "tuning.json"))
  compiled = []
  default_ck = compile_kernel(softmax_gk, ("cuda", 90))
  relower = lambda options: _lowered_as(softmax_gk, options)
  compile_fn = lambda g: compiled.append((g.num_warps, g.num_stages)) or compile_kernel(g, ("cuda", 90))
  ck = params.select(default_ck, softmax_gk, None, relower, ("cuda", 90), compile_fn=compile_fn)
  assert ck.generated.num_warps == 8 and compiled == [(8, 3)] and fake.block_of_launch == []
  # a kernel the file does not name keeps its default compile (said: its name has an entry)
  source = softmax_gk.source + "\nANOTHER_KERNEL = 1\n"
  other = dataclasses.replace(softmax_gk, source=source,
                              key=hashlib.sha256(source.encode()).hexdigest())
  with pytest.warns(validate.TuningFileWarning, match="no entry is for this softmax_kernel"):
    assert params.select(default_ck, other, None, relower, ("cuda", 90),
                         compile_fn=compile_fn) is default_ck
  # one whose source differs only in its comments (its lines moved) is the same kernel
  source = softmax_gk.source.replace("# ", "#  ")
  moved = dataclasses.replace(softmax_gk, source=source,
                              key=hashlib.sha256(source.encode()).hexdigest())
  compiled.clear()
  assert moved.key != softmax_gk.key
  ck = params.select(default_ck, moved, None, relower, ("cuda", 90), compile_fn=compile_fn)
  assert ck.generated.num_warps == 8 and compiled == [(8, 3)]


@pytest.mark.no_gpu
def test_tune_command_on_a_cpu_says_why_before_running_the_script(tmp_path):
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  script = tmp_path / "script.py"
  script.write_text("print('script ran')\n")
  env = dict(os.environ, PYTHONPATH=root, PALLAS_PROF_CACHE_DIR=str(tmp_path))
  proc = subprocess.run([sys.executable, "-m", "pallas_prof.cli.main", "tune", str(script),
                         "--out", str(tmp_path / "t.json")], env=env, capture_output=True,
                        text=True, timeout=300)
  # said first, without running the script (issue 30: it ran the whole script to say so)
  assert proc.returncode == 2
  assert "script ran" not in proc.stdout
  assert "tuning times kernels on an NVIDIA GPU" in proc.stderr
  assert "the script was not run" in proc.stderr
  assert not (tmp_path / "t.json").exists()
  missing = subprocess.run([sys.executable, "-m", "pallas_prof.cli.main", "tune", "nope.py"],
                           env=env, capture_output=True, text=True, timeout=300)
  assert missing.returncode == 2 and "no such file: nope.py" in missing.stderr


def test_each_candidate_is_a_span_under_the_tuning(softmax_gk, monkeypatch):
  from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
  from pallas_prof.instrument import conventions as cv
  params.clear_results()
  _install(monkeypatch, softmax_gk, wrong_threads=64)
  settings = params.Autotune(configs=[{"num_warps": 8}, {"num_warps": 2}], min_launches=5,
                             min_seconds=0.0, budget_s=UNHURRIED)
  exporter = InMemorySpanExporter()
  with pallas_prof.tracing(exporter):
    _tune(softmax_gk, settings)
  spans = exporter.get_finished_spans()
  (tuning,) = [s for s in spans if s.name == cv.tune("softmax_kernel")]
  children = {s.name: s for s in spans if s.parent and s.parent.span_id == tuning.context.span_id}
  assert set(children) == {cv.tune_candidate("softmax_kernel", c) for c in ("4w 3s", "8w 3s", "2w 3s")}
  assert tuning.attributes[cv.TUNE_BEST] == "8w 3s" and tuning.attributes[cv.TUNE_DEFAULT] == "4w 3s"
  assert tuning.attributes[cv.TUNE_SPEEDUP] == pytest.approx(2.5)
  best = children[cv.tune_candidate("softmax_kernel", "8w 3s")]
  assert best.attributes[cv.TUNE_CHOSEN] and best.attributes[cv.TUNE_MEDIAN_US] == pytest.approx(200)
  assert best.attributes[cv.TUNE_COMPILE_MS] > 0
  wrong = children[cv.tune_candidate("softmax_kernel", "2w 3s")]
  assert "differ from the default" in wrong.attributes[cv.TUNE_ERROR]
  assert not wrong.status.is_ok and not wrong.attributes[cv.TUNE_CHOSEN]
  for child in children.values():
    assert tuning.start_time <= child.start_time <= child.end_time <= tuning.end_time
  assert all(s.name.startswith(cv.SPAN_PREFIXES) for s in spans)
  assert not {k for s in spans for k in s.attributes if not cv.declared(k)}
  # a cached choice: one span, no candidates timed
  exporter.clear()
  _install(monkeypatch, softmax_gk)
  with pallas_prof.tracing(exporter):
    _tune(softmax_gk, settings)
  (cached,) = [s for s in exporter.get_finished_spans() if s.name.startswith("tune ")]
  assert cached.attributes[cv.TUNE_FROM_CACHE] and cached.attributes[cv.TUNE_BEST] == "8w 3s"


def test_candidates_compile_at_the_same_time_in_the_worker(softmax_gk):
  """compile_kernels hands the misses to the compile worker in one batch: its
  children compile them side by side (the compile records' intervals overlap)."""
  from pallas_prof.backend.compiling import compile_worker
  from pallas_prof.backend import hooks
  from pallas_prof.backend.compiling.compile import compile_kernels

  class Records(hooks.NullObserver):
    enabled = True
    def __init__(self):
      self.records = []
    def kernel(self, name, attributes):
      return hooks.NULL_SPAN
    def equation(self, eqn):
      return hooks.NULL_SPAN
    def compiled(self, record):
      self.records.append(record)
    def profiled(self, *args):
      pass

  if not compile_worker.enabled():
    pytest.skip("PALLAS_PROF_COMPILE_WORKER=0")
  gks = [dataclasses.replace(softmax_gk, options=softmax_gk.options.replace(num_warps=w,
                                                                          num_stages=2))
         for w in (1, 2, 8)]
  watcher = Records()
  hooks.add_observer(watcher)
  try:
    cks = compile_kernels(gks, ("cuda", 90), need_cubin=True, parallel=3)
  finally:
    hooks.remove_observer(watcher)
  assert [ck.num_warps for ck in cks] == [1, 2, 8] and all(ck.cubin for ck in cks)
  misses = sorted((r for r in watcher.records if r.cache == "miss" and r.stages),
                  key=lambda r: r.start_ns)
  assert len(misses) == 3
  assert misses[1].start_ns < misses[0].end_ns, "the second compile began after the first ended"
  # the same code as one at a time: a batch changes where Triton runs, not what it makes
  from pallas_prof.backend.compiling.compile import _compile_now, compile_key
  one = _compile_now(gks[2], ("cuda", 90), compile_key(gks[2], ("cuda", 90)))
  assert one.asm["ptx"] == cks[2].asm["ptx"]


def test_a_crash_in_a_batch_fails_only_its_own_compile():
  """The worker's batch forks a child per compile: one dying (LLVM aborting) gives
  that compile a crash and the others their answers. Run in a process without
  JAX, as the worker is (forking JAX's threads is not safe)."""
  import subprocess
  import sys
  from pallas_prof.backend.compiling import worker_main
  code = f"""
import importlib.util, json, os, signal
spec = importlib.util.spec_from_file_location("cw", {worker_main.__file__!r})
cw = importlib.util.module_from_spec(spec); spec.loader.exec_module(cw)
class Compiler:
  @staticmethod
  def run_triton(request, on_stage=None):
    if request["i"] == 1:
      os.kill(os.getpid(), signal.SIGABRT)
    return {{"answer": request["i"] * 10}}
got = cw._batch.compile_batch({{"requests": [{{"i": i}} for i in range(4)], "parallel": 2}},
                              lambda one: cw._run_one(Compiler, one, lambda stage: None),
                              cw._output)
print(json.dumps(got))
"""
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
  assert done.returncode == 0, done.stderr
  got = json.loads(done.stdout.strip().splitlines()[-1])
  assert got["results"] == [{"answer": 0}, {"crashed": "signal SIGABRT"}, {"answer": 20},
                            {"answer": 30}]


def test_grouped_launch_candidates_are_left_out_where_the_grid_has_none(softmax_gk, monkeypatch):
  """A launch_group candidate whose lowering says the grid has no grouped order
  (a 1-D grid) would repeat the plain kernel: it is neither compiled nor timed."""
  params.clear_results()
  fake = _install(monkeypatch, softmax_gk)
  compiled = []

  def compile_all(gs):
    compiled.extend(params.default_config(g) for g in gs)
    return params._compile_all(gs, ("cuda", 90))
  relower = lambda options: _lowered_as(softmax_gk, options, launch_group=0)   # a 1-D grid
  settings = params.Autotune(configs=[{"launch_group": 8}, {"num_warps": 8}], min_launches=5,
                             min_seconds=0.0, budget_s=UNHURRIED)
  params.tune_kernel(softmax_gk, compile_kernel(softmax_gk, ("cuda", 90)), relower, ("cuda", 90),
                     settings, compile_fn=None, compile_all=compile_all)
  [t] = params.results()
  assert [c.settings for c in t.candidates] == [S(4, 3), S(8, 3)]
  assert compiled == [S(8, 3)] and set(fake.block_of_launch) == {128, 256}
  assert params.config_label(S(8, 3, 4)) == "8w 3s g4" and params.config_label(S(8, 3)) == "8w 3s"


def test_the_cache_key_does_not_import_triton(tmp_path):
  """A cached choice is looked up by an identity that names Triton's version: read from
  the wheel's metadata, since importing triton into the user's process costs 0.2-0.5 s
  (bench/cost/tune_cost.py measures the whole cached path)."""
  import subprocess
  import sys
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  code = """
import sys, types
from pallas_prof.tune import params
gk = types.SimpleNamespace(name="k", source="def k(): pass", key="0" * 64, num_warps=4,
                           num_stages=3)
identity = params._identity(gk, ("cuda", 90), params.Autotune(), "NVIDIA H200")
assert params._load(params._cache_file(identity), identity, [], params.TunedSettings(), ("cuda", 90)) is None
import importlib.metadata
assert identity["triton"] == importlib.metadata.version("triton"), identity
print("triton imported:", "triton" in sys.modules)
"""
  env = dict(os.environ, PYTHONPATH=root, PALLAS_PROF_CACHE_DIR=str(tmp_path), JAX_PLATFORMS="cpu")
  done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                        timeout=120)
  assert done.returncode == 0, done.stderr
  assert "triton imported: False" in done.stdout


def test_the_default_stays_unless_a_candidate_beats_it_by_min_gain(softmax_gk, monkeypatch):
  params.clear_results()
  _install(monkeypatch, softmax_gk)        # 8 warps: 0.2 ms against the default's 0.5 ms
  settings = params.Autotune(configs=[{"num_warps": 8}], min_launches=5, min_seconds=0.0,
                             budget_s=UNHURRIED,
                             min_gain=0.7)
  ck, _ = _tune(softmax_gk, settings)
  [t] = params.results()
  assert t.best == t.default == S(4, 3) and ck.generated.num_warps == 4


def test_tma_candidates_are_left_out_below_sm90_and_where_no_load_can_use_tma(softmax_gk,
                                                                             monkeypatch):
  """A tma candidate whose lowering used no descriptor would repeat the plain kernel;
  below sm_90 it is not even lowered. Where TMA is used it is compiled and timed."""
  lowered, compiled = [], []

  def compile_all(gs):
    compiled.extend(params.default_config(g) for g in gs)
    return params._compile_all(gs, ("cuda", 90))

  def relower(uses_tma):
    def lower(options):
      lowered.append(options.settings)
      return _lowered_as(softmax_gk, options, tma=options.tma and uses_tma)
    return lower
  settings = params.Autotune(configs=[{"tma": 1}, {"num_warps": 8}], min_launches=5,
                             min_seconds=0.0, budget_s=UNHURRIED)
  default_ck = compile_kernel(softmax_gk, ("cuda", 90))
  order = lambda settings: sorted(settings, key=lambda x: (x.num_warps, x.tma))  # noqa: E731
  for run, (target, uses_tma, want) in enumerate([(("cuda", 90), False, [S(4, 3), S(8, 3)]),
                                 (("cuda", 80), True, [S(4, 3), S(8, 3)]),
                                 (("cuda", 90), True, [S(4, 3), S(4, 3, 0, True), S(8, 3)])]):
    params.clear_results()
    lowered.clear()
    compiled.clear()
    _install(monkeypatch, softmax_gk)
    params.tune_kernel(softmax_gk, default_ck, relower(uses_tma), target, settings,
                       compile_fn=None, compile_all=compile_all,
                       device_name=f"test GPU {run}")      # no cached choice from the last run
    [t] = params.results()
    assert order(c.settings for c in t.candidates) == want, target
    assert order(compiled) == want[1:]       # the default's compile is reused
    assert (S(4, 3, 0, True) in lowered) == (target[1] >= 90)
  assert params.config_label(S(8, 3, 8, True)) == "8w 3s g8 tma"
  # TMA has not run on a GPU yet: the default configs never try it (a candidate that
  # faulted would take the user's CUDA context down during tuning)
  assert not any(c.get("tma") for c in params.Autotune().config_dicts())
  with pytest.raises(ValueError, match="tma must be 0 or 1"):
    params.Autotune(configs=[{"tma": 2}])


def test_a_bad_tuning_file_or_budget_in_the_environment_says_which_variable_and_what_to_do(
    softmax_gk, monkeypatch, tmp_path):
  """PALLAS_PROF_TUNED naming a missing or broken file raised FileNotFoundError or
  JSONDecodeError from inside a lowering, then a ValueError that failed the user's call;
  now one warning names the variable and what to do, and the kernel keeps its default.
  PALLAS_PROF_AUTOTUNE_BUDGET_S=abc raised a bare ValueError from float(), now one warning
  (pallas_prof/settings.py) and the default."""
  import warnings
  from pallas_prof.tune import tuned_file, validate
  target, gpu = ("cuda", 90), "NVIDIA H200"
  broken = tmp_path / "broken.json"
  broken.write_text("{not json")
  partial = tmp_path / "partial.json"
  partial.write_text(json.dumps({"version": tuned_file.FORMAT_VERSION, "kernels": [{"gpu": gpu}]}))
  for path, words in ((tmp_path / "missing.json", "No such file"), (broken, "not a tuning file"),
                      (tmp_path, "not a tuning file"), (partial, "entry 0: no 'kernel', 'source'")):
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      assert params.tuned_file_choice(str(path), softmax_gk, target, gpu) is None
      assert params.tuned_file_choice(str(path), softmax_gk, target, gpu) is None   # said once
    [warning] = caught
    text = str(warning.message)
    assert warning.category is validate.TuningFileWarning
    assert text.startswith(f"{params.TUNED_ENV}={path}") and words in text, text
    assert "pallas-prof tune" in text, text
  from pallas_prof import settings
  monkeypatch.setenv(params.ENV, "1")
  monkeypatch.setattr(settings, "_warned", set())
  for value in ("abc", "0", "-5"):
    monkeypatch.setenv(params.BUDGET_ENV, value)
    with pytest.warns(settings.EnvironmentVariableWarning,
                      match=f"{params.BUDGET_ENV}='{value}': .* seconds above 0"):
      assert params.settings(None).budget_s == params.Autotune().budget_s
  monkeypatch.setenv(params.BUDGET_ENV, "12.5")
  assert params.settings(None).budget_s == 12.5


def test_loop_stages_candidates_are_left_out_where_no_loop_takes_them(softmax_gk, monkeypatch):
  """softmax has no loop: its {"loop_stages": 3} candidate lowers (by the real relowering)
  to the default's kernel, and is neither compiled nor timed; the default configs try loop
  stages with fewer warps too (Triton copies ahead only loads of 4 bytes a thread)."""
  params.clear_results()
  fake = _install(monkeypatch, softmax_gk)
  rec = kernel_registry.find(softmax_gk.name)[-1]
  assert rec.relower(softmax_gk.options.replace(loop_stages=3)).loop_stages == 0
  compiled = []

  def compile_all(gs):
    compiled.extend(params.default_config(g) for g in gs)
    return params._compile_all(gs, ("cuda", 90))
  settings = params.Autotune(configs=[{"loop_stages": 3}, {"num_warps": 8}], min_launches=5,
                             min_seconds=0.0, budget_s=UNHURRIED)
  params.tune_kernel(softmax_gk, compile_kernel(softmax_gk, ("cuda", 90)), rec.relower,
                     ("cuda", 90), settings, compile_fn=None, compile_all=compile_all)
  [t] = params.results()
  assert [c.settings for c in t.candidates] == [S(4, 3), S(8, 3)]
  assert compiled == [S(8, 3)] and set(fake.block_of_launch) == {128, 256}
  assert {"loop_stages": 3} in params.DEFAULT_CONFIGS
  assert {"num_warps": 2, "loop_stages": 3} in params.DEFAULT_CONFIGS
  assert params.config_label(S(4, 3, loop_stages=3)) == "4w 3s l3"
