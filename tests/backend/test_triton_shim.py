"""pallas_prof.triton, the names of jax.experimental.pallas.triton (plgpu) without JAX's
Triton backend: the same names; kernels written against either give the same Triton
code and the same results (Triton's interpreter on the CPU, compiled for sm_90); under
interpret=True (JAX's own interpreter) pallas-prof's primitives do what JAX's do.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import triton as ours
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend import pallas_call_rule
from tests.backend.lowering.rules.test_memory import generated_kernel
from testkit.helpers import JAX_TRITON_GONE, assert_close, jax_plgpu, random_array

S = jax.ShapeDtypeStruct
F32 = jnp.float32
JAX_MODULE = jax_plgpu()
needs_jax_module = pytest.mark.skipif(JAX_MODULE is None, reason=JAX_TRITON_GONE)

# what jax.experimental.pallas.triton exports: jax 0.10.2; 0.11.0 and 0.12.0.1 add the rest
NAMES_0_10 = {"dot", "CompilerParams", "approx_tanh", "atomic_add", "atomic_and", "atomic_cas",
              "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
              "debug_barrier", "elementwise_inline_asm", "load", "max_contiguous", "store"}
NAMES_0_11 = NAMES_0_10 | {"CUSTOM_CALL_TARGET_NAME", "GpuVersion", "get_gpu_info",
                           "get_gpu_info_from_version", "is_gpu_device", "GpuInfo"}


def test_every_name_of_jax_module_is_here():
  missing = sorted(n for n in NAMES_0_11 if getattr(ours, n, None) is None)
  assert not missing, missing
  assert NAMES_0_11 <= set(ours.__all__)
  if JAX_MODULE is not None:     # and whatever the installed JAX's has
    theirs = {n for n in dir(JAX_MODULE) if not n.startswith("_")}
    assert theirs <= set(dir(ours)), theirs - set(dir(ours))


def test_its_compiler_params_select_pallas_prof_without_install():
  assert ours.CompilerParams is pallas_prof.CompilerParams
  # other tests of this worker may have left pallas-prof installed (the order varies)
  pallas_prof.uninstall()
  assert not pallas_prof.installed()
  x = np.arange(10, dtype=np.float32)

  def plus_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  call = pl.pallas_call(plus_one, out_shape=S((10,), F32), name="shim_params",
                        compiler_params=ours.CompilerParams(num_warps=2, num_stages=1))
  np.testing.assert_array_equal(call(x), x + 1)
  from pallas_prof.backend import kernel_registry
  assert kernel_registry.find("shim_params")[-1].generated.num_warps == 2


# --- kernels written against a module `m` (JAX's or ours) ------------------------------
# each: (the pl.pallas_call, its arguments, the expected outputs, what of the outputs is
# defined: a function of them)

def _loads_and_stores(m, rng):
  x = random_array(rng, (3, 24), "float32")
  lanes = np.arange(24)

  def kernel(x_ref, o_ref):
    lanes = jnp.arange(24)
    v = m.load(x_ref.at[1], mask=lanes < 19, other=-1.0, eviction_policy="evict_last")
    w = m.load(x_ref.at[2], cache_modifier=".cg")
    u = m.load(x_ref.at[0], volatile=True)
    m.store(o_ref.at[0], v + w, mask=lanes % 3 != 1, eviction_policy="evict_first")
    m.store(o_ref.at[1], m.max_contiguous(u * 2, [24]))

  call = pl.pallas_call(kernel, out_shape=S((2, 24), F32),
                        compiler_params=pallas_prof.CompilerParams())
  # the lanes the masked store skips hold whatever the output held
  stored = np.stack([lanes % 3 != 1, np.ones(24, bool)])
  expected = np.stack([np.where(lanes < 19, x[1], -1.0) + x[2], x[0] * 2])
  return call, (x,), expected, lambda out: np.where(stored, out, 0)


_ATOMIC = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
           "or": np.bitwise_or, "xor": np.bitwise_xor}


def _atomics(m, rng, dtype):
  """Three programs update the 20 elements of an (aliased) start through every atomic
  of `dtype`, masked."""
  ops = [op for op in _ATOMIC if dtype == "int32" or op in ("add", "max", "min")]
  if dtype == "float32":      # multiples of 1/64: float sums are exact in any order
    vals = np.round(random_array(rng, (3, len(ops), 20), dtype) * 64) / 64
    init = np.round(random_array(rng, (len(ops), 20), dtype) * 64) / 64
  else:
    vals = random_array(rng, (3, len(ops), 20), dtype, low=0, high=2**20)
    init = random_array(rng, (len(ops), 20), dtype, low=0, high=2**20)
  mask = np.arange(20) % 4 != 2

  def kernel(v_ref, init_ref, o_ref):
    i = pl.program_id(0)
    for k, op in enumerate(ops):
      getattr(m, f"atomic_{op}")(o_ref, (k, pl.ds(0, 20)), v_ref[i, k],
                                 mask=jnp.arange(20) % 4 != 2)

  call = pl.pallas_call(kernel, out_shape=S((len(ops), 20), dtype), grid=(3,),
                        input_output_aliases={1: 0}, compiler_params=pallas_prof.CompilerParams())
  expected = init.copy()
  for k, op in enumerate(ops):
    total = _ATOMIC[op].reduce(np.concatenate([init[k][None], vals[:, k]]), axis=0)
    expected[k] = np.where(mask, total, init[k])
  return call, (vals.astype(dtype), init.astype(dtype)), expected.astype(dtype), None


def _xchg_and_cas(m, rng):
  x = random_array(rng, (20,), "float32")
  y = random_array(rng, (20,), "float32")
  start = random_array(rng, (), "int32")

  def kernel(x_ref, y_ref, s_ref, o_ref, old_ref, c_ref, cas_ref):
    old_ref[...] = m.atomic_xchg(o_ref, (slice(None),), y_ref[...], mask=jnp.arange(20) < 13)
    begin = s_ref[...]      # read first: s_ref and c_ref are one (aliased) buffer
    hit = m.atomic_cas(c_ref, begin, begin + 5)       # equal: swaps
    miss = m.atomic_cas(c_ref, begin, begin + 9)      # no longer equal
    cas_ref[0] = hit
    cas_ref[1] = miss

  call = pl.pallas_call(kernel, out_shape=(S((20,), F32), S((20,), F32), S((), jnp.int32),
                                           S((2,), jnp.int32)),
                        input_output_aliases={0: 0, 2: 2},
                        compiler_params=pallas_prof.CompilerParams())
  lanes = np.arange(20) < 13
  expected = (np.where(lanes, y, x), np.where(lanes, x, 0), start + 5,
              np.array([start, start + 5], np.int32))
  # the masked-off lanes of the old values are undefined
  return call, (x, y, start), expected, lambda out: (out[0], np.where(lanes, out[1], 0), *out[2:])


def _barrier(m, rng):
  x = random_array(rng, (32,), "float32")

  def kernel(x_ref, o_ref, p_ref):
    o_ref[...] = x_ref[...] * 3
    m.debug_barrier()
    p_ref[...] = o_ref[...][::-1] + 1   # what other threads wrote

  call = pl.pallas_call(kernel, out_shape=(S((32,), F32), S((32,), F32)),
                        compiler_params=pallas_prof.CompilerParams())
  return call, (x,), (x * 3, x[::-1] * 3 + 1), None


KERNELS = {"loads_and_stores": _loads_and_stores,
           "atomics_float32": lambda m, rng: _atomics(m, rng, "float32"),
           "atomics_int32": lambda m, rng: _atomics(m, rng, "int32"),
           "xchg_and_cas": _xchg_and_cas, "barrier": _barrier}


def _run(name, m, rng):
  call, args, expected, defined = KERNELS[name](m, rng)
  out = call(*args)
  out = tuple(np.asarray(o) for o in out) if isinstance(out, (tuple, list)) else np.asarray(out)
  if defined:
    out, expected = defined(out), defined(expected)
  return out, expected, call, args


def _check(out, expected):
  if isinstance(expected, tuple):
    assert len(out) == len(expected)
    for o, e in zip(out, expected):
      assert_close(o, e)
  else:
    assert_close(out, expected)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_kernel_written_against_it_runs_right(name, rng):
  out, expected, _, _ = _run(name, ours, rng)
  _check(out, expected)


def _code(call, args) -> str:
  """The generated Triton source of the pallas_call, without comments (they name the
  primitives, whose names differ before jax 0.12) and without its name's hash."""
  gk = generated_kernel(call, *[S(np.shape(a), np.asarray(a).dtype) for a in args])
  text = "\n".join(line.split("#")[0].rstrip() for line in gk.source.splitlines())
  return re.sub(r"_[0-9a-f]{16}\b", "_HASH", text)


