"""Dot rules (issue 49): a dot far from its matrix rate, and a float32 dot whose precision
keeps it off the tensor cores.

dot_rate: the kernel's dots run under FAR_FROM_RATE of the rate their input precision has
on this GPU (the measured ceiling, profiler/timing/ceilings.py, else the data sheet's:
hardware.matrix_peak). Its action is an intent of kind c, {"joint": True}, that
dots/joint.py makes concrete from the recorded pallas_call: block shapes each tried WITH
its own num_warps and num_stages. Trying one knob at a time from a bad start misses the
good corner: a larger tile needs more warps to hold its accumulator and other stages to
fit shared memory. Without a GPU nothing measured the rate: the rule fires where the work
model says the dots bound the kernel (its FLOPs per byte above the GPU's ridge), and says
the rate is not measured.

dot_precision: a float32 dot at HIGHEST ("ieee") multiplies without tensor cores (Triton
lowers it to FMAs): actions of kind e that change the user's `precision=` to DEFAULT (TF32)
and to BF16_BF16_F32_X3 (three bf16 passes, about float32's accuracy), each built, timed
and shown with the error it gives (dots/precision.py). Never applied silently: the user
edits their line. A TF32 dot far from its rate gets, in its evidence, what HIGHEST would
cost instead.
"""
from __future__ import annotations

from ..hardware import bandwidth, matrix_peak
from .table import Action, Finding, about, fact, rule

# a kernel whose dots run under this share of their rate is far from it: the measured
# ceiling is cuBLAS's own, which a tuned Triton kernel comes close to
FAR_FROM_RATE = 0.6
# precisions the lowering gives a float32 dot (rules/dot.py: tl.dot's input_precision) and
# what the user writes for each at their dot
PRECISION_EDITS = {
    "tf32": ("DEFAULT (TF32)", "precision=jax.lax.Precision.DEFAULT (or no precision=)"),
    "bf16x3": ("BF16_BF16_F32_X3 (3 bf16 passes)",
               "precision=jax.lax.DotAlgorithmPreset.BF16_BF16_F32_X3"),
}
# the passes each precision costs per product, against one TF32 or bf16 pass
PASSES = {"bf16x3": 3, "tf32x3": 3, "bf16x6": 6}


def _dots(f) -> list:
  return [e for e in f.equations.values() if e.dot is not None]


def dot_class(dot) -> str:
  # lazy: the static cost model loads the profiler package, which the rule table keeps out of its import
  from ...profiler.static.cost import dot_class as of
  return of(dot)


def _rate_of(f, cls: str) -> tuple[float | None, str]:
  """(FLOP/s the dots can reach, where that figure comes from)."""
  measured = (f.ceilings.matrix_flops_per_s or {}).get(cls) if f.ceilings is not None else None
  if measured:
    return measured, f"the measured {cls} matrix rate"
  peak = matrix_peak(f.cc, cls)
  return peak, f"the data sheet's {cls} rate for sm_{f.cc}" if peak else ""


def _tflops(x: float) -> str:
  return f"{x / 1e12:.0f} TFLOP/s" if x >= 1e13 else f"{x / 1e12:.1f} TFLOP/s"


