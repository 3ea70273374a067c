"""Pins the GPU fuzzer's int16 wrong answer (seed 1250, issue 32) in one short GPU run.

Hypothesis (read on the CPU from the sm_90 SASS): ptxas 12.8/12.9 (not 13.4) narrow a packed
`add.s16x2 d, a, CONST` whose result has one half read to `VIADD.16x2 d, a, 0x0`,
dropping the constant. int16 `x // 7` tests `x % 7 != 0` as `x * 28087 + 4681 > 9362`
(unsigned 16-bit) with the 4681s packed in pairs; in a [5, 9, 9] block each thread
holds 16 rows of which 9 are stored, so row 8's pair has a dead half and loses its
+4681. pallas-prof's fix writes each packed integer add as two 16-bit adds
(backend/compiling/ptx_rewrites.py; PALLAS_PROF_PTX_REWRITES=0 turns it off).

    python3 bench/probes/int16_probe.py [--device gpu] [--skip-raw]

Part 1 (a subprocess: raw PTX through libcuda with ctypes, no JAX): the pattern alone,
assembled by Triton's ptxas and by the driver's JIT: the packed add with one half live
(lo, hi), the same with both halves live, with the constant loaded from memory, split
into two adds (the fix), and a packed max (which ptxas narrows right).
Part 2 (pallas-prof through jaxlib, rewrites off then on): the reproducer on its 4
recorded inputs, `x // 7` of int16 [5, 9, 9] and other shapes, each against the
reference and against what the hypothesis predicts. One line per variant; exits 0.
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
REPRO = os.path.join(ROOT, "bench/corpus/fuzz_gpu_h200_12c95b8_seed20261203_repro/unshrunk/"
                     "repro_values_1250_0a2a75a5.py")
T0 = time.time()
BUDGET_S = 110      # seconds; later variants are skipped past it


def say(line: str) -> None:
  print(f"[{time.time() - T0:5.1f}s] {line}", flush=True)


# --- part 1: the PTX pattern alone -------------------------------------------------------

CONST = 0x00070003          # +3 on the low half, +7 on the high half
INPUT = (100, 200)          # low, high


def raw_ptx(form: str, half: str) -> str:
  """A one-thread kernel: two int16 loaded and packed, a packed op with CONST, the
  `half` ("lo", "hi" or "both") stored to out[0] (and out[1])."""
  op = {"packed": f"\tmov.b32 %r3, {CONST};\n\tadd.s16x2 %r2, %r1, %r3;\n",
        "loaded": "\tld.global.b32 %r3, [%rd1+4];\n\tadd.s16x2 %r2, %r1, %r3;\n",
        "max": f"\tmov.b32 %r3, {CONST};\n\tmax.s16x2 %r2, %r1, %r3;\n"}.get(form)
  if form == "split":
    from pallas_prof.backend.compiling import ptx_rewrites
    op, n = ptx_rewrites.split_packed_adds(f"\tmov.b32 %r3, {CONST};\n\tadd.s16x2 %r2, %r1, %r3;\n")
    assert n == 1
  store = {"lo": "\tst.global.b16 [%rd2], %rs3;\n", "hi": "\tst.global.b16 [%rd2], %rs4;\n",
           "both": "\tst.global.b16 [%rd2], %rs3;\n\tst.global.b16 [%rd2+2], %rs4;\n"}[half]
  return (".version 8.7\n.target sm_90a\n.address_size 64\n"
          ".visible .entry k(.param .u64 pa, .param .u64 po)\n{\n"
          "\t.reg .b16 %rs<8>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n"
          "\tld.param.u64 %rd1, [pa];\n\tld.param.u64 %rd2, [po];\n"
          "\tld.global.b16 %rs1, [%rd1];\n\tld.global.b16 %rs2, [%rd1+2];\n"
          "\tmov.b32 %r1, {%rs1, %rs2};\n" + op + "\tmov.b32 {%rs3, %rs4}, %r2;\n" + store +
          "\tret;\n}\n")


def expected(form: str, half: str) -> list[int]:
  lo, hi = INPUT
  if form == "max":
    lo, hi = max(lo, CONST & 0xFFFF), max(hi, CONST >> 16)
  else:
    lo, hi = lo + (CONST & 0xFFFF), hi + (CONST >> 16)
  return {"lo": [lo], "hi": [hi], "both": [lo, hi]}[half]


def ptxas_cubin(ptx: str) -> tuple[bytes, str]:
  """(cubin from Triton's ptxas, its SASS line for the packed op)."""
  from pallas_prof.backend.compiling import lineinfo, triton_compat
  with tempfile.TemporaryDirectory() as d:
    src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
    open(src, "w").write(ptx)
    subprocess.run([triton_compat.ptxas_path(90), "-arch=sm_90a", "-O3", src, "-o", out],
                   check=True, capture_output=True, timeout=60)
    cubin = open(out, "rb").read()
  sass = lineinfo.disassemble(cubin, "-c")
  ops = re.findall(r"(VIADD[^;]*|IADD3[^;]*|VIMNMX[^;]*|IMAD\.IADD[^;]*);", sass)
  return cubin, " | ".join(o.strip() for o in ops)


class Cuda:
  """The few driver calls a one-thread launch needs (libcuda through ctypes)."""

  def __init__(self):
    self.lib = ctypes.CDLL("libcuda.so.1")
    self.check(self.lib.cuInit(0), "cuInit")
    dev, self.ctx = ctypes.c_int(), ctypes.c_void_p()
    self.check(self.lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev), "retain")
    self.check(self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
    v = ctypes.c_int()
    self.lib.cuDriverGetVersion(ctypes.byref(v))
    self.driver = v.value

  def check(self, rc: int, what: str) -> None:
    if rc != 0:
      msg = ctypes.c_char_p()
      self.lib.cuGetErrorString(rc, ctypes.byref(msg))
      raise RuntimeError(f"{what}: CUDA error {rc} ({(msg.value or b'?').decode()})")

  def run(self, image: bytes, inputs: list[int], n_out: int) -> list[int]:
    import numpy as np
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    self.check(self.lib.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(image)), "load")
    try:
      self.check(self.lib.cuModuleGetFunction(ctypes.byref(fn), mod, b"k"), "function")
      a = np.zeros(4, np.int16)             # two int16, then the int32 the "loaded" form reads
      a[:2] = inputs
      a[2:] = np.array([CONST], np.uint32).view(np.int16)
      out = np.full(2, -1, np.int16)
      da, do = ctypes.c_uint64(), ctypes.c_uint64()
      self.check(self.lib.cuMemAlloc_v2(ctypes.byref(da), ctypes.c_size_t(8)), "alloc")
      self.check(self.lib.cuMemAlloc_v2(ctypes.byref(do), ctypes.c_size_t(4)), "alloc")
      try:
        self.check(self.lib.cuMemcpyHtoD_v2(da, a.ctypes.data_as(ctypes.c_void_p),
                                            ctypes.c_size_t(8)), "HtoD")
        self.check(self.lib.cuMemcpyHtoD_v2(do, out.ctypes.data_as(ctypes.c_void_p),
                                            ctypes.c_size_t(4)), "HtoD")
        params = (ctypes.c_void_p * 2)(ctypes.addressof(da), ctypes.addressof(do))
        self.check(self.lib.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None), "launch")
        self.check(self.lib.cuCtxSynchronize(), "sync")
        self.check(self.lib.cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), do,
                                            ctypes.c_size_t(4)), "DtoH")
      finally:
        self.lib.cuMemFree_v2(da)
        self.lib.cuMemFree_v2(do)
    finally:
      self.lib.cuModuleUnload(mod)
    return [int(v) for v in out[:n_out]]