@needs_jax_module
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_it_gives_the_code_and_results_of_jax_module(name, rng):
  seed = int(rng.integers(2**31))
  mine, expected, call, args = _run(name, ours, np.random.default_rng(seed))
  theirs, _, their_call, their_args = _run(name, JAX_MODULE, np.random.default_rng(seed))
  assert _code(call, args) == _code(their_call, their_args)
  _check(mine, theirs)
  _check(mine, expected)


def test_each_primitive_compiles_for_sm90(rng):
  """The atomics (every kind), compare-and-swap, barrier, loads with their options and
  inline assembly, compiled for sm_90 on the CPU: the PTX has each instruction."""
  names = ("loads_and_stores", "atomics_int32", "atomics_float32", "xchg_and_cas", "barrier")
  ptx = ""
  for name in names:
    call, args, _, _ = KERNELS[name](ours, rng)
    gk = generated_kernel(call, *[S(np.shape(a), np.asarray(a).dtype) for a in args])
    ptx += backend_compile.compile_kernel(gk, ("cuda", 90)).ptx
  for op in ("add.f32", "max.s32", "min.s32", "and.b32", "or.b32", "xor.b32", "exch.b32",
             "cas.b32"):
    assert re.search(rf"\batom\.[\w.]*{re.escape(op)}", ptx), op
  assert "bar.sync" in ptx and "ld.global.cg" in ptx and "ld.volatile.global" in ptx


