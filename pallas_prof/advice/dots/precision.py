"""The precision a float32 dot asks for, changed (kind e), built, timed and shown with the
error it gives.

The variant is the kernel's own jaxpr with the `precision` of the float32 dot_general at
the action's line replaced (compat.map_equations, at any depth: the dot in a fori_loop's
body), evaluated inside the same pallas_call: what the user's code gives once they change
`precision=` on that line, lowered by rules/dot.py to tl.dot's input_precision ("tf32",
"bf16x3"). It is never applied: a precision is the user's choice, so `advise` shows it as
the edit of their line with its measured time and, beside it, its error.

The error: the original's and the variant's outputs against a float64 reference computed
with numpy on the same seeded inputs, as the largest absolute difference and that over the
reference's largest magnitude (an elementwise relative error blows up at outputs near zero).
The reference is the product of the call's two inputs, so it is computed only for a call
that is one (inputs (M, K) and (K, N), one (M, N) output) and whose original output agrees
with it (else it says so). On a CPU nothing of this is measured: Triton's interpreter
multiplies every float32 dot in float32 whatever its input_precision, so a CPU error would
say nothing of the GPU's, and the advice says "accuracy not measured" instead.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ...backend import compat
from ...backend.compiling.compile import DEFAULT_TARGET, compile_kernels
from ...tune.blocks import tune
from ...tune.choice import MIN_GAIN
from ..schema import Action, Trial
from ..split.variant import _find_call, _structs, inputs, original
from ..variants import resources, trace_variant

NOT_ON_CPU = "accuracy not measured: the interpreter multiplies in float32"
# the original's error against the float64 product above which the call is taken not to be
# the product of its inputs (a TF32 product of unit normals errs ~1e-3 of the largest output)
NOT_A_PRODUCT = 5e-2


def precision_param(name: str):
  """dot_general's `precision` for a precision name rules/dot.py lowers to that name."""
  # lazy: keeps jax out of this module's import (start-up time)
  from jax import lax
  if name == "tf32":
    return None                                  # DEFAULT: TF32 on NVIDIA
  if name == "ieee":
    return (lax.Precision.HIGHEST, lax.Precision.HIGHEST)
  if name == "bf16x3":
    return lax.DotAlgorithmPreset.BF16_BF16_F32_X3
  raise ValueError(f"no precision variant named {name!r} (tf32, bf16x3, ieee)")


def _kernel_jaxpr(recipe):
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  fn = recipe.original(recipe.kernel, recipe.out_shape, **recipe.kwargs)
  eqn = _find_call(jax.make_jaxpr(fn)(*_structs(recipe)).jaxpr)
  if eqn is None:
    raise ValueError("no pallas_call in the recorded call's trace")
  return compat.open_jaxpr(eqn.params["jaxpr"])


def _at_line(eqn, file: str | None, line: int | None) -> bool:
  if line is None:
    return True
  frame = compat.frame_in(eqn.source_info, file) if file else compat.user_frame(eqn.source_info)
  return frame is not None and frame.start_line == line


def build(recipe, name: str, file: str | None = None, line: int | None = None):
  """The recorded call with the float32 dots at file:line (every one where line is None)
  multiplying at precision `name`; a ValueError where the kernel has none there."""
  new = precision_param(name)
  jaxpr, consts = _kernel_jaxpr(recipe)
  changed = []

  def swap(eqn):
    if eqn.primitive.name != "dot_general" or not _at_line(eqn, file, line) or any(
        np.dtype(v.aval.dtype) != np.float32 for v in eqn.invars):
      return eqn
    changed.append(eqn)
    return eqn.replace(params=dict(eqn.params, precision=new))
  jaxpr = compat.map_equations(jaxpr, swap)
  if not changed:
    where = f"{file.rsplit('/', 1)[-1] if file else '?'}:{line}" if line else "the kernel"
    raise ValueError(f"no float32 dot at {where} in the kernel's jaxpr")

  def kernel(*refs):
    compat.eval_jaxpr(jaxpr, consts, *refs)
  return recipe.original(kernel, recipe.out_shape, **recipe.kwargs)


# --- accuracy ----------------------------------------------------------------------------------

