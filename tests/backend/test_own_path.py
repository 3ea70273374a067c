"""pallas-prof's own path needs nothing of JAX's Triton backend (deprecated since jax 0.11):
it never imports `jax._src.pallas.triton` or `jax.experimental.pallas.triton`, and it
never reaches JAX's `jax-pallas-triton` deprecation (jax._src.deprecations.warn with
that id: jax 0.11 calls it where its pallas_call lowering picks its Triton backend, jax
0.12 at the start of that backend's pallas_call lowering; jax 0.10 has no such id).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import deprecations
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import triton as plgpu
from pallas_prof.backend import builtin_triton
from testkit.helpers import JAX_TRITON_GONE, jax_plgpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPRECATION = "jax-pallas-triton"
S = jax.ShapeDtypeStruct

# Every kind of pallas-prof's work on the CPU: each plgpu name in kernels run under Triton's
# interpreter (explicit CompilerParams, and install() taking plain calls), the bounds-checked
# mode, an sm_90 compile, a CUDA lowering (as far as a CPU jaxlib goes), the rule listing
# and an unknown primitive's error.
OWN_PATH = textwrap.dedent("""
    import sys, numpy as np, jax, jax.numpy as jnp
    from jax import export
    from jax.experimental import pallas as pl
    import pallas_prof
    from pallas_prof import triton as plgpu
    from pallas_prof.backend.compiling import compile as backend_compile
    from pallas_prof.backend import kernel_registry
    from pallas_prof.backend.lowering.rules import rule_limits

    def kernel(x_ref, i_ref, o_ref, c_ref, s_ref):
      lanes = jnp.arange(20)
      v = plgpu.load(x_ref.at[:], mask=lanes < 17, other=0.0, eviction_policy="evict_last")
      plgpu.store(o_ref.at[0], v, mask=lanes % 2 == 0)
      for k, op in enumerate(["add", "max", "min"]):
        getattr(plgpu, "atomic_" + op)(o_ref, (k + 1, slice(None)), plgpu.max_contiguous(v, [20]))
      for k, op in enumerate(["and", "or", "xor", "xchg"]):
        getattr(plgpu, "atomic_" + op)(c_ref, (k, slice(None)), i_ref[...], mask=lanes < 19)
      plgpu.debug_barrier()
      plgpu.atomic_cas(s_ref, s_ref[...], 7)

    x = np.linspace(-3, 3, 20, dtype=np.float32)
    i = np.arange(20, dtype=np.int32)
    shapes = (jax.ShapeDtypeStruct((4, 20), jnp.float32), jax.ShapeDtypeStruct((4, 20), jnp.int32),
              jax.ShapeDtypeStruct((), jnp.int32))
    call = pl.pallas_call(kernel, out_shape=shapes, compiler_params=plgpu.CompilerParams())
    out = call(x, i)
    assert np.asarray(out[0])[1].tolist() == np.where(np.arange(20) < 17, x, 0).tolist()
    assert np.asarray(out[1])[0].tolist() == [0] * 20 and int(out[2]) == 7
    gk = kernel_registry.find("kernel")[-1].generated
    assert ".target sm_90" in backend_compile.compile_kernel(gk, ("cuda", 90)).ptx
    try:       # before the bounds-checked mode: its host callbacks do not serialise
      export.export(jax.jit(call), platforms=["cuda"], disabled_checks=[
          export.DisabledSafetyCheck.custom_call(plgpu.CUSTOM_CALL_TARGET_NAME)])(x, i)
    except AttributeError as e:          # a CPU jaxlib has no Triton launcher
      assert "TritonKernel" in str(e), e
    pallas_prof.install(check_bounds=True)
    plain = pl.pallas_call(lambda x_ref, o_ref: plgpu.store(o_ref, x_ref[...] * 2),
                           out_shape=jax.ShapeDtypeStruct((20,), jnp.float32))
    assert np.asarray(plain(x)).tolist() == (x * 2).tolist()
    assert "atomic_rmw" in rule_limits()
    try:         # an unknown primitive: the error lists supported ones
      pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., jax.lax.top_k(x_ref[...], 20)[0]),
                     out_shape=jax.ShapeDtypeStruct((20,), jnp.float32))(x)
      raise AssertionError("top_k lowered")
    except pallas_prof.LoweringError as e:
      assert "top_k" in str(e), e
    gone = [m for m in sys.modules if m.startswith(("jax._src.pallas.triton",
                                                    "jax.experimental.pallas.triton"))]
    print("imported:", gone)
