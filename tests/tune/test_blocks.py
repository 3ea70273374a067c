"""pallas_prof.autotune: the fastest config whose outputs equal the default's, per key,
cached on disk so that a new process uses it without timing."""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.tune import blocks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  pallas_prof.install()
  yield tmp_path
  pallas_prof.uninstall()


def _scale_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + 1.0


def _scale(x, block=128):
  """A real Pallas kernel whose block size is the tuned parameter (n not a multiple of it)."""
  spec = pl.BlockSpec((block,), lambda i: (i,))
  return pl.pallas_call(_scale_kernel, grid=(pl.cdiv(x.shape[0], block),), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_picks_the_fastest_config_and_the_result_is_right(rng, monkeypatch):
  # the host's sleeps below decide, so the tuner must time by the wall clock; on a GPU it
  # would time by CUPTI, where sleeping costs nothing
  from pallas_prof.tune import calltime
  monkeypatch.setattr(calltime, "pick_clock", lambda call: ("wall", "no GPU (this test)"))
  calls = []

  @pallas_prof.autotune(configs=[dict(block=64), dict(block=256), dict(block=1024)], key=["x"],
                        repeats=5)
  def scale(x, block=64):
    calls.append(block)
    # 1024 the fastest by far more than a loaded CPU's noise in the interpreter
    time.sleep({64: 0.08, 256: 0.15, 1024: 0.0}[block])
    return _scale(x, block)

  x = jnp.asarray(rng.standard_normal(1000), jnp.float32)
  out = scale(x)
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2.0 + 1.0)
  t = scale.last_tuning
  assert t.best == {"block": 1024}
  assert [c.config["block"] for c in t.candidates] == [64, 256, 1024]
  assert all(c.seconds is not None and c.error is None for c in t.candidates)
  assert t.default_seconds > t.best_seconds and t.speedup > 1
  # a second call with the same key runs the chosen config once, no timing
  calls.clear()
  scale(x + 1.0)
  assert calls == [1024]
  # a new shape is a new key: tuned again
  scale(jnp.asarray(rng.standard_normal(300), jnp.float32))
  assert len(scale.tunings) == 2 and len(calls) > 1


def test_a_config_with_different_outputs_or_an_error_is_dropped_and_says_why(rng):
  @pallas_prof.autotune(configs=[dict(block=128, wrong=False), dict(block=64, wrong=True),
                                 dict(block=0, wrong=False)])
  def scale(x, block=128, wrong=False):
    if block == 0:
      raise ValueError("block must be positive")
    out = _scale(x, block)
    return out + 1.0 if wrong else out

  x = jnp.asarray(rng.standard_normal(500), jnp.float32)
  np.testing.assert_array_equal(np.asarray(scale(x)), np.asarray(x) * 2.0 + 1.0)
  t = scale.last_tuning
  assert t.best == {"block": 128, "wrong": False}
  default, wrong, broken = t.candidates
  assert default.seconds is not None
  assert wrong.seconds is None and "differ from the default" in wrong.error
  assert broken.seconds is None and "ValueError: block must be positive" in broken.error


def test_the_choice_is_cached_on_disk_and_a_new_process_uses_it_without_timing(private_cache):
  script = f"""
import sys, time, json; sys.path.insert(0, {ROOT!r})
import jax.numpy as jnp, numpy as np, pallas_prof
pallas_prof.install()
from tests.tune.test_blocks import _scale
timed = []
@pallas_prof.autotune(configs=[dict(block=128), dict(block=512)], key=["x"])
def scale(x, block=128):
  timed.append(block)
  return _scale(x, block)
x = jnp.asarray(np.random.default_rng(0).standard_normal(700), jnp.float32)
t0 = time.perf_counter(); out = scale(x); dt = time.perf_counter() - t0
assert np.array_equal(np.asarray(out), np.asarray(x) * 2.0 + 1.0)
print(json.dumps({{"calls": timed, "cached": scale.last_tuning.from_cache,
                  "best": scale.last_tuning.best}}))
"""
  env = dict(os.environ, PYTHONPATH=ROOT, PALLAS_PROF_CACHE_DIR=str(private_cache))
  runs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                    text=True, check=True, timeout=300).stdout.splitlines()[-1])
          for _ in range(2)]
  first, second = runs
  assert not first["cached"] and len(first["calls"]) > 2      # every config ran, then again to time
  assert second["cached"] and second["calls"] == [second["best"]["block"]]
  assert second["best"] == first["best"]
  [saved] = os.listdir(private_cache / "tune")
  data = json.loads((private_cache / "tune" / saved).read_text())
  assert data["identity"]["key"] == "x=float32[700]"
  assert {"device", "jax", "triton", "pallas_prof", "source"} <= set(data["identity"])


