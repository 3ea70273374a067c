"""Probes on the GPU: the known-answer kernels, a grid of several waves, and the
examples' distortion, through pallas_prof.profile(probes=True).

    python tests/profiler/probes_gpu.py [--large] [--out DIR] [ka] [waves] [examples]
                                        [softmax] [matmul] [flash_attention]

Prints per kernel the probe table, the distortion and the reconciliation, and the
known-answer checks on the probe shares; writes DIR/probes.json (the profiles) and
DIR/trace.perfetto.json (SM tracks). Exit status 1 if a known answer fails.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import pallas_prof  # noqa: E402
from known_answer_checks import PROBE_CHECKS  # noqa: E402
from pallas_prof.profiler.probes.probe_results import text_table  # noqa: E402


def _run_known_answers(large):
  import known_answer
  known_answer.main(["--large"] if large else [])


WAVES_SHAPE = (16384, 2048)


def _run_waves():
  """ka_copy's kernel on one row of 2048 per program: 16,384 programs of 4 warps, at
  most 16 resident per SM (2,048 threads), so about 8 waves of an H200's 132 SMs."""
  import known_answer
  x = jnp.ones(WAVES_SHAPE, jnp.float32)
  jax.jit(lambda x: known_answer._rows(WAVES_SHAPE, 1, known_answer.ka_copy_kernel, x,
                                       warps=4))(x).block_until_ready()


def _waves_check(k):
  pr = k.probes
  waves = pr.waves
  ok = waves >= 4 and pr.sms >= 100
  return ok, (f"{pr.programs} programs, {pr.sampled_programs} sampled on {pr.sms} SMs, at "
              f"most {pr.max_concurrent_ctas} sampled CTAs at once: about {waves:.1f} waves "
              "(want >= 4 on >= 100 SMs)")


EXAMPLES = ("softmax", "matmul", "flash_attention")


def _run_examples(large, names):
  from conftest import load_example
  argv = ["--large"] if large else []
  for name in names:
    load_example(name).main(argv)


def main(argv):
  large = "--large" in argv
  out = argv[argv.index("--out") + 1] if "--out" in argv else "."
  parts = [a for a in argv if a in ("ka", "waves", "examples") + EXAMPLES] or \
      ["ka", "waves", "examples"]
  pallas_prof.install()
  if "ka" in parts:
    _run_known_answers(large)
  if "waves" in parts:
    _run_waves()
  names = EXAMPLES if "examples" in parts else [p for p in parts if p in EXAMPLES]
  if names:
    _run_examples(large, names)
  from pallas_prof.backend import kernel_registry
  failures, profiles = [], []
  for rec in kernel_registry.kernels():  # one at a time: what is done prints even if time runs out
    report = pallas_prof.profile([rec], probes=True, mode="cold", nvml=False, ceilings=False)
    k = report.kernels[0]
    profiles.append(report)
    print(f"\n== {k.label} {' '.join(map(str, k.in_avals))}: {report.message}")
    for e in k.errors:
      print("  error:", e)
    check = PROBE_CHECKS.get(k.name)
    if k.in_avals and str(k.in_avals[0]) == "float32[%d,%d]" % WAVES_SHAPE:
      check = lambda pr, k=k: _waves_check(k)   # noqa: E731
    if k.probes is None:
      if check is not None:
        failures.append(f"{k.name} (no probes)")
      continue
    print(text_table(k.probes))
    if check is not None:
      ok, what = check(k.probes.to_dict())
      print(f"  known answer {'PASS' if ok else 'FAIL'}: {what}")
      if not ok:
        failures.append(k.name)
  os.makedirs(out, exist_ok=True)
  with open(os.path.join(out, "probes.json"), "w") as f:
    json.dump([r.to_dict() for r in profiles], f, indent=1, default=str)
  from pallas_prof.instrument.probe_tracks import perfetto_events
  events = []
  for i, r in enumerate(profiles):
    for k in r.kernels:
      if k.probes is not None:
        events += perfetto_events(k.label, k.probes, pid=1000 + i)
  with open(os.path.join(out, "trace.perfetto.json"), "w") as f:
    json.dump({"traceEvents": events}, f)
  print("\nknown answers failing:", ", ".join(failures) or "none")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
