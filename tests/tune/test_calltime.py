"""tune/calltime.py: whole calls timed in batches, candidates in turns, by one clock."""
import time

import numpy as np
import pytest

from pallas_prof.tune import calltime


class _Call:
  """A call of a scripted cost: `seconds` of host time each; counts its calls."""

  def __init__(self, seconds):
    self.seconds, self.calls = seconds, 0

  def __call__(self):
    self.calls += 1
    end = time.perf_counter() + self.seconds
    while time.perf_counter() < end:
      pass
    return self.calls


def test_a_short_call_is_timed_in_batches_and_a_long_one_alone():
  short, long = calltime.CallTimer(_Call(1e-5)), calltime.CallTimer(_Call(5e-3))
  assert short.per_batch > 1        # several calls a batch (at most MAX_BATCH)
  assert short.per_batch <= calltime.MAX_BATCH
  assert long.per_batch == 1
  before = short.call.calls
  seconds = short.sample()
  assert short.call.calls - before == short.per_batch
  assert 0.5e-5 < seconds < 1e-3


def test_candidates_take_turns_and_each_gets_its_median():
  order = []

  class _Timer:
    def __init__(self, name, seconds):
      self.name, self.samples, self.seconds = name, [], seconds

    def sample(self):
      order.append(self.name)
      self.samples.append(self.seconds)
      return self.seconds

    @property
    def median(self):
      return sorted(self.samples)[len(self.samples) // 2]

  timers = [_Timer("a", 2.0), _Timer("b", 1.0)]
  assert calltime.time_in_turns(timers, repeats=4, max_seconds=10.0) == [2.0, 1.0]
  assert order == ["a", "b"] * 4
  order.clear()
  calltime.time_in_turns(timers, repeats=50, max_seconds=0.0)     # at least 3 rounds
  assert order == ["a", "b"] * 3


def test_time_in_turns_of_no_timers_is_empty():
  assert calltime.time_in_turns([], repeats=5, max_seconds=1.0) == []


def test_a_config_that_fails_while_timed_is_dropped_and_the_others_go_on():
  class _Flaky(_Call):
    def __call__(self):
      if self.calls >= 5:
        raise RuntimeError("out of memory")
      return super().__call__()

  good, flaky = calltime.CallTimer(_Call(1e-4)), calltime.CallTimer(_Flaky(1e-4))
  got = calltime.time_in_turns([good, flaky], repeats=4, max_seconds=10.0)
  assert got[0] is not None and got[1] is None
  assert "out of memory" in flaky.error and len(good.samples) == 4


# --- the GPU's clock ------------------------------------------------------------------------------

def test_gpu_seconds_per_call_sums_cuptis_kernels_over_the_calls(monkeypatch):
  """Every kernel the batch launched counts (XLA's between the Pallas ones too), per call."""
  from pallas_prof.profiler.timing import insitu

  class _Capture:
    def __init__(self, devices=None):
      self.result = None

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      self.result = insitu.InsituResult(
          {"pallas": insitu.KernelTimes("pallas", 4, 4000.0, [0]),
           "xla_fusion": insitu.KernelTimes("xla_fusion", 4, 2000.0, [0])}, {}, None, [])

  monkeypatch.setattr(insitu, "capture", _Capture)
  call = _Call(0.0)
  assert calltime.gpu_seconds_per_call(call, 4) == pytest.approx(1.5e-6)   # 6000 ns / 4 calls
  assert call.calls == 4


def test_gpu_seconds_per_call_without_kernels_raises_with_the_captures_notes(monkeypatch):
  from pallas_prof.profiler.timing import insitu

  class _Empty:
    def __init__(self, devices=None):
      self.result = insitu.InsituResult({}, {}, None, ["another tool took CUPTI"])

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      return None

  monkeypatch.setattr(insitu, "capture", _Empty)
  with pytest.raises(RuntimeError, match="another tool took CUPTI"):
    calltime.gpu_seconds_per_call(_Call(0.0), 2)


def test_without_a_gpu_the_wall_clock_is_picked_and_says_why(monkeypatch):
  import jax
  monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
  clock, why = calltime.pick_clock(_Call(0.0))
  assert clock == "wall" and "no GPU" in why


def _has_gpu() -> bool:
  import jax
  return jax.default_backend() == "gpu"


@pytest.mark.skipif(not _has_gpu(), reason="the GPU's clock needs a GPU (CUPTI)")
def test_on_a_real_gpu_the_clock_is_the_gpus_and_reads_the_kernels_time():
  """A copy of 256 MiB reads and writes 512 MiB: on any current GPU between 0.05 and 20 ms
  of kernel time, and the GPU's clock reads that, not the host's dispatch."""
  import jax
  import jax.numpy as jnp
  x = jnp.ones((64 << 20,), jnp.float32)
  copy = jax.jit(lambda a: a * 2.0)
  call = lambda: copy(x)            # noqa: E731
  jax.block_until_ready(call())
  assert calltime.pick_clock(call) == ("gpu", None)
  seconds = calltime.gpu_seconds_per_call(call, 5)
  assert 5e-5 < seconds < 2e-2
  timer = calltime.CallTimer(call, clock="gpu")
  assert timer.sample() == pytest.approx(seconds, rel=0.5)


def test_on_a_gpu_the_gpus_clock_decides_not_the_hosts_dispatch(monkeypatch):
  """The wall clock would pick "16 warps" (its dispatch is 40x quicker); the GPU's clock
  keeps the default, whose kernel is faster."""
  import jax

  from pallas_prof.tune import blocks
  scripted = {"default": (4e-3, 1.0e-5), "16 warps": (1e-4, 1.4e-5)}   # (host s, GPU s)
  seen = []

  def fn(which="default"):
    seen.append(which)
    host, _ = scripted[which]
    end = time.perf_counter() + host
    while time.perf_counter() < end:
      pass
    return np.full(3, 1.0, np.float32)

  def gpu(call, n):
    for _ in range(n):
      call()
    return scripted[call.keywords.get("which", "default")][1]

  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(calltime, "gpu_seconds_per_call", gpu)
  t = blocks.tune(fn, [{}, {"which": "16 warps"}], (), {}, repeats=3, warm_up=1, name="softmax")
  assert t.clock == "gpu" and t.clock_note is None
  assert t.best == {}
  assert [c.seconds for c in t.candidates] == [pytest.approx(1.0e-5), pytest.approx(1.4e-5)]

  def busy(call, n):
    raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

  monkeypatch.setattr(calltime, "gpu_seconds_per_call", busy)
  t = blocks.tune(fn, [{}, {"which": "16 warps"}], (), {}, repeats=3, warm_up=1, name="softmax")
  assert t.clock == "wall" and "MULTIPLE_SUBSCRIBERS" in t.clock_note
  assert t.best == {"which": "16 warps"}            # the wall clock sees the dispatch
  assert blocks.Tuning.from_dict(t.to_dict()).clock == "wall"


def _scripted_gpu(monkeypatch, scripted, fail_after=None):
  """The GPU's clock, scripted: each config's GPU seconds; from the `fail_after`-th batch
  on, the clock fails (another tool took CUPTI)."""
  import jax
  batches = []

  def gpu(call, n):
    batches.append(call)
    if fail_after is not None and len(batches) > fail_after:
      raise calltime.ClockError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")
    for _ in range(n):
      call()
    return scripted[call.keywords.get("which", "default")][1]

  monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
  monkeypatch.setattr(calltime, "gpu_seconds_per_call", gpu)
  return batches


def _host_busy(scripted):
  def fn(which="default"):
    end = time.perf_counter() + scripted[which][0]
    while time.perf_counter() < end:
      pass
    return np.full(3, 1.0, np.float32)
  return fn


def test_a_clock_that_fails_part_way_times_every_config_again_by_the_wall_clock(monkeypatch):
  """Not the default config's failure (which would end the tuning) nor a dropped config."""
  from pallas_prof.tune import blocks
  scripted = {"default": (4e-3, 1.0e-5), "16 warps": (1e-4, 1.4e-5)}
  _scripted_gpu(monkeypatch, scripted, fail_after=3)      # pick_clock's batch, then two
  t = blocks.tune(_host_busy(scripted), [{}, {"which": "16 warps"}], (), {}, repeats=3,
                  warm_up=1, name="softmax")
  assert t.clock == "wall" and "failed while timing" in t.clock_note
  assert all(c.seconds is not None and c.error is None for c in t.candidates)
  assert t.best == {"which": "16 warps"}          # by the wall clock, as every config was timed


def test_a_config_that_raises_under_the_gpu_clock_is_dropped_and_the_clock_stays(monkeypatch):
  from pallas_prof.tune import blocks
  scripted = {"default": (1e-4, 1.0e-5), "bad": (1e-4, 0.5e-5)}
  _scripted_gpu(monkeypatch, scripted)
  state = {"calls": 0}

  def fn(which="default"):
    if which == "bad":
      state["calls"] += 1
      if state["calls"] > 4:                         # builds and warms up, then fails
        raise RuntimeError("an illegal memory access was encountered")
    return np.full(3, 1.0, np.float32)

  t = blocks.tune(fn, [{}, {"which": "bad"}], (), {}, repeats=3, warm_up=1, name="k")
  assert t.clock == "gpu"
  assert t.best == {} and "illegal memory access" in t.candidates[1].error


def test_a_wall_clock_choice_on_a_gpu_machine_is_not_kept_on_disk(monkeypatch, tmp_path):
  import pallas_prof
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  scripted = {"default": (1e-4, 1.0e-5), "other": (1e-4, 2.0e-5)}
  _scripted_gpu(monkeypatch, scripted, fail_after=0)        # CUPTI taken from the start
  fn = _host_busy(scripted)
  pallas_prof.autotune([{}, {"which": "other"}], name="walled")(fn)()
  assert not list(tmp_path.rglob("*.json"))
  _scripted_gpu(monkeypatch, scripted)                       # CUPTI free again
  tuned = pallas_prof.autotune([{}, {"which": "other"}], name="walled")(fn)
  tuned()
  assert tuned.last_tuning.clock == "gpu" and len(list(tmp_path.rglob("*.json"))) == 1