# --- interpret=True: JAX's own interpreter, through the primitives' discharge rules -------

def _interpretable(m, rng, dtype):
  """What JAX's discharge of the atomics computes: add, max and min without a mask, on a
  window and on gathered (distinct) indices, and compare-and-swap; three programs, the
  outputs aliased to known starting values."""
  vals = random_array(rng, (3, 3, 20), dtype)
  starts = random_array(rng, (3, 24), dtype)
  idx = rng.permutation(24)[:20].astype(np.int32)
  counter = random_array(rng, (), "int32")

  def kernel(v_ref, i_ref, a0, m0, n0, g0, c0, a_ref, m_ref, n_ref, g_ref, c_ref, seen_ref):
    p = pl.program_id(0)
    m.atomic_add(a_ref, (pl.ds(2, 20),), v_ref[p, 0])
    m.atomic_max(m_ref, (pl.ds(1, 20),), v_ref[p, 1])
    m.atomic_min(n_ref, (slice(0, 20),), v_ref[p, 2])
    m.atomic_add(g_ref, (i_ref[...],), m.max_contiguous(v_ref[p, 0], [20]))
    seen_ref[p] = m.atomic_cas(c_ref, c_ref[...], c_ref[...] + 1)

  call = pl.pallas_call(kernel, grid=(3,), interpret=True,
                        input_output_aliases={2: 0, 3: 1, 4: 2, 5: 3, 6: 4},
                        out_shape=(S((24,), dtype),) * 4 + (S((), jnp.int32), S((3,), jnp.int32)))
  add, mx, mn, gather = (starts[0].copy(), starts[1].copy(), starts[2].copy(), starts[0].copy())
  for p in range(3):
    add[2:22] += vals[p, 0]
    mx[1:21] = np.maximum(mx[1:21], vals[p, 1])
    mn[0:20] = np.minimum(mn[0:20], vals[p, 2])
    gather[idx] += vals[p, 0]
  expected = (add, mx, mn, gather, counter + 3, counter + np.arange(3, dtype=np.int32))
  args = (vals, idx, starts[0], starts[1], starts[2], starts[0], counter)
  return call, args, expected


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_under_jax_interpreter_it_computes_what_jax_module_does(dtype, rng):
  seed = int(rng.integers(2**31))
  call, args, expected = _interpretable(ours, np.random.default_rng(seed), dtype)
  out = tuple(np.asarray(o) for o in call(*args))
  _check(out, tuple(e.astype(o.dtype) for e, o in zip(expected, out)))
  if JAX_MODULE is not None:
    their_call, their_args, _ = _interpretable(JAX_MODULE, np.random.default_rng(seed), dtype)
    _check(out, tuple(np.asarray(o) for o in their_call(*their_args)))


def test_inline_assembly_under_triton_interpreter_is_a_clear_error():
  """Triton's interpreter runs no inline assembly: a LoweringError at the user's line
  naming the equation, as for JAX's module (what pallas-prof did before this module).
  On a GPU the assembly runs, and its result is checked instead."""
  x = np.linspace(-2, 2, 40, dtype=np.float32)

  def kernel(x_ref, o_ref):
    o_ref[...] = ours.approx_tanh(x_ref[...])

  call = pl.pallas_call(kernel, out_shape=S((40,), F32), compiler_params=ours.CompilerParams())
  if jax.default_backend() == "gpu":
    # compiled, the inline assembly runs: tanh.approx.f32 is good to about 2^-11
    np.testing.assert_allclose(np.asarray(call(x)), np.tanh(x), atol=2e-3)
    return
  with pytest.raises(Exception) as info:
    np.asarray(call(x))
  message = str(info.value)
  assert "inline_asm not supported in interpreter mode" in message, message
  assert "elementwise_inline_asm" in message and "test_triton_shim.py:" in message, message


