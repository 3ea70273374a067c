"""A kernel's key (the sha256 of its generated source: its label, its compile cache
entry, its entry in a tuning file) does not depend on the path its script was started
by: a tuning file made in one checkout applies in another, and `python examples/x.py`
and `cd examples; python x.py` name the same kernel."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.lowering.lower import portable_location

pallas_prof.install()

SCRIPT = '''
def scale_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 + 1.0

def call(x):
  return pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
'''


def _lowered_from(filename: str):
  scope = {"pl": pl, "jax": jax}
  exec(compile(SCRIPT, filename, "exec"), scope)
  kernel_registry.clear()
  jax.jit(scope["call"]).lower(jax.ShapeDtypeStruct((8, 16), jnp.float32))
  (rec,) = kernel_registry.kernels()
  return rec


def test_the_key_is_the_same_wherever_the_script_lives():
  recs = [_lowered_from(path) for path in
          ("/home/ada/project/kernels/scale.py", "kernels/scale.py", "scale.py",
           "/tmp/checkout-2/kernels/scale.py")]
  assert len({r.generated.key for r in recs}) == 1, [r.generated.source.splitlines()[0]
                                                     for r in recs]
  assert len({r.label for r in recs}) == 1
  first = recs[0].generated
  assert first.source.splitlines()[0].endswith("scale_kernel at scale.py:2")
  # the rest of pallas-prof still knows where it came from
  assert first.source_info.endswith("/home/ada/project/kernels/scale.py:2")


TMA_SCRIPT = '''
def double_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2

def call(x):
  spec = pl.BlockSpec((8, 32), lambda i, j: (i, j))
  return pl.pallas_call(double_kernel, grid=(2, 3), in_specs=[spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        compiler_params=pallas_prof.CompilerParams(tma=True))(x)
'''


def test_a_tma_fallback_note_does_not_move_the_key():
  """The header's "TMA not used for x_ref at <file>:<line>" named the file's path."""
  keys, notes = set(), []
  for path in ("/home/ada/project/k.py", "/tmp/elsewhere/k.py"):
    scope = {"pl": pl, "jax": jax, "pallas_prof": pallas_prof}
    exec(compile(TMA_SCRIPT, path, "exec"), scope)
    kernel_registry.clear()
    import warnings
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      jax.jit(scope["call"]).lower(jax.ShapeDtypeStruct((16, 66), jnp.float32))
    (rec,) = kernel_registry.kernels()
    keys.add(rec.generated.key)
    notes.extend(rec.generated.tma_notes)
  assert notes and "TMA not used for x_ref at k.py:" in rec.generated.source
  assert notes[0].file == "/home/ada/project/k.py"      # the warning still names the path
  assert len(keys) == 1


def test_another_file_or_line_is_another_kernel():
  a = _lowered_from("/x/scale.py").generated.key
  b = _lowered_from("/x/other.py").generated.key
  assert a != b


def test_the_portable_location():
  assert portable_location("k at /a/b/c.py:12") == "k at c.py:12"
  assert portable_location("k at c.py:12") == "k at c.py:12"
  assert portable_location("k at <stdin>") == "k at <stdin>"
  assert portable_location("k") == "k"


def test_the_kernel_still_runs(rng=np.random.default_rng(0)):
  x = rng.standard_normal((8, 16)).astype(np.float32)
  scope = {"pl": pl, "jax": jax}
  exec(compile(SCRIPT, "/somewhere/scale.py", "exec"), scope)
  np.testing.assert_allclose(np.asarray(scope["call"](x)), x * 2 + 1, rtol=1e-6)