def test_under_jit_an_untuned_key_uses_the_default_and_warns(rng):
  @pallas_prof.autotune(configs=[dict(block=128), dict(block=256)])
  def scale(x, block=128):
    return _scale(x, block)

  x = jnp.asarray(rng.standard_normal(400), jnp.float32)
  with pytest.warns(UserWarning, match="under a JAX trace.*outside jit"):
    out = jax.jit(scale)(x)
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2.0 + 1.0)
  scale(x)                                           # tuned on real arrays
  jax.jit(scale)(x + 1.0)                            # now uses the choice, no warning
  assert scale.last_tuning is not None


def test_bad_configs_are_refused_up_front():
  with pytest.raises(blocks.TuningError, match="at least one config"):
    pallas_prof.autotune(configs=[])
  with pytest.raises(blocks.TuningError, match=r"\['blokc'\]"):
    pallas_prof.autotune(configs=[dict(blokc=64)])(_scale)


def test_same_outputs_bit_for_bit_for_integers_tolerance_for_floats():
  i = np.arange(10, dtype=np.int32)
  assert blocks.same_outputs([i], [i]) is None
  assert "1 of 10" in blocks.same_outputs([i + (i == 3)], [i])
  f = np.linspace(0, 1, 10, dtype=np.float32)
  assert blocks.same_outputs([f * (1 + 1e-6)], [f]) is None          # a reduction order's rounding
  assert "differ" in blocks.same_outputs([f + 1e-2], [f])
  assert "float32[10]" in blocks.same_outputs([f.astype(np.float16)], [f]) or \
      "float16" in blocks.same_outputs([f.astype(np.float16)], [f])


def test_each_config_is_a_span_under_the_tuning(rng):
  from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
  from pallas_prof.instrument import conventions as cv

  @pallas_prof.autotune(configs=[dict(block=64), dict(block=256)], key=["x"], repeats=3,
                        name="scale_spans")
  def scale(x, block=64):
    return _scale(x, block)

  x = jnp.asarray(rng.standard_normal(500), jnp.float32)
  exporter = InMemorySpanExporter()
  with pallas_prof.tracing(exporter):
    scale(x)
  spans = exporter.get_finished_spans()
  (tuning,) = [s for s in spans if s.name == cv.tune("scale_spans")]
  assert tuning.attributes[cv.TUNE_KIND] == "blocks"
  assert tuning.attributes[cv.TUNE_DEFAULT] == "block=64"
  assert tuning.attributes[cv.TUNE_CLOCK] == ("gpu" if jax.default_backend() == "gpu" else "wall")
  children = [s for s in spans if s.parent and s.parent.span_id == tuning.context.span_id]
  assert sorted(s.name for s in children) == [cv.tune_candidate("scale_spans", "block=256"),
                                              cv.tune_candidate("scale_spans", "block=64")]
  chosen = [s for s in children if s.attributes[cv.TUNE_CHOSEN]]
  assert len(chosen) == 1 and chosen[0].attributes[cv.TUNE_CONFIG] == tuning.attributes[cv.TUNE_BEST]
  assert all(cv.TUNE_MEDIAN_US in s.attributes for s in children)
  assert not {k for s in spans for k in s.attributes if not cv.declared(k)}


def test_a_config_within_the_noise_of_the_default_does_not_replace_it(rng, monkeypatch):
  """Timing noise must not pick a config that is no faster: another config wins only
  when more than min_gain (2 %) faster than the default."""
  scripted = {64: 1.00, 128: 0.99, 256: 0.97}     # seconds per call, by block
  from pallas_prof.tune import calltime
  monkeypatch.setattr(calltime, "time_in_turns",
                      lambda timers, *a, **k: [scripted[t.call.keywords["block"]] for t in timers])
  x = jnp.asarray(rng.standard_normal(300), jnp.float32)

  def make(configs, **kwargs):
    @pallas_prof.autotune(configs=configs, key=["x"], cache=False, **kwargs)
    def scale(x, block=64):
      return _scale(x, block)
    scale(x)
    return scale.last_tuning

  assert make([dict(block=64), dict(block=128)]).best == {"block": 64}       # 1 % faster: noise
  assert make([dict(block=64), dict(block=128), dict(block=256)]).best == {"block": 256}  # 3 %
  assert make([dict(block=64), dict(block=256)], min_gain=0.05).best == {"block": 64}
  assert make([dict(block=64), dict(block=128)], min_gain=0.0).best == {"block": 128}