def part_raw() -> None:
  from pallas_prof.backend.compiling import triton_compat
  try:
    release = subprocess.run([triton_compat.ptxas_path(90), "--version"], capture_output=True,
                             text=True, timeout=30).stdout.strip().splitlines()[-1]
  except Exception as e:  # noqa: BLE001 - a probe reports and goes on
    release = f"? ({e})"
  say(f"raw: Triton's ptxas: {release}")
  try:
    cuda = Cuda()
    say(f"raw: CUDA driver {cuda.driver}")
  except Exception as e:  # noqa: BLE001
    cuda = None
    say(f"raw: no CUDA driver here ({type(e).__name__}: {e}); SASS only")
  for form, half in [("packed", "lo"), ("packed", "hi"), ("packed", "both"), ("loaded", "lo"),
                     ("split", "lo"), ("split", "hi"), ("max", "lo"), ("max", "hi")]:
    ptx, want = raw_ptx(form, half), expected(form, half)
    for assembler in ("ptxas", "driver-jit"):
      name = f"raw {form:6} {half:4} {assembler:10}"
      try:
        if assembler == "ptxas":
          image, sass = ptxas_cubin(ptx)
        else:
          image, sass = ptx.encode() + b"\0", "(the driver's)"
        if cuda is None:
          say(f"{name} not run   | {sass}")
          continue
        got = cuda.run(image, list(INPUT), len(want))
        verdict = "right" if got == want else ("WRONG: constant dropped" if got == list(
            INPUT[:len(want)] if half != "hi" else INPUT[1:]) else "WRONG")
        say(f"{name} {verdict:24} got {got} want {want} | {sass}")
      except Exception as e:  # noqa: BLE001
        say(f"{name} ERROR {type(e).__name__}: {str(e)[:160]}")


# --- part 2: through pallas-prof and jaxlib ------------------------------------------------

def predicted_floordiv7(x, row_axis: int):
  """x // 7 as the SASS computes it if row 8 of `row_axis` loses the +4681."""
  import numpy as np
  x = x.astype(np.int64)
  trunc = np.trunc(x / 7).astype(np.int64)
  plus = np.full(x.shape, 4681)
  index = [slice(None)] * x.ndim
  index[row_axis] = 8
  plus[tuple(index)] = 0
  inexact = ((x * 28087 + plus) & 0xFFFF) > 9362
  return (trunc - ((x <= 0) & inexact)).astype(np.int16)