@pytest.mark.parametrize("dtype, asm", [("float32", "tanh.approx.f32"),
                                        ("float16", "tanh.approx.f16"),
                                        ("bfloat16", "tanh.approx.bf16")])
def test_approx_tanh_and_inline_assembly_compile_for_sm90(dtype, asm):
  def kernel(x_ref, o_ref, p_ref):
    o_ref[...] = ours.approx_tanh(x_ref[...])
    [p_ref[...]] = ours.elementwise_inline_asm(
        "mov.b32 $0, $1;", args=[x_ref[...].astype(jnp.float32)], constraints="=r,r", pack=1,
        result_shape_dtypes=[S((24,), F32)])

  call = pl.pallas_call(kernel, out_shape=(S((24,), dtype), S((24,), F32)),
                        compiler_params=ours.CompilerParams())
  gk = generated_kernel(call, S((24,), dtype))
  ptx = backend_compile.compile_kernel(gk, ("cuda", 90)).ptx
  assert asm in ptx and "mov.b32" in ptx


def test_approx_tanh_refuses_what_cuda_has_no_instruction_for():
  with pytest.raises(TypeError, match="float64"):
    ours.approx_tanh(np.zeros(4, np.float64))
  with pytest.raises(TypeError, match="int32"):
    ours.approx_tanh(np.zeros(4, np.int32))


@needs_jax_module
def test_a_kernel_may_mix_jax_module_and_this_one(rng):
  x = random_array(rng, (2, 20), "int32")

  def kernel(x_ref, o_ref):
    JAX_MODULE.atomic_add(o_ref, (0, slice(None)), x_ref[0])
    ours.atomic_max(o_ref, (1, slice(None)), x_ref[1])
    ours.debug_barrier()
    JAX_MODULE.debug_barrier()

  call = pl.pallas_call(kernel, out_shape=S((2, 20), jnp.int32),
                        compiler_params=ours.CompilerParams())
  out = np.asarray(call(x))
  np.testing.assert_array_equal(out, np.stack([x[0], np.maximum(x[1], 0)]))


@needs_jax_module
def test_jax_builtin_backend_lowers_this_module_too():
  """route_to_builtin (benchmarks against JAX's built-in Triton backend) lowers this
  module's primitives as JAX's: exported for CUDA on the CPU, the kernel reaches JAX's
  Triton custom call with its atomic."""
  from jax import export

  def kernel(x_ref, o_ref):
    ours.atomic_add(o_ref, (slice(None),), x_ref[...])
    ours.debug_barrier()

  x = S((128,), F32)
  call = pl.pallas_call(kernel, out_shape=x, compiler_params=ours.CompilerParams())
  pallas_call_rule.route_to_builtin(True)
  try:
    exported = export.export(jax.jit(call), platforms=["cuda"], disabled_checks=[
        export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(x)
  except Exception as e:  # noqa: BLE001
    if "No supported GPU devices found" in str(e):      # jax 0.12's built-in asks for one
      pytest.skip("this JAX's built-in backend lowers only with a GPU present")
    raise
  finally:
    pallas_call_rule.route_to_builtin(False)
  text = exported.mlir_module()
  assert "__gpu$xla.gpu.triton" in text and "atomic_rmw" in text


# --- GPU information (jax 0.11+'s names) -------------------------------------------------

def test_gpu_information_by_version():
  h200 = ours.get_gpu_info_from_version(ours.GpuVersion.H200)
  assert (h200.compute_capability, h200.arch_name, h200.gpu_version) == (90, "9.0", ours.GpuVersion.H200)
  assert ours.get_gpu_info_from_version(ours.GpuVersion.A10).compute_capability == 86
  assert ours._VERSION_RE.search("NVIDIA A100-SXM4-80GB").group(1) == "NVIDIA A100"
  theirs = getattr(JAX_MODULE, "get_gpu_info_from_version", None)
  if theirs is not None:      # jax 0.11+: the same table
    for version in ours.GpuVersion:
      if hasattr(JAX_MODULE.GpuVersion, version.name):
        want = theirs(getattr(JAX_MODULE.GpuVersion, version.name))
        got = ours.get_gpu_info_from_version(version)
        assert (got.compute_capability, got.arch_name) == (want.compute_capability,
                                                           want.arch_name), version


@pytest.mark.no_gpu
def test_gpu_information_without_a_gpu():
  assert not ours.is_gpu_device()
  with pytest.raises(ValueError, match="Unsupported GPU device kind"):
    ours.get_gpu_info()


@pytest.mark.gpu
def test_gpu_information_of_this_gpu():
  assert ours.is_gpu_device()
  info = ours.get_gpu_info()
  device = jax.devices()[0]
  assert info.compute_capability == int(str(device.compute_capability).replace(".", ""))