def reference(recipe, args) -> tuple[np.ndarray | None, str]:
  """(float64 product of the two inputs, "") or (None, why there is none)."""
  outs = recipe.outs
  shapes = [tuple(s) for s, _ in recipe.arg_shapes]
  if len(shapes) != 2 or len(outs) != 1 or len(shapes[0]) != 2 or len(shapes[1]) != 2 or \
      shapes[0][1] != shapes[1][0] or tuple(outs[0].shape) != (shapes[0][0], shapes[1][1]):
    return None, ("accuracy not measured: the call is not the product of two matrices, "
                  "the float64 reference it is checked against")
  a, b = (np.asarray(x, np.float64) for x in args)
  return a @ b, ""


def errors(got, want: np.ndarray) -> tuple[float, float]:
  """(largest absolute error, that over the reference's largest magnitude)."""
  diff = np.abs(np.asarray(got, np.float64) - want)
  top = float(np.max(np.abs(want))) or 1.0
  worst = float(np.max(diff)) if diff.size else 0.0
  return worst, worst / top


def accuracy_text(before: tuple[float, float], after: tuple[float, float]) -> str:
  return (f"error against float64: original {before[0]:.2g} (relative {before[1]:.2g}), "
          f"variant {after[0]:.2g} (relative {after[1]:.2g})")


def measured_accuracy(recipe, original_out, variant_out, args, gpu: bool) -> str:
  """The accuracy line of a precision action: the GPU's errors, or why there are none."""
  if not gpu:
    return NOT_ON_CPU
  want, why = reference(recipe, args)
  if want is None:
    return why
  before, after = errors(original_out, want), errors(variant_out, want)
  if before[1] > NOT_A_PRODUCT:
    return (f"accuracy not measured: the original differs from the product of its inputs by "
            f"{before[1]:.2g} of its largest output, so the call is not that product")
  return accuracy_text(before, after)


# --- tried -------------------------------------------------------------------------------------

def _failed(a: Action, why: str) -> Action:
  return dataclasses.replace(a, trial=Trial(None, None, None, None, None, why))


def tried(a: Action, recipe, *, gpu: bool, budget_s: float, say=lambda text: None) -> Action:
  """The action with its variant lowered (compiled for sm_90 on a CPU) and, on a GPU, timed
  against the original in whole calls, with both errors."""
  name = a.change["precision"]
  try:
    fn = build(recipe, name, a.user_file, a.change.get("line"))
    gk = trace_variant(fn, recipe, None if gpu else "cpu")
  except Exception as e:  # noqa: BLE001 - a variant that does not build or lower is said so
    return _failed(a, f"does not lower: {type(e).__name__}: {str(e)[:200]}")
  wanted = f'input_precision="{name}"'
  if wanted not in gk.source:
    return _failed(a, f"lowered without {wanted}")
  if not gpu:
    (ck,) = compile_kernels([gk], tuple(DEFAULT_TARGET), need_cubin=True)
    if isinstance(ck, Exception):
      return _failed(a, f"does not compile: {str(ck)[:200]}")
    return dataclasses.replace(a, compiled=resources(ck), accuracy=NOT_ON_CPU, status=(
        f"not measured: no GPU; its dot lowered with {wanted} and compiled for sm_90"))
  say(f"{recipe.name}: trying {a.title} (whole calls)")
  return _measured(a, recipe, fn, budget_s)


def _measured(a: Action, recipe, fn, budget_s: float) -> Action:
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  args = tuple(inputs(recipe))
  calls = (jax.jit(original(recipe)), jax.jit(fn))
  try:
    outs = [np.asarray(jax.block_until_ready(c(*args))) for c in calls]
    # each timed alone: the tuner compares outputs to the first config's, and these differ
    # by the precision's rounding by design (shown as errors instead)
    times = []
    for i, c in enumerate(calls):
      t = tune(lambda *xs, v: c(*xs), [{"v": i}], args, {}, budget_s=max(budget_s / 2, 1.0),
               name=f"{recipe.name} precision {a.change['precision']}")
      times.append(t.candidates[0].seconds)
  except Exception as e:  # noqa: BLE001 - said, not raised
    return _failed(a, f"failed to run: {type(e).__name__}: {str(e)[:200]}")
  before, after = times
  accuracy = measured_accuracy(recipe, outs[0], outs[1], args, gpu=True)
  if before is None or after is None:
    return dataclasses.replace(a, accuracy=accuracy, trial=Trial(before, after, None, None, None,
                                                                 "not timed"))
  return dataclasses.replace(a, status="measured", accuracy=accuracy, trial=Trial(
      before, after, 100 * (before - after) / before, 100 * MIN_GAIN, None))
