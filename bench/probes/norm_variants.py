"""What would make JAX's layer_norm and rms_norm kernels reach more of the copy
bandwidth? Variants of the generated Triton source, timed side by side.

    python bench/probes/norm_variants.py [--out norm_variants.json]

Each variant is an edit of the source pallas-prof generates for the kernel of
bench/suite/ops_vs_builtin.py (8192x8192 bf16, forward), compiled and timed by
pallas-prof's replay (cold: L2 flushed before each launch; sustained:
back-to-back). The edits change no result (a cache hint, masks that are always
true, the order of independent loads), so outputs are not compared. An
experiment, not a code path: a variant that wins here still has to become a
lowering rule.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

import pallas_prof  # noqa: E402
from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend import kernel_registry  # noqa: E402


def lower(kind: str):
  """The GeneratedKernel of ops_vs_builtin.py's layer_norm or rms_norm."""
  from bench.suite.ops_vs_builtin import OPS_BY_NAME, abstract_args
  spec = OPS_BY_NAME[kind]()
  kernel_registry.clear()
  jax.clear_caches()
  spec["pallas"]().lower(*abstract_args(spec))
  (rec,) = kernel_registry.kernels()
  return rec.generated


def no_policy(src: str) -> str:
  return src.replace(", eviction_policy='evict_last'", "")


def unmasked(src: str) -> str:
  """Masks that are always true here (column < 8192 for columns 0..8191) dropped."""
  src = re.sub(r", mask=(lt|o_ref_mask)(_\d+)?", "", src)
  src = re.sub(r", other=tl\.full\(\(\), [^)]*\)\.to\([^)]*\)", "", src)
  return re.sub(r"tl\.where\(lt(_\d+)?, (\w+), \w+\)", r"\2", src)


def hoisted(src: str) -> str:
  """Weight and bias loads moved up to just after the last load of x, so their
  latency overlaps the reduction instead of following it."""
  lines = src.splitlines()
  moved = [ln for ln in lines if re.search(r"= tl\.load\((weight|bias)_ref", ln)]
  rest = [ln for ln in lines if ln not in moved]
  last_x = max(i for i, ln in enumerate(rest) if "tl.load(x_ref" in ln)
  return "\n".join(rest[:last_x + 1] + moved + rest[last_x + 1:]) + "\n"


def streaming_store(src: str) -> str:
  return re.sub(r"(tl\.store\([^#]*?)\)(\s+#)", r"\1, cache_modifier='.cs')\2", src)


VARIANTS = {
    "as generated": lambda s: s,
    "no eviction hint": no_policy,
    "always-true masks dropped": unmasked,
    "weight/bias loads hoisted": hoisted,
    "dropped masks + hoisted": lambda s: hoisted(unmasked(s)),
    "streaming stores (.cs)": streaming_store,
}


def variant_kernel(gk, name: str, source: str):
  if source == gk.source:
    return gk
  digest = hashlib.sha256(source.encode()).hexdigest()[:16]
  path = os.path.join(os.path.dirname(gk.path), f"{gk.name}_variant_{digest}.py")
  with open(path, "w") as f:
    f.write(source)
  return dataclasses.replace(gk, source=source, path=path, key=f"{gk.key}-{digest}")


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--out")
  ap.add_argument("--kinds", default="layer_norm,rms_norm")
  args = ap.parse_args(argv)
  pallas_prof.install()
  from pallas_prof.profiler import api
  bytes_moved = 2 * 8192 * 8192 * 2
  cc = jax.devices()[0].compute_capability if hasattr(jax.devices()[0], "compute_capability") else "9.0"
  target = ("cuda", int(str(cc).replace(".", "")))
  rows = []
  for kind in args.kinds.split(","):
    gk = lower(kind)
    compiled = {}
    for name, edit in VARIANTS.items():
      compiled[name] = pcompile.compile_kernel(variant_kernel(gk, name, edit(gk.source)), target)
    # the same source, libdevice linked Triton's way
    os.environ["PALLAS_PROF_PREPARED_LIBDEVICE"] = "0"
    compiled["libdevice linked Triton's way"] = pcompile.compile_kernel(gk, target)
    os.environ.pop("PALLAS_PROF_PREPARED_LIBDEVICE")
    for name, ck in compiled.items():
      report = api.profile([ck], mode="both", ceilings=False, nvml=False, min_seconds=0.5,
                           min_launches=300, reference=None)
      k = report.kernels[0]
      rt = k.runtime
      row = {"kernel": kind, "variant": name, "registers": pcompile.assemble_cubin(ck).registers,
             "cold_median_us": rt.cold.median_s * 1e6 if rt and rt.cold else None,
             "sustained_median_us": rt.sustained.median_s * 1e6 if rt and rt.sustained else None,
             "errors": k.errors}
      if row["sustained_median_us"]:
        row["sustained_GBps"] = bytes_moved / (row["sustained_median_us"] * 1e-6) / 1e9
      rows.append(row)
      print(json.dumps(row), flush=True)
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"device": jax.devices()[0].device_kind, "rows": rows,
                 "command": "python bench/probes/norm_variants.py"}, f, indent=2)


if __name__ == "__main__":
  main()
