"""The replay's outputs against a reference: the CPU interpreter or a function."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..launchspec import is_floating, np_dtype
from ..schema import Correctness


DEFAULT_TOLERANCES = {"float64": (1e-10, 1e-9), "float32": (1e-5, 1e-4),
                      "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


def compare(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray], what: str,
            tolerance: tuple[float, float] | None = None) -> Correctness:
  """Replay outputs against reference outputs, per dtype tolerances; NaN only
  matches NaN."""
  if len(outputs) != len(references):
    return Correctness(what, False, [], [], [], f"{len(outputs)} outputs but the reference "
                       f"gave {len(references)}")
  abs_errs, rel_errs, tols, problems = [], [], [], []
  for i, (out, ref) in enumerate(zip(outputs, references, strict=True)):
    ref = np.asarray(ref)
    if out.shape != ref.shape:
      problems.append(f"output {i}: shape {out.shape} but reference {ref.shape}")
      abs_errs.append(float("inf"))
      rel_errs.append(float("inf"))
      tols.append([0.0, 0.0])
      continue
    floating = is_floating(out.dtype)
    atol, rtol = tolerance or DEFAULT_TOLERANCES.get(out.dtype.name, (0.0, 0.0))
    if not floating:
      atol, rtol = (0.0, 0.0) if tolerance is None else tolerance
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    nan_o, nan_r = np.isnan(o), np.isnan(r)
    nan_mismatch = int(np.count_nonzero(nan_o != nan_r))
    both = ~(nan_o | nan_r)
    diff = np.abs(o - r)[both]
    scale = np.abs(r)[both]
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(scale, 1e-30)).max()) if diff.size else 0.0
    bad = int(np.count_nonzero(diff > atol + rtol * scale))
    abs_errs.append(max_abs)
    rel_errs.append(max_rel)
    tols.append([atol, rtol])
    if nan_mismatch:
      problems.append(f"output {i}: NaN in {nan_mismatch} places where the other is not NaN")
    if bad:
      problems.append(f"output {i}: {bad} of {o.size} elements beyond |d| <= {atol} + {rtol}*|ref| "
                      f"(max |d| {max_abs:.3g})")
  passed = not problems
  message = f"matches the {what}" if passed else "; ".join(problems)
  return Correctness(what, passed, abs_errs, rel_errs, tols, message)


def check(ck, r, outputs, reference, tolerance, aliases) -> Correctness:
  spec = r.spec
  if reference == "interpreter":
    gk = ck.generated
    if gk is None:
      return Correctness("interpreter", False, [], [], [], "no GeneratedKernel to interpret")
    # lazy: at the top it would load jax whenever this module is imported
    from ...backend.running.launch import run_interpreted
    shapes = [(p.shape, np_dtype(p.dtype)) for p in spec.outputs]
    refs = run_interpreted(gk, r.host_inputs, shapes, tuple(aliases))
    what = "CPU interpreter"
  else:
    refs = reference(*r.host_inputs)
    if not isinstance(refs, (list, tuple)):
      refs = [refs]
    refs = [np.asarray(x) for x in refs]
    what = getattr(reference, "__name__", "reference function")
  return compare(outputs, refs, what, tolerance)
