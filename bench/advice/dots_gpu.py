"""What `advise` keeps for a float32 dot far from its rate (issue 49, item 1), on the GPU:
the suite's matmul 5120x3136x4096 f32 (examples/matmul.py at the suite's blocks: bm=128,
bn=64, bk=32, 4 warps, 3 stages), and the same kernel asking for precision=HIGHEST.

    PYTHONPATH=$PWD python3 bench/advice/dots_gpu.py --out $OUT/dots.json

For each: the kernel run once (its pallas_call recorded: advice/recipes.py), `advise`
with --budget-s per kernel, and every action of the dot rules (dot_rate: block shapes with
their own warps and stages, kind c; dot_precision: the precision edits, kind e) recorded
with its status, before/after times, saving, outputs compared and, for a precision edit,
its error against a float64 product; what advise kept; and XLA's jnp.dot on the same
inputs (wall-clock median, bench/advice/wall.py) beside the original and the kept variant
where one was kept. Without a GPU it says so and times nothing (tests/advice/test_dots.py
checks the variants on a CPU).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples"))
from bench.advice.wall import wall_median  # noqa: E402

START = time.perf_counter()
SHAPE = (5120, 3136, 4096)               # M, N, K: the suite's f32 matmul
SUITE = dict(bm=128, bn=64, bk=32, num_warps=4, num_stages=3)
DOT_RULES = ("dot_rate", "dot_precision")


def say(text: str) -> None:
  print(f"[{time.perf_counter() - START:6.1f}s] {text}", flush=True)


def _highest(a, b, bm, bn, bk, num_warps, num_stages):
  """The suite's matmul asking for precision=HIGHEST (testkit/precision_matmul.py)."""
  import jax
  from testkit.precision_matmul import precision_matmul
  return precision_matmul(a, b, bm, bn, bk, jax.lax.Precision.HIGHEST, num_warps, num_stages)


def _action(a) -> dict:
  t = a.trial
  return {"kind": a.kind, "rule": a.rule, "title": a.title, "change": a.change,
          "status": a.status, "apply": a.apply, "compiled": a.compiled, "accuracy": a.accuracy,
          "before_s": t.before_s if t else None, "after_s": t.after_s if t else None,
          "saving_pct": t.saving_pct if t else None, "noise_pct": t.noise_pct if t else None,
          "outputs_equal": t.outputs_equal if t else None, "held": bool(t and t.held),
          "error": t.error if t else None}


def run_case(name: str, fn, budget_s: float) -> dict:
  import jax
  import jax.numpy as jnp
  import pallas_prof
  from pallas_prof.advice import recipes
  from pallas_prof.backend import kernel_registry
  m, n, k = SHAPE
  ka, kb = jax.random.split(jax.random.PRNGKey(0))
  a = jax.random.normal(ka, (m, k), jnp.float32)
  b = jax.random.normal(kb, (k, n), jnp.float32)
  call = jax.jit(lambda a, b: fn(a, b, **SUITE))
  recipes.clear()
  before = {id(r) for r in kernel_registry.kernels()}
  with recipes.capture():
    jax.block_until_ready(call(a, b))
  recs = [r for r in kernel_registry.kernels() if id(r) not in before]
  say(f"{name}: advising {[r.label for r in recs]} (budget {budget_s:.0f} s)")
  (advice,) = pallas_prof.advise(recs[-1:], budget_s=budget_s, progress=say)
  xla = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
  out = {"case": name, "shape": list(SHAPE), "settings": SUITE, "summary": advice.summary,
         "measured": advice.measured, "kept": advice.kept,
         "diagnoses": [d.text for d in advice.diagnoses],
         "actions": [_action(x) for x in advice.actions],
         "notes": list(advice.notes),
         "original_wall_s": wall_median(call, (a, b)), "xla_wall_s": wall_median(xla, (a, b)),
         "flops": 2 * m * n * k}
  for x in out["actions"]:
    if x["rule"] in DOT_RULES:
      say(f"{name}: [{x['kind']}] {x['title']}: {x['status']}; {x['before_s']} -> {x['after_s']} s"
          f" ({x['saving_pct']} %), outputs equal {x['outputs_equal']}, {x['accuracy'] or ''}")
  say(f"{name}: kept {advice.kept}; original {out['original_wall_s'] * 1e3:.3f} ms, "
      f"XLA {out['xla_wall_s'] * 1e3:.3f} ms")
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--out", default="dots.json")
  ap.add_argument("--budget-s", type=float, default=90.0, help="advise's budget per kernel")
  ap.add_argument("--commit", default=os.environ.get("PALLAS_PROF_COMMIT"))
  args = ap.parse_args(argv)
  import jax
  import pallas_prof
  import matmul as example             # examples/matmul.py
  pallas_prof.install()
  gpu = any(d.platform == "gpu" for d in jax.devices())
  result = {"commit": args.commit, "device": str(jax.devices()[0]), "gpu": gpu, "cases": []}
  if not gpu:
    say("no GPU: nothing is timed (tests/advice/test_dots.py checks the variants on a CPU)")
  else:
    for name, fn in (("matmul f32 (TF32, the suite's)", example.matmul),
                     ("matmul f32 precision=HIGHEST", _highest)):
      try:
        result["cases"].append(run_case(name, fn, args.budget_s))
      except Exception as e:  # noqa: BLE001 - the other case still runs, the error is kept
        say(f"{name}: failed: {type(e).__name__}: {e}")
        result["cases"].append({"case": name, "error": f"{type(e).__name__}: {str(e)[:500]}"})
  with open(args.out, "w") as f:
    json.dump(result, f, indent=1, default=str)
  say(f"wrote {args.out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