""")


def test_its_own_path_imports_nothing_of_jax_triton_backend(tmp_path):
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT,
                                                                  os.environ.get("PYTHONPATH")])),
             PALLAS_PROF_CACHE_DIR=str(tmp_path))
  done = subprocess.run([sys.executable, "-c", OWN_PATH], capture_output=True, text=True,
                        env=env, cwd=tmp_path, timeout=600)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
  assert done.stdout.strip().splitlines()[-1] == "imported: []", done.stdout


@pytest.fixture
def deprecations_seen(monkeypatch):
  """The ids JAX's deprecation trigger is called with (the call, not the warning: the
  suite's filters ignore DeprecationWarnings, and JAX may turn one into an error)."""
  seen = []
  original = deprecations.warn

  def spy(deprecation_id, *args, **kwargs):
    seen.append(deprecation_id)
    return original(deprecation_id, *args, **kwargs)

  monkeypatch.setattr(deprecations, "warn", spy)
  return seen


def _counter_kernel(x_ref, o_ref):
  plgpu.atomic_add(o_ref, (slice(None),), plgpu.load(x_ref, mask=jnp.arange(24) < 21, other=0.0))


def _plain_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1


def _lower_for_cuda(call, *args):
  """Lowers `call` for CUDA on any machine; a CPU jaxlib fails at the launch it cannot
  build, after the whole choice of backend."""
  from jax import export
  allowed = [export.DisabledSafetyCheck.custom_call(plgpu.CUSTOM_CALL_TARGET_NAME)]
  try:
    export.export(jax.jit(call), platforms=["cuda"], disabled_checks=allowed)(*args)
  except AttributeError as e:
    if "TritonKernel" not in str(e):
      raise


def test_its_own_path_reaches_no_deprecation_trigger(deprecations_seen):
  x = np.arange(24, dtype=np.float32)
  call = pl.pallas_call(_counter_kernel, out_shape=S((24,), jnp.float32),
                        compiler_params=plgpu.CompilerParams())
  np.testing.assert_array_equal(call(x), np.where(np.arange(24) < 21, x, 0))
  _lower_for_cuda(call, x)
  pallas_prof.install()
  try:
    plain = pl.pallas_call(_counter_kernel, out_shape=S((24,), jnp.float32))
    np.testing.assert_array_equal(plain(x), np.where(np.arange(24) < 21, x, 0))
    _lower_for_cuda(plain, x)
  finally:
    pallas_prof.uninstall()
  assert DEPRECATION not in deprecations_seen, deprecations_seen


def _has_the_deprecation() -> bool:
  return DEPRECATION in getattr(deprecations, "_registered_deprecations", {})


@pytest.mark.skipif(not _has_the_deprecation(), reason="this JAX has no jax-pallas-triton "
                    "deprecation (jax < 0.11)")
@pytest.mark.skipif(jax_plgpu() is None, reason=JAX_TRITON_GONE)
def test_the_trigger_is_seen_where_jax_has_it(deprecations_seen):
  """The check above can fail: JAX's own route (a plain call, pallas-prof not installed,
  lowered for CUDA) reaches the trigger, on a CPU machine too. Another module of this
  process may have installed pallas-prof; the suite's conftest puts that back afterwards."""
  pallas_prof.uninstall()
  plain = pl.pallas_call(_plain_kernel, out_shape=S((24,), jnp.float32))
  try:
    _lower_for_cuda(plain, np.zeros(24, np.float32))
  except Exception:  # noqa: BLE001 - JAX's built-in wants a GPU after its warning
    pass
  assert DEPRECATION in deprecations_seen, deprecations_seen


@pytest.mark.gpu
def test_on_a_gpu_its_own_path_warns_nothing(deprecations_seen, recwarn):
  import warnings
  warnings.simplefilter("always")
  x = np.arange(24, dtype=np.float32)
  call = pl.pallas_call(_counter_kernel, out_shape=S((24,), jnp.float32),
                        compiler_params=plgpu.CompilerParams())
  np.testing.assert_array_equal(call(x), np.where(np.arange(24) < 21, x, 0))
  pallas_prof.install()
  try:
    plain = pl.pallas_call(_counter_kernel, out_shape=S((24,), jnp.float32))
    np.testing.assert_array_equal(plain(x), np.where(np.arange(24) < 21, x, 0))
  finally:
    pallas_prof.uninstall()
  assert DEPRECATION not in deprecations_seen, deprecations_seen
  assert not [w for w in recwarn if "Triton backend is deprecated" in str(w.message)]
  if _has_the_deprecation() and builtin_triton.lowering() is not None:
    x32 = np.arange(32, dtype=np.float32)     # JAX's own backend takes powers of two only
    plain = pl.pallas_call(_plain_kernel, out_shape=S((32,), jnp.float32))
    np.testing.assert_array_equal(plain(x32), x32 + 1)     # JAX's own backend: the control
    assert DEPRECATION in deprecations_seen, deprecations_seen
