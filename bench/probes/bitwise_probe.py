"""Which elementwise functions does pallas-prof compute bit-for-bit as XLA does, and
what decides it? One GPU run, side by side: XLA, JAX's built-in Triton backend,
pallas-prof as it compiles by default, pallas-prof with Triton's defaults (FMA
contraction on, the libdevice in Triton's wheel), and each of those two alone;
and pallas-prof with libdevice linked Triton's way rather than prepared
(backend/compiling/libdevice_link.py), which must not change a single bit.

    python bench/probes/bitwise_probe.py [--out probe.json]

Counts, per function, the elements (of 2^20 fresh random f32 values) that differ
from XLA's result at all (JAX's ops_test compares these with tolerance 0).
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
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import pallas_prof  # noqa: E402
from pallas_prof.backend import compat, pallas_call_rule
from pallas_prof.backend.compiling import compile as pcompile  # noqa: E402

UNARY = {
    "pow2": lambda x: jnp.power(2, x), "exp": jnp.exp, "exp2": jnp.exp2, "log": lambda x: jnp.log(jnp.abs(x)),
    "log1p": lambda x: jnp.log1p(jnp.abs(x)), "tanh": jnp.tanh, "logistic": jax.nn.sigmoid,
    "rsqrt": lambda x: lax.rsqrt(jnp.abs(x)), "sqrt": lambda x: jnp.sqrt(jnp.abs(x)), "sin": jnp.sin,
    "cos": jnp.cos, "reciprocal": jnp.reciprocal, "square": jnp.square, "erf": jax.scipy.special.erf,
    "pow_xy": lambda x: jnp.power(jnp.abs(x), 0.37 * x), "gelu": jax.nn.gelu,
    "fma_pattern": lambda x: x * 1.37 + x * x,
}
# More libdevice functions, for the prepared libdevice link (libdevice_link.py):
# pallas-prof by default and with Triton's own link must agree with each other.
EXTRA = {
    "expm1": jnp.expm1, "cbrt": jnp.cbrt, "tan": jnp.tan, "asin": lambda x: jnp.arcsin(jnp.tanh(x)),
    "acos": lambda x: jnp.arccos(jnp.tanh(x)), "atan": jnp.arctan, "sinh": jnp.sinh,
    "cosh": jnp.cosh, "asinh": jnp.arcsinh, "acosh": lambda x: jnp.arccosh(1 + jnp.abs(x)),
    "atanh": lambda x: jnp.arctanh(jnp.tanh(x)), "erfc": lax.erfc, "lgamma": lax.lgamma,
    "atan2": lambda x: jnp.arctan2(x, x * 0.7 - 1), "fmod": lambda x: jnp.fmod(x, 0.37 * x + 1),
}

from pallas_prof.backend.compiling import compile_cache  # noqa: E402

_plain_options = compile_cache.compile_options


def libdevices() -> dict:
  """Every libdevice on the machine, and the CUDA directory JAX hands to XLA."""
  import glob
  import hashlib
  from jax._src import lib as jax_lib
  import triton
  found = set(glob.glob("/usr/local/cuda*/nvvm/libdevice/libdevice.10.bc"))
  for base in sys.path:
    found |= set(glob.glob(os.path.join(base, "nvidia", "**", "libdevice.10.bc"), recursive=True))
  found.add(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "lib", "libdevice.10.bc"))
  md5 = {p: hashlib.md5(open(p, "rb").read()).hexdigest() for p in sorted(found) if os.path.exists(p)}
  return {"jax_cuda_path": getattr(jax_lib, "cuda_path", None), "md5": md5}


def _set_options(fp_fusion: bool | None = None, libdevice: str | None = None,
                 prepared: bool = True):
  """None: pallas-prof's defaults; otherwise override FMA contraction and libdevice."""
  from pallas_prof.backend import compat
  os.environ["PALLAS_PROF_PREPARED_LIBDEVICE"] = "1" if prepared else "0"
  os.environ.pop("PALLAS_PROF_LIBDEVICE", None)
  if libdevice:
    os.environ["PALLAS_PROF_LIBDEVICE"] = libdevice
  compat.xla_libdevice_path.cache_clear()
  extra = {} if fp_fusion is None else {"enable_fp_fusion": fp_fusion}
  compile_cache.compile_options = lambda gk: {**_plain_options(gk), **extra}
  pcompile.clear_memory_cache()


def in_kernel(func, x):
  def kernel(x_ref, o_ref):
    o_ref[...] = func(x_ref[...])
  spec = pl.BlockSpec((1024,), lambda i: (i,))
  return pl.pallas_call(kernel, grid=(x.size // 1024,), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--out")
  args = ap.parse_args(argv)
  pallas_prof.install()
  x = jax.random.normal(jax.random.PRNGKey(np.random.randint(2**31)), (1 << 20,), jnp.float32) * 3
  libs = libdevices()
  print("libdevices:", json.dumps(libs, indent=1))
  # pallas-prof's defaults, Triton's defaults, each of the two changes alone, and
  # libdevice linked Triton's way (reflect queries answered in code generation)
  variants = {"builtin": None, "ours": (None, None), "ours_triton_defaults": (True, "triton"),
              "ours_fp_fusion_only": (True, None), "ours_triton_libdevice_only": (False, "triton"),
              "ours_unprepared_libdevice": (None, None, False)}
  short = ("builtin", "ours", "ours_unprepared_libdevice")
  rows = {}
  for name, func in {**UNARY, **EXTRA}.items():
    want = np.asarray(jax.jit(func)(x))
    row, results = {}, {}
    for variant, how in variants.items():
      if name in EXTRA and variant not in short:
        continue
      pallas_call_rule.route_to_builtin(variant == "builtin")
      _set_options(*(how or ()))
      jax.clear_caches()
      try:
        got = results[variant] = np.asarray(jax.jit(lambda v: in_kernel(func, v))(x))
        differ = ~((got == want) | (np.isnan(got) & np.isnan(want)))
        row[variant] = int(differ.sum())
      except Exception as e:  # noqa: BLE001 - reported in the table
        row[variant] = f"{type(e).__name__}: {str(e)[:120]}"
    pallas_call_rule.route_to_builtin(False)
    _set_options()
    if "ours" in results and "ours_unprepared_libdevice" in results:
      a, b = results["ours"], results["ours_unprepared_libdevice"]
      # bit patterns, so that NaNs and signed zeros count too
      row["ours_vs_unprepared_bits"] = int((a.view(np.uint32) != b.view(np.uint32)).sum())
    rows[name] = row
    print(f"{name:12s} elements differing from XLA of {x.size}: {row}", flush=True)
  if args.out:
    with open(args.out, "w") as f:
      json.dump({"device": jax.devices()[0].device_kind, "jax": jax.__version__, "n": int(x.size), "libdevices": libs, "libdevice_used": compat.xla_libdevice_path(),
                 "rows": rows}, f, indent=2)


if __name__ == "__main__":
  main()
