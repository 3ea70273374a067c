"""How does XLA round conversions into a 16-bit float, once or twice (through
float32), in the JAX installed, on the CPU and on the default device, and
does pallas-prof agree? (compat.xla_rounds_f64_to_16bit_twice decides what
pallas-prof emits.)

    python bench/probes/convert_rounding.py [--out convert_rounding.json]

Inputs are ties: values halfway between two neighbours of the 16-bit type
once in float32, just above halfway in their own type, so one rounding goes
up and two roundings (to even) go down; plus random values. Prints, per
conversion, how many elements each path differs from a single correctly
rounded conversion (numpy / ml_dtypes) and from XLA on the CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import pallas_prof  # noqa: E402
from pallas_prof.backend import compat  # noqa: E402

jax.config.update("jax_enable_x64", True)

F16_TIES = [1 + 2 ** -11 + 2 ** -40, -(1 + 2 ** -11 + 2 ** -40), 1000.25 + 2 ** -30]
BF16_TIES = [1 + 2 ** -8 + 2 ** -40, -(1 + 2 ** -8 + 2 ** -40), 3 + 2 ** -7 + 2 ** -40]
INT_TIES = [2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 2 ** 25 + 2 ** 17 + 1]

CASES = {   # name: (source dtype, target dtype, ties)
    "float64 -> float16": ("float64", "float16", F16_TIES),
    "float64 -> bfloat16": ("float64", "bfloat16", BF16_TIES),
    "int32 -> bfloat16": ("int32", "bfloat16", INT_TIES),
    "int64 -> bfloat16": ("int64", "bfloat16", INT_TIES + [2 ** 40 + 2 ** 32 + 1]),
}


def _inputs(src: str, ties, rng) -> np.ndarray:
  n = 1024
  if src.startswith("float"):
    x = rng.uniform(-1e4, 1e4, n)
  else:
    x = rng.integers(-2 ** 30, 2 ** 30, n)
  x = x.astype(src)
  x[:len(ties)] = np.asarray(ties).astype(src)
  return x


def _once(x: np.ndarray, dst: str) -> np.ndarray:
  """One correct rounding (numpy for float16, ml_dtypes for bfloat16; the
  integers here are exact in float64)."""
  target = np.float16 if dst == "float16" else ml_dtypes.bfloat16
  return np.asarray(x).astype(np.float64).astype(target)


def _xla(x, dst, device):
  with jax.default_device(device):
    return np.asarray(jax.jit(lambda v: v.astype(dst))(jax.device_put(x, device)))


def _pallas_prof(x, dst, device):
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].astype(dst)

  call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.dtype(dst)),
                        compiler_params=pallas_prof.CompilerParams())
  with jax.default_device(device):
    return np.asarray(call(jax.device_put(x, device)))


def _differ(a, b) -> int:
  return int((np.asarray(a).view(np.uint16) != np.asarray(b).view(np.uint16)).sum())


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  rng = np.random.default_rng(0)
  cpu, device = jax.devices("cpu")[0], jax.devices()[0]
  report = {"jax": jax.__version__, "device": str(device), "cases": {},
            "compat_rounds_f64_twice": {d: compat.xla_rounds_f64_to_16bit_twice(d)
                                        for d in ("float16", "bfloat16")}}
  print(f"jax {jax.__version__}, device {device}; pallas-prof rounds float64 twice: "
        f"{report['compat_rounds_f64_twice']}")
  print(f"{'conversion':22s} {'path':22s} {'vs once':>8s} {'vs XLA CPU':>10s}  ties")
  for name, (src, dst, ties) in CASES.items():
    x = _inputs(src, ties, rng)
    once = _once(x, dst)
    paths = {"XLA CPU": _xla(x, dst, cpu), f"XLA {device.platform}": _xla(x, dst, device),
             f"pallas-prof {device.platform}": _pallas_prof(x, dst, device)}
    if device.platform != "cpu":
      paths["pallas-prof cpu"] = _pallas_prof(x, dst, cpu)
    twice = np.asarray(x.astype(np.float32)).astype(once.dtype)
    row = {}
    for path, got in paths.items():
      row[path] = {"differ_from_once": _differ(got, once),
                   "differ_from_xla_cpu": _differ(got, paths["XLA CPU"]),
                   "ties": [float(v) for v in got[:len(ties)].astype(np.float64)]}
      print(f"{name:22s} {path:22s} {row[path]['differ_from_once']:8d} "
            f"{row[path]['differ_from_xla_cpu']:10d}  {row[path]['ties']}")
    row["once"] = [float(v) for v in once[:len(ties)].astype(np.float64)]
    row["twice"] = [float(v) for v in twice[:len(ties)].astype(np.float64)]
    print(f"{'':22s} {'(rounded once)':22s} {'':8s} {'':10s}  {row['once']}")
    print(f"{'':22s} {'(through float32)':22s} {'':8s} {'':10s}  {row['twice']}")
    report["cases"][name] = row
  if args.out:
    with open(args.out, "w") as f:
      json.dump(report, f, indent=1)


if __name__ == "__main__":
  main()