def set_rewrites(flag: str) -> None:
  import jax
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.backend import kernel_registry
  os.environ["PALLAS_PROF_PTX_REWRITES"] = flag
  pcompile.clear_memory_cache()
  kernel_registry.clear()
  jax.clear_caches()


def kernel_signs() -> str:
  """The last kernel's PTX packed adds and SASS lost constants (compiled for sm_90)."""
  try:
    from pallas_prof.backend.compiling import compile as pcompile
    from pallas_prof.backend.compiling import lineinfo
    from pallas_prof.backend import kernel_registry
    from testkit.fuzz.sass_hazards import lost_packed_constants
    ck = pcompile.compile_kernel(kernel_registry.kernels()[-1].generated, ("cuda", 90))
    return (f"ptx add.s16x2 {len(re.findall(r'add.[su]16x2', ck.ptx))}, sass lost constants "
            f"{len(lost_packed_constants(lineinfo.disassemble(ck.cubin, '-c')))}")
  except Exception as e:  # noqa: BLE001
    return f"(no SASS: {type(e).__name__})"


def part_pallas(device_kind: str) -> None:
  """Each variant with the rewrites off, then on; the most telling first."""
  import jax
  import numpy as np
  from bench.probes.fuzz_repro_gpu import load_program
  from testkit.fuzz import check as fc
  from testkit.helpers import run_on_values
  device = jax.devices(device_kind)[0]
  say(f"pallas: jax {jax.__version__} on {device}")
  program = load_program(REPRO)

  def repro(k: int) -> str:
    p = program if k == 0 else dataclasses.replace(program, seed=program.seed * 1000 + k)
    inputs = fc.make_inputs(p)
    got, want = fc.run_pallas_prof(p, inputs, device), fc.run_reference(p, inputs)
    wrong = [int(np.sum(np.asarray(g) != np.asarray(w))) for g, w in zip(got, want)]
    x0 = np.asarray(inputs[0])
    model = np.broadcast_to(predicted_floordiv7(x0.min(0, keepdims=True), 1), x0.shape)
    return (f"wrong per output {wrong} (hypothesis without the fix: "
            f"{int(np.sum(model != np.asarray(want[2])))} in output 2, equal to it bit for bit: "
            f"{bool(np.array_equal(model, got[2]))})")

  def floordiv(shape) -> str:
    x = np.random.default_rng(7).integers(-100, 100, shape, endpoint=True).astype(np.int16)
    got = np.asarray(run_on_values(lambda v: v // 7, jax.device_put(x, device)))
    line = f"wrong {int(np.sum(got != x // 7))}"
    if len(shape) >= 2 and shape[-2] == 9:
      model = predicted_floordiv7(x, len(shape) - 2)
      line += (f" (row 8 losing +4681 would give {int(np.sum(model != x // 7))}, equal to it "
               f"bit for bit: {bool(np.array_equal(model, got))})")
    return line

  variants = [(f"repro seed {program.seed}", lambda: repro(0)),
              ("x // 7 int16[5, 9, 9]", lambda: floordiv((5, 9, 9)))]
  variants += [(f"repro seed {program.seed * 1000 + k}", lambda k=k: repro(k)) for k in (1, 2, 3)]
  variants += [(f"x // 7 int16{list(s)}", lambda s=s: floordiv(s))
               for s in [(3, 9, 13), (2, 5, 9, 9), (7, 17), (33,)]]
  for name, run in variants:
    for flag in ("0", "1"):
      label = f"{name} PALLAS_PROF_PTX_REWRITES={flag}"
      if time.time() - T0 > BUDGET_S:
        say(f"{label}: skipped (time)")
        continue
      try:
        set_rewrites(flag)
        say(f"{label}: {run()} | {kernel_signs()}")
      except Exception as e:  # noqa: BLE001
        say(f"{label}: ERROR {type(e).__name__}: {str(e)[:200]}")


def main(argv=None) -> int:
  ap = argparse.ArgumentParser()
  ap.add_argument("--device", default="gpu")
  ap.add_argument("--skip-raw", action="store_true")
  ap.add_argument("--raw-only", action="store_true", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.raw_only:
    part_raw()
    return 0
  if not args.skip_raw:       # its own process: a driver fault there cannot end part 2
    try:
      subprocess.run([sys.executable, os.path.abspath(__file__), "--raw-only"], timeout=60,
                     cwd=ROOT)
    except Exception as e:  # noqa: BLE001
      say(f"raw part ERROR {type(e).__name__}: {e}")
  try:
    part_pallas(args.device)
  except Exception as e:  # noqa: BLE001
    say(f"pallas part ERROR {type(e).__name__}: {str(e)[:300]}")
  say("done")
  return 0


if __name__ == "__main__":
  sys.exit(main())
