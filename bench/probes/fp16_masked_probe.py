"""Pins the GPU fuzzer's float16 difference of seed 20261215 (issue 32) in one short run.

The finding: a grid kernel loads x0 with other=v2 (v2 = x1 * x1 + 1, float16, still live),
then sin(x0 * v2); element 17 (masked off) was 0.5664 on the GPU, 0.665 in the reference
(JAX's Pallas interpreter on the host's CPU). The unshrunk program's cos(x0 * x0 * x0),
element 46: 0.793 vs 0.342.

Hypothesis (from the CPU, on the recorded inputs): no miscompile. The GPU's values are
exactly JAX's op-by-op float16 semantics (x1 * x1 rounded, then + 1 rounded: the
sm_90 SASS is HMUL2 then HADD2; the masked load writes a PRMT copy of v2, never v2's
own register); the reference's are exactly what one rounding of `x1 * x1 + 1` (an FMA)
gives, which XLA's CPU does for float32 everywhere and, it seems, for float16 on the
H200's host (a CPU with native float16 FMA: AVX512-FP16). sin/cos of a value in the
hundreds or thousands turns that last bit into anything.

    python3 bench/probes/fp16_masked_probe.py [--device gpu]

Part 1 (the host's CPU, the reference's side): its AVX512-FP16 flag; XLA's jit of
x * x + 1 on 100,000 float16 (and float32) values: how many match one rounding, how
many two; the interpreter reference of each reproducer at its element.
Part 2 (pallas-prof on the device, PALLAS_PROF_PTX_REWRITES=0 then 1): each reproducer
on its recorded inputs and 4 more draws, element by element against both models
(numpy, host-independent): one verdict line per variant. Exits 0.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
RESULTS = os.path.join(ROOT, "bench/corpus/fuzz_gpu_h200_04b520d_seed20261215_repro")
REPROS = {  # reproducer, its element, (GPU, reference) as the fuzzer recorded them
    "shrunk": ("repro_kernel_0_b93cd438.py", 17, (0.5664, 0.665)),
    "unshrunk": ("unshrunk/repro_kernel_3628800_7d8625bf.py", 46, (0.793, 0.342)),
}
T0 = time.time()
H = np.float16


def say(line: str) -> None:
  print(f"[{time.time() - T0:5.1f}s] {line}", flush=True)


def model(name: str, x0, x1, fused: bool) -> np.ndarray:
  """Output 0 of the reproducer in numpy float16 (each op rounded, numpy's float16
  rounds correctly), with v2 = x1 * x1 + 1 rounded twice, or once (fused)."""
  gi = np.arange(x1.size)
  if fused:
    v2 = (x1.astype(np.float32) * x1.astype(np.float32) + 1).astype(H)
  else:
    v2 = (x1 * x1).astype(H) + H(1)
  if name == "shrunk":
    x0 = np.where((gi >= 0) & (gi < 1), x0, v2)
    return np.sin((x0 * v2).astype(np.float32)).astype(H)
  x0 = np.where((gi % 3 != 1) & (gi < 78), x0, v2)
  v7 = x0 * x0
  return np.cos((x0 * v7).astype(np.float32)).astype(H)


def ulps(a, b) -> np.ndarray:
  """|a - b| in float16 units in the last place (both finite)."""
  ia, ib = (np.asarray(v, H).view(np.int16).astype(np.int32) for v in (a, b))
  ia = np.where(ia < 0, -32768 - ia, ia)
  ib = np.where(ib < 0, -32768 - ib, ib)
  return np.abs(ia - ib)


def host_part() -> None:
  import jax
  flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
  say(f"host: jax {jax.__version__}, avx512_fp16 {'avx512_fp16' in flags}, "
      f"cpu {next((l.split(':')[1].strip() for l in flags.splitlines() if 'model name' in l), '?')}")
  cpu = jax.devices("cpu")[0]
  rng = np.random.default_rng(0)
  for dt in (np.float16, np.float32):
    x = rng.uniform(-4, 4, 100000).astype(dt)
    twice = (x * x).astype(dt) + dt(1)
    once = (x.astype(np.float64) * x + 1).astype(dt)
    got = np.asarray(jax.jit(lambda v: v * v + 1)(jax.device_put(x, cpu)))
    n_once, n_twice = int((got == once).sum()), int((got == twice).sum())
    verdict = ("ONE rounding (FMA)" if n_once == x.size else
               "two roundings" if n_twice == x.size else "MIXED")
    say(f"host XLA CPU jit x*x+1 {dt.__name__}: {verdict} | =once {n_once} =twice {n_twice} "
        f"of {x.size} (they differ at {int((once != twice).sum())})")


def load(name):
  from bench.probes.fuzz_repro_gpu import load_program
  from testkit.fuzz import check as fuzz_check
  path, element, recorded = REPROS[name]
  return load_program(os.path.join(RESULTS, path)), element, recorded, fuzz_check


def reference_part() -> None:
  for name in REPROS:
    program, element, recorded, fuzz_check = load(name)
    x0, x1 = fuzz_check.make_inputs(program)
    ref = fuzz_check.run_reference(program, [x0, x1])[0]
    twice, once = model(name, x0, x1, False), model(name, x0, x1, True)
    d_twice, d_once = int(ulps(ref, twice).max()), int(ulps(ref, once).max())
    which = ("one rounding of v2 (FMA)" if d_once <= 1 else
             "two roundings of v2" if d_twice <= 1 else "NEITHER model")
    say(f"{name} host interpreter reference: {which} | element {element} = {ref[element]} "
        f"(fuzzer recorded reference {recorded[1]}); max ulps vs two roundings {d_twice}, "
        f"vs one {d_once}")


def device_part(device_kind: str) -> None:
  import jax
  device = jax.devices(device_kind)[0]
  for flag in ("0", "1"):
    os.environ["PALLAS_PROF_PTX_REWRITES"] = flag
    for name in REPROS:
      program, element, recorded, fuzz_check = load(name)
      for k in range(5):
        p = program if k == 0 else dataclasses.replace(program, seed=program.seed * 1000 + k)
        x0, x1 = fuzz_check.make_inputs(p)
        got = fuzz_check.run_pallas_prof(p, [x0, x1], device)[0]
        twice, once = model(name, x0, x1, False), model(name, x0, x1, True)
        d_twice, d_once = int(ulps(got, twice).max()), int(ulps(got, once).max())
        # sin/cos in float32 then float16: libdevice and numpy may differ by one ulp
        verdict = ("op-by-op float16 (no miscompile)" if d_twice <= 1 else
                   "one rounding of v2 (FMA)" if d_once <= 1 else "NEITHER: a miscompile lead")
        extra = (f" element {element} = {got[element]} (recorded GPU {recorded[0]})"
                 if k == 0 else "")
        say(f"{name} seed {p.seed} REWRITES={flag}: {verdict} | max ulps vs two roundings "
            f"{d_twice}, vs one {d_once}{extra}")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--device", default="gpu")
  args = ap.parse_args(argv)
  host_part()
  reference_part()
  try:
    device_part(args.device)
  except Exception as e:  # noqa: BLE001 - a probe reports, it does not stop
    say(f"device part failed: {type(e).__name__}: {str(e)[:300]}")
  say("done")
  return 0


if __name__ == "__main__":
  sys.exit(main())
