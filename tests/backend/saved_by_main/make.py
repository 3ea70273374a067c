"""Writes the files in this folder with the pallas-prof of the checkout it runs in: the
kernel directory a run saves (kernel.json, source.py, compiled.json, the PTX, spec.json and
its cubin) of a bounds-checked matmul that asked for TMA on sm_80 (so it has check sites,
TMA notes and dot facts), a saved workaround plan and the tuning caches' and results' files.

They were written by main at 58525ba, before the artifacts read and wrote themselves through
serial.py: test_saved_by_main.py loads them with the code of today, which must read what an
earlier pallas-prof left. Run it again only to add a file, never to refresh these:

    JAX_PLATFORMS=cpu PYTHONPATH=. python tests/backend/saved_by_main/make.py
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))


def kernel_dir() -> None:
  import jax.numpy as jnp
  import numpy as np
  import pallas_prof
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.cli import run_directory
  from tests.backend.lowering.test_tma import _matmul
  a = jnp.asarray(np.random.default_rng(0).standard_normal((64, 64)), jnp.bfloat16)
  pallas_prof.install(check_bounds=True)
  try:
    *_, gk, _ = _matmul(a, a, 32, 32, 32, compute_capability=80)
  finally:
    pallas_prof.install(check_bounds=False)
    pallas_prof.uninstall()
  assert gk.bounds_sites and gk.tma_notes and any(e.dot for e in gk.eqns)
  ck = pcompile.assemble_cubin(pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False))
  small = dataclasses.replace(ck, asm={s: ck.asm[s] for s in ("ptx", "cubin")})
  run_directory.save_kernel(os.path.join(HERE, "run"), "matmul_kernel#1", gk, small,
                            aliases=[(0, 0)])


def workaround_plan() -> None:
  from pallas_prof.backend.compiling.failures import workarounds
  from pallas_prof.backend.lowering.features.workaround_plan import WorkaroundPlan
  plan = WorkaroundPlan(scan_forms=((3, "unrolled"),), num_warps=8, notes=("num_warps 8",),
                        because="an error of Triton's")
  with open(os.path.join(HERE, "workaround_plan.json"), "w") as f:
    f.write(json.dumps({"format": workarounds.PLAN_FORMAT, "fault": "triton",
                        **plan.to_dict()}))


def tunings() -> None:
  from pallas_prof.tune import blocks, choice, params
  os.environ["PALLAS_PROF_CACHE_DIR"] = os.path.join(HERE, "cache")
  identity = {"kernel": "matmul_kernel", "source": "0" * 64, "target": ["cuda", 90],
              "gpu": "NVIDIA H200", "jax": "0.10.2", "triton": "3.6.0", "pallas_prof": "0",
              "configs": [{"num_warps": 8}]}
  tuning = params.KernelTuning(
      kernel="matmul_kernel", default=(4, 3, 0, 0), best=(8, 3, 0, 0), tuning_s=1.5,
      candidates=(params.Candidate(4, 3, 2e-5, compile_s=0.5, start_ns=1, end_ns=2),
                  params.Candidate(8, 3, 1e-5, compile_s=0.5, start_ns=3, end_ns=4),
                  params.Candidate(8, 4, None, error="outputs differ", start_ns=5, end_ns=6)),
      identity=identity, start_ns=1, end_ns=6, source_key="0" * 64)
  params._save(os.path.join(HERE, "params-cache.json"), identity, tuning)
  params._results[:] = [tuning]
  params.write_results(os.path.join(HERE, "tune-results.json"))
  found = blocks.Tuning(function="matmul", key="a=(64, 64) float32", best={"bm": 64},
                        default_seconds=2e-5, best_seconds=1e-5,
                        candidates=(blocks.Candidate({"bm": 32}, 2e-5, start_ns=1, end_ns=2),
                                    blocks.Candidate({"bm": 64}, 1e-5, start_ns=3, end_ns=4)),
                        tuning_seconds=0.5, clock="wall")
  identity = {"function": "matmul", "key": "a=(64, 64) float32", "source": "0" * 64}
  choice.cache_path = lambda name: os.path.join(HERE, "blocks-cache.json")
  blocks.cache_path = choice.cache_path
  blocks._save("unused", found, identity)


if __name__ == "__main__":
  kernel_dir()
  workaround_plan()
  tunings()
