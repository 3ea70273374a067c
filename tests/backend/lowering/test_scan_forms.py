"""The other lowerings of a scan (backend/lowering/features/scan_forms.py) compute what the
plain one computes: each form, forced onto every scan of a kernel, run under Triton's
interpreter against the plain kernel, across shapes (size-1 axes, non-powers of
two, ranks 1 to 3), axes, both directions, the four kinds and several dtypes.

squeeze and transpose do the same scan on a reshaped or permuted block: equal
bit for bit. triangular reduces instead of scanning: exact for integers and for
max/min; a float sum or product rounds as a tree does, within the bound an
n-term reordering allows (checked here).
"""
from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest
from jax import lax

from pallas_prof.backend import kernel_registry
from pallas_prof.backend.running.launch import run_interpreted
from pallas_prof.backend.lowering.features import scan_forms
from pallas_prof.backend.lowering.features.workaround_plan import WorkaroundPlan
from testkit.helpers import pallas

OPS = {"sum": lax.cumsum, "prod": lax.cumprod, "max": lax.cummax, "min": lax.cummin}
# (shape, axis): which forms fit each is asserted below
CASES = [((16, 1), 0), ((1, 16), 1), ((16, 1), 1), ((1, 1), 0), ((5, 1), 0), ((3, 1, 7), 2),
         ((7, 5), 0), ((9,), 0), ((64, 3), 0), ((4, 5, 6), 1), ((2, 1, 16), 0)]
DTYPES = ("float32", "float16", "int32", "int8", "uint32")
_names = itertools.count()


def fits(form: str, shape, axis) -> bool:
  padded = [1 << (d - 1).bit_length() for d in shape]
  if form == "squeeze":
    return 1 in padded
  if form == "transpose":
    return len(shape) >= 2 and axis != len(shape) - 1
  n = padded[axis]
  return n <= scan_forms.TRIANGULAR_MAX_AXIS and \
      int(np.prod(padded)) * n <= scan_forms.TRIANGULAR_MAX_ELEMENTS


def values(rng, kind, shape, dtype):
  dtype = np.dtype(dtype)
  if dtype.kind == "f":
    if kind == "prod":        # near 1: long products neither overflow nor vanish
      x = rng.uniform(0.8, 1.25, shape) * rng.choice([-1.0, 1.0], shape)
    else:
      x = rng.uniform(-4, 4, shape)
    return x.astype(dtype)
  info = np.iinfo(dtype)
  lo, hi = (max(info.min, -3), min(info.max, 3)) if kind == "prod" else \
      (max(info.min, -100), min(info.max, 100))
  return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)


def lowered(kind, shape, axis, reverse, dtype):
  """The plain GeneratedKernel of `o = cum<kind>(x, axis, reverse)` and its registry record."""
  name = f"scan_form_{next(_names)}"
  op = OPS[kind]

  def kernel(x_ref, o_ref):
    o_ref[...] = op(x_ref[...], axis=axis, reverse=reverse)

  fn = pallas(kernel, jax.ShapeDtypeStruct(shape, dtype), name=name)
  jax.jit(fn).lower(jax.ShapeDtypeStruct(shape, dtype))
  (rec,) = kernel_registry.find(name)
  return rec


def with_form(rec, form):
  scans = [e.index for e in rec.generated.eqns if e.primitive.startswith("cum")]
  assert scans, rec.generated.source
  return rec.relower(workarounds=WorkaroundPlan(scan_forms=tuple((i, form) for i in scans),
                                                because="a test"))


def tree_bound(x: np.ndarray, kind: str, axis: int, reverse: bool) -> np.ndarray:
  """How far a reordered float sum or product of the scanned terms may be from the
  scan's: n - 1 roundings, each at most eps of the partial's magnitude."""
  eps = float(np.finfo(x.dtype).eps)
  n = x.shape[axis]
  mags = np.abs(x.astype(np.float64))
  if reverse:
    mags = np.flip(mags, axis)
  total = np.cumsum(mags, axis) if kind == "sum" else np.cumprod(mags, axis)
  if reverse:
    total = np.flip(total, axis)
  return 2 * (n - 1) * eps * total + 1e-30


@pytest.mark.parametrize("form", scan_forms.FORMS)
@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("kind", list(OPS))
def test_a_form_computes_what_the_plain_scan_computes(rng, form, shape, axis, kind):
  checked = 0
  for dtype, reverse in itertools.product(DTYPES, (False, True)):
    if kind == "prod" and dtype == "float16" and form == "triangular":
      continue                      # (a float16 product's bound: the float32 case stands for it)
    rec = lowered(kind, shape, axis, reverse, dtype)
    variant = with_form(rec, form)
    if not fits(form, shape, axis):
      # the form does not fit: the kernel stays plain, nothing noted
      assert variant.workarounds == () and variant.source == rec.generated.source
      continue
    assert len(variant.workarounds) == 1 and scan_forms.WORDS[form] in variant.workarounds[0]
    assert f"cum{kind}" in variant.workarounds[0]
    assert "Triton workaround:" in variant.source
    x = values(rng, kind, shape, dtype)
    (plain_out,) = run_interpreted(rec.generated, [x], [(shape, np.dtype(dtype))])
    (form_out,) = run_interpreted(variant, [x], [(shape, np.dtype(dtype))])
    reference = np.asarray(OPS[kind](x, axis=axis, reverse=reverse))
    what = f"{form} {kind} {dtype} {shape} axis {axis} reverse={reverse}"
    if np.dtype(dtype).kind == "f" and kind in ("sum", "prod"):   # the plain kernel is right
      np.testing.assert_array_less(
          np.abs(plain_out.astype(np.float64) - reference.astype(np.float64)),
          tree_bound(x, kind, axis, reverse), err_msg=what)
    else:
      np.testing.assert_array_equal(plain_out, reference, err_msg=what)
    if form == "triangular" and kind in ("sum", "prod") and np.dtype(dtype).kind == "f":
      diff = np.abs(form_out.astype(np.float64) - plain_out.astype(np.float64))
      bound = tree_bound(x, kind, axis, reverse)
      assert np.all(diff <= bound), f"{what}: {np.max(diff / bound)} of the bound"
    else:
      np.testing.assert_array_equal(form_out, plain_out, err_msg=what)
    checked += 1
  assert checked or not fits(form, shape, axis)
