"""The split reduction advise builds (issue 49, item 1), measured on the GPU: JAX's norms'
backward dw/db kernel, original against the variants pallas-prof builds from its jaxpr,
against XLA, alone and in the whole fwd+bwd.

    PYTHONPATH=$PWD python3 bench/advice/split_reduction_gpu.py --out $OUT/split_reduction.json

For rms_norm 8x2048x3136 and layer_norm 1x8192x8192 (bf16, the suite's shapes of issue
49's table): the dw/db pallas_call recorded while the fwd+bwd is traced
(pallas_prof/advice/recipes.py), its pattern recognized (advice/split/pattern.py), and for
each S (the ones `advise` would try, variant.splits, and a few more for the landscape):
  - the dw/db call alone: original, split variant (its XLA .sum(0) included) and XLA's own
    dw/db reductions on the same inputs, outputs compared (tune/choice.same_outputs);
  - the whole fwd+bwd with the dw/db call replaced by the variant (pl.pallas_call wrapped
    while it is traced), against the original fwd+bwd and XLA's reference fwd+bwd.
Times are wall-clock medians per call (block_until_ready), as advice_known_answers.py's
norm timings. Prints each time and the ratios (variant / original, variant / XLA), writes
everything to --out. Keeps to --budget-s (default 100 s): an S not reached is recorded as
skipped. Without a GPU it says so and times nothing (the CPU tests check the variants:
tests/advice/test_split_reduction.py).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bench.advice.wall import wall_median  # noqa: E402

START = time.perf_counter()
CASES = (("rms_norm", (8, 2048, 3136)), ("layer_norm", (1, 8192, 8192)))
EXTRA_SPLITS = (2, 4, 8, 16)     # beside advise's own choices: how the time moves with S


def say(text: str) -> None:
  print(f"[{time.perf_counter() - START:6.1f}s] {text}", flush=True)


def _xla_dw_db(kind: str):
  """XLA's own dw/db from the dw/db call's arguments (x, w, b, do, [mean,] rstd)."""
  import jax
  import jax.numpy as jnp

  def rms(x, w, b, do, rstd):
    x, do = x.astype(jnp.float32), do.astype(jnp.float32)
    a_hat = x * rstd.astype(jnp.float32)[:, None]
    return (do * a_hat).sum(0).astype(w.dtype), do.sum(0).astype(b.dtype)

  def ln(x, w, b, do, mean, rstd):
    x, do = x.astype(jnp.float32), do.astype(jnp.float32)
    a_hat = (x - mean.astype(jnp.float32)[:, None]) * rstd.astype(jnp.float32)[:, None]
    return (do * a_hat).sum(0).astype(w.dtype), do.sum(0).astype(b.dtype)
  return jax.jit(rms if kind == "rms_norm" else ln)


@contextlib.contextmanager
def _split_dw_db(splits: int, built: list):
  """pl.pallas_call wrapped while entered: the call named ln_backward_dw_db becomes its split
  variant (built as advise builds it; each one built is appended to `built`), every other
  call is left alone."""
  from jax.experimental import pallas as pl
  from pallas_prof.advice.recipes import Recipe
  from pallas_prof.advice.split import variant
  original = pl.pallas_call

  def pallas_call(kernel, out_shape=None, **kwargs):
    fn = original(kernel, out_shape, **kwargs)
    if kwargs.get("name") != "ln_backward_dw_db":
      return fn

    def call(*xs):
      recipe = Recipe(kernel, out_shape, dict(kwargs), None, None, original,
                      arg_shapes=tuple((tuple(x.shape), x.dtype) for x in xs))
      k, p = variant.pattern_of(recipe)
      built.append(splits)
      return variant.build(recipe, k, p, splits)(*xs)
    return call
  pl.pallas_call = pallas_call
  try:
    yield
  finally:
    pl.pallas_call = original


def run_case(kind: str, shape: tuple, deadline: float) -> dict:
  import importlib
  import jax
  import jax.numpy as jnp
  from bench.suite.suite_cases import _vjp_fn
  from pallas_prof.advice import recipes
  from pallas_prof.advice.split import variant
  from pallas_prof.tune.choice import leaves, same_outputs
  mod = importlib.import_module(f"jax.experimental.pallas.ops.gpu.{kind}")
  bf16 = jnp.bfloat16
  keys = jax.random.split(jax.random.PRNGKey(7), 4)
  args = [jax.random.normal(keys[0], shape, jnp.float32).astype(bf16),
          jax.random.normal(keys[1], shape[-1:], jnp.float32).astype(bf16),
          jax.random.normal(keys[2], shape[-1:], jnp.float32).astype(bf16),
          jax.random.normal(keys[3], shape, jnp.float32).astype(bf16)]
  fwd_bwd = _vjp_fn(getattr(mod, kind), 3)
  xla_op = jax.jit(_vjp_fn(getattr(mod, f"{kind}_reference"), 3))
  recipes.clear()
  with recipes.capture():
    pallas = jax.jit(fwd_bwd)
    want_op = leaves(jax.block_until_ready(pallas(*args)))
  (recipe,) = [r for r in recipes.recipes() if r.name == "ln_backward_dw_db"]
  k, p = variant.pattern_of(recipe)
  sms = getattr(jax.devices()[0], "core_count", None) or 132
  programs = math.prod(k.grid)
  advised = variant.splits(programs, p.trip, sms)
  sizes = list(dict.fromkeys(advised + [s for s in EXTRA_SPLITS if s <= p.trip // 2]))
  dw_args = variant.inputs(recipe, seed=1)
  original = jax.jit(variant.original(recipe))
  want = leaves(original(*dw_args))
  out = {"op": f"{kind} fwd+bwd", "shape": list(shape), "dtype": "bfloat16",
         "dw_db": {"grid": list(k.grid), "trip": p.trip, "sms": sms, "advised_splits": advised,
                   "original_s": wall_median(original, dw_args, n=30),
                   "xla_s": wall_median(_xla_dw_db(kind), dw_args, n=30)},
         "fwd_bwd": {"original_s": wall_median(pallas, args, n=30),
                     "xla_s": wall_median(xla_op, args, n=30)},
         "splits": []}
  xla_differs = same_outputs(leaves(_xla_dw_db(kind)(*dw_args)), want)
  out["dw_db"]["xla_outputs"] = xla_differs or "equal"
  d, o = out["dw_db"], out["fwd_bwd"]
  say(f"{kind} {'x'.join(map(str, shape))} bf16: dw/db grid {k.grid}, {p.trip} iterations, "
      f"{sms} SMs; advise tries S in {advised}")
  say(f"  dw/db original {d['original_s'] * 1e3:.3f} ms, XLA {d['xla_s'] * 1e3:.3f} ms "
      f"(original / XLA {d['original_s'] / d['xla_s']:.2f}); fwd+bwd original "
      f"{o['original_s'] * 1e3:.3f} ms, XLA {o['xla_s'] * 1e3:.3f} ms "
      f"({o['original_s'] / o['xla_s']:.2f})")
  for s in sizes:
    if time.perf_counter() > deadline:
      out["splits"].append({"splits": s, "skipped": "the budget was spent"})
      continue
    fn = jax.jit(variant.build(recipe, k, p, s))
    row = {"splits": s, "advised": s in advised,
           "outputs": same_outputs(leaves(fn(*dw_args)), want) or "equal"}
    row["dw_db_s"] = wall_median(fn, dw_args, n=30)
    built: list = []
    jax.clear_caches()           # else JAX reuses its trace of the backward, with the original
    with _split_dw_db(s, built):
      op = jax.jit(fwd_bwd)
      row["fwd_bwd_outputs"] = same_outputs(leaves(op(*args)), want_op) or "equal"
    if not built:        # a trace JAX had cached: the fwd+bwd timed would be the original's
      raise RuntimeError("the fwd+bwd was not traced again: the variant is not in it")
    row["fwd_bwd_s"] = wall_median(op, args, n=30)
    row["dw_db_vs_original"] = row["dw_db_s"] / d["original_s"]
    row["dw_db_vs_xla"] = row["dw_db_s"] / d["xla_s"]
    row["fwd_bwd_vs_original"] = row["fwd_bwd_s"] / o["original_s"]
    row["fwd_bwd_vs_xla"] = row["fwd_bwd_s"] / o["xla_s"]
    out["splits"].append(row)
    say(f"  S={s:<3}{' (advised)' if row['advised'] else '          '} dw/db "
        f"{row['dw_db_s'] * 1e3:.3f} ms: x{row['dw_db_vs_original']:.2f} of the original, "
        f"x{row['dw_db_vs_xla']:.2f} of XLA, outputs {row['outputs']}; fwd+bwd "
        f"{row['fwd_bwd_s'] * 1e3:.3f} ms: x{row['fwd_bwd_vs_original']:.2f} of the original, "
        f"x{row['fwd_bwd_vs_xla']:.2f} of XLA, outputs {row['fwd_bwd_outputs']}")
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--out", default="split_reduction.json")
  ap.add_argument("--budget-s", type=float, default=100.0)
  ap.add_argument("--commit", default=os.environ.get("PALLAS_PROF_COMMIT"))
  args = ap.parse_args(argv)
  import jax
  import pallas_prof
  pallas_prof.install()
  gpu = any(d.platform == "gpu" for d in jax.devices())
  result = {"commit": args.commit, "device": str(jax.devices()[0]), "gpu": gpu, "cases": []}
  if not gpu:
    say("no GPU: nothing is timed (tests/advice/test_split_reduction.py checks the variants "
        "on a CPU)")
  else:
    deadline = START + args.budget_s
    for kind, shape in CASES:
      try:
        result["cases"].append(run_case(kind, shape, deadline))
      except Exception as e:  # noqa: BLE001 - the other case still runs, the error is kept
        say(f"{kind}: failed: {type(e).__name__}: {e}")
        result["cases"].append({"op": kind, "error": f"{type(e).__name__}: {str(e)[:500]}"})
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1)
  say(f"wrote {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