@rule("dot_rate")
def dot_rate(f) -> list[Finding]:
  dots = _dots(f)
  w = f.work
  if not dots or w is None or not w.dot_flops:
    return []
  cls = w.dot_dtype or dot_class(dots[0].dot)
  peak, basis = _rate_of(f, cls)
  if not peak:
    return []
  hot = max(dots, key=lambda e: (e.weight, e.dot.flops))
  evidence = [fact("dot", f"{hot.dot.m}x{hot.dot.k} @ {hot.dot.k}x{hot.dot.n} "
                   f"{hot.dot.operand_dtype} per program ({cls}), {w.dot_flops:,} FLOPs a launch",
                   value=w.dot_flops)]
  if f.median_s:
    rate = w.dot_flops / f.median_s
    if rate >= FAR_FROM_RATE * peak:
      return []
    evidence.append(fact("rate", f"{_tflops(rate)} = {100 * rate / peak:.0f} % of {basis} "
                         f"({_tflops(peak)})", True, rate))
    text = (f"the dots run at {100 * rate / peak:.0f} % of {basis}: the block shape, warps and "
            "stages leave the tensor cores idle")
  else:
    bw = bandwidth(f.cc)
    ridge = peak / bw if bw else None
    intensity = w.dot_flops / w.bytes if w.bytes else None
    if ridge is None or intensity is None or intensity < ridge:
      return []
    evidence.append(fact("work model", f"{intensity:,.0f} FLOPs per byte of its operands, above "
                         f"the ridge of sm_{f.cc} ({ridge:,.0f}: {basis}, {_tflops(peak)}, over "
                         f"{bw / 1e12:.1f} TB/s): the dots bound it", value=intensity))
    text = (f"a dot-bound kernel, its rate not measured (no GPU): {basis} is {_tflops(peak)}; "
            "`pallas-prof advise` on a GPU tries block shapes with their own warps and stages")
  if hot.dot.precision == "tf32":
    evidence.append(fact("precision", _highest_cost(f)))
  d = about("dot_rate", text, f, hot, evidence)
  none = (None, "no estimate: measured where tried (a block shape with its own warps and "
          "stages)")
  act = Action("c", "block shapes with their own warps and stages (the dot's tile)", "dot_rate",
               {"joint": True}, user_file=f.kernel_file, user_line=f.kernel_line,
               estimate_pct=none[0], estimate_basis=none[1])
  return [Finding(d, [act])]


def _highest_cost(f) -> str:
  tf32, f32, bf16 = (matrix_peak(f.cc, c) for c in ("tf32", "f32", "bf16"))
  if not (tf32 and f32 and bf16):
    return ("it multiplies in TF32 (10 mantissa bits: errors about 1e-3 of the products); "
            "precision=HIGHEST multiplies in float32 without tensor cores")
  return (f"it multiplies in TF32 (10 mantissa bits: errors about 1e-3 of the products); "
          f"precision=HIGHEST would multiply in float32 without tensor cores, at most "
          f"{_tflops(f32)} on sm_{f.cc} ({100 * f32 / tf32:.0f} % of TF32's {_tflops(tf32)}); "
          f"BF16_BF16_F32_X3 is about as accurate as float32 at three bf16 passes "
          f"(at most {_tflops(bf16 / 3)})")


@rule("dot_precision")
def dot_precision(f) -> list[Finding]:
  """A float32 dot at HIGHEST: the precision edits, each tried and shown with its error."""
  ieee = [e for e in _dots(f) if e.dot.precision == "ieee" and e.dot.operand_dtype == "float32"]
  if not ieee:
    return []
  out = []
  seen = set()
  for e in sorted(ieee, key=lambda e: -e.dot.flops):
    if (e.user_file, e.user_line) in seen:
      continue
    seen.add((e.user_file, e.user_line))
    f32, tf32 = matrix_peak(f.cc, "f32"), matrix_peak(f.cc, "tf32")
    rates = (f": at most {_tflops(f32)} on sm_{f.cc}, TF32 {_tflops(tf32)}"
             if f32 and tf32 else "")
    d = about("dot_precision", f"the dot at {e.location} asks for float32 products "
              f"(precision=HIGHEST): Triton multiplies them without tensor cores{rates}", f, e, [
                  fact("dot", f"{e.dot.m}x{e.dot.k} @ {e.dot.k}x{e.dot.n} float32, "
                       f"input_precision=\"ieee\"")])
    where = e.location
    actions = [Action("e", f"precision HIGHEST -> {words} at {where}", "dot_precision",
                      {"precision": name, "line": e.user_line},
                      edit=f"at {where}: {text} on this dot; the error it gives is shown beside "
                           "its time: keep it only if your results allow it",
                      user_file=e.user_file, user_line=e.user_line,
                      estimate_basis="no estimate: measured where tried (whole calls)")
               for name, (words, text) in PRECISION_EDITS.items()]
    out.append(Finding(d, actions))
  return out
