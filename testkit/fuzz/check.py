"""Runs a fuzz Program through pallas-prof and through a reference that shares
no code with it, and says how they differ.

Reference: kind "values": the same function jitted by XLA on the CPU; kind
"kernel": the same pallas_call under JAX's Pallas interpreter
(`interpret=True`) on the CPU. pallas-prof runs on `device` (the CPU: Triton's
interpreter; a GPU: the compiled kernel).

Outcomes: "ok"; "unsupported" (pallas-prof refused with a LoweringError that
names a limitation it documents: counted, not a bug); "xla_platforms_differ"
and "xla_jit_and_eager_differ" (a "values" program where pallas-prof differs
from the jitted XLA-on-CPU reference but equals XLA on the GPU it ran on, or
XLA run op by op: XLA disagrees with itself); "xla_less_precise_than_float64" (either
kind: pallas-prof equals the program with its float32 calls rounded from float64, where
XLA's CPU tanh or exp is ulps off); "gpu_scan_order" (on a GPU: it equals the program
with its scans in the order the kernel's compiled code sums them); "interpreter_scan_order"
(on the CPU: it equals the program with its scans summed as Triton's interpreter sums
them, one element after another, where XLA's CPU sums windows and their totals);
"xla_skips_16bit_rounding" (either kind, a 16-bit float program: pallas-prof equals the
op-by-op reference, testkit/fuzz/op_by_op.py, each equation rounded to its dtype, where XLA's
jit keeps float32 between equations; where it differs from that reference too, a
fragile program's tolerated flips are a Difference); "xla_as_far_from_float64" (a float32
"values" program whose answer float32 does not fix to its tolerance: XLA's own float32
misses the float64 answer there, and pallas-prof misses it by no more); a `Difference` (wrong
numbers, wrong dtype or shape, or pallas-prof failing where the reference
ran: a bug). A Difference is saved as a standalone reproducer script.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

from testkit.fuzz import op_by_op
from testkit.fuzz.programs import InputSpec, Program, namespace

# LoweringError reasons that are documented limitations, not bugs (each
# program kind avoids them where it can; what is left is counted)
UNSUPPORTED = re.compile(r"has no lowering rule|not supported|is not supported|Unsupported|"
                         r"out of resource|"
                         r"cannot lower .*: (?!internal error)(?!the kernel failed)")
# ...but these are always bugs, whatever the wording around them (Triton rejecting the
# generated code is pallas-prof's bug, even where Triton's words say "not supported" or
# the error names an equation, "cannot lower `add` ...: Triton failed in the ttir stage";
# running out of shared memory or registers is the program's blocks, a limitation)
BUGS = re.compile(r"internal error in the|failed under Triton's interpreter|"
                  r"Triton failed in the \w+ stage: (?!.*out of resource)|"
                  r"Traceback|Segmentation|Aborted|LLVM ERROR|compile worker died")


TMA_ENV = "PALLAS_PROF_FUZZ_TMA"     # "1": pallas-prof's kernels ask for TMA (bench/fuzz/fuzz.py --tma)
# N: pallas-prof's kernels ask for N persistent programs (bench/fuzz/fuzz.py --persistent N)
PERSISTENT_ENV = "PALLAS_PROF_FUZZ_PERSISTENT"
# S: pallas-prof's kernels pipeline their loops without a dot (bench/fuzz/fuzz.py --loop-stages S)
LOOP_STAGES_ENV = "PALLAS_PROF_FUZZ_LOOP_STAGES"


class Difference(AssertionError):
  """pallas-prof and the reference disagree on a program."""


@dataclasses.dataclass
class Outcome:
  # "ok" | "unsupported" | "tolerated" | "xla_platforms_differ" | "xla_jit_and_eager_differ"
  # | "xla_skips_16bit_rounding"
  # | "xla_low_precision_accumulates" | "xla_less_precise_than_float64" | "gpu_scan_order"
  # | "interpreter_scan_order" | "xla_as_far_from_float64"
  status: str
  detail: str = ""


def make_inputs(program: Program) -> list[np.ndarray]:
  rng = np.random.default_rng(program.seed)
  out = []
  for spec in program.inputs:
    out.append(_random(rng, spec))
  return out


def _random(rng, spec: InputSpec) -> np.ndarray:
  dtype = jnp.dtype(spec.dtype)
  if dtype == jnp.bool_:
    return rng.random(spec.shape) < 0.5
  if jnp.issubdtype(dtype, jnp.floating):
    x = rng.uniform(spec.low, spec.high, size=spec.shape).astype(np.float32)
    # some exact small values and zeros: ties, signs and floor/round edges
    pick = rng.random(spec.shape)
    x = np.where(pick < 0.1, np.round(x), x)
    x = np.where(pick > 0.97, 0.0, x).astype(np.float32)
    if spec.special:
      specials = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
      chosen = specials[rng.integers(0, 4, size=spec.shape)]
      x = np.where(rng.random(spec.shape) < 0.15, chosen, x).astype(np.float32)
    return np.asarray(jnp.asarray(x, dtype=dtype))
  return rng.integers(int(spec.low), int(spec.high), size=spec.shape,
                      endpoint=True).astype(dtype)


def build(program: Program) -> dict:
  """Executes the program's source; returns its namespace (fn, or kernel and call)."""
  scope = dict(namespace())
  exec(compile(program.source, f"<fuzz program {program.seed}>", "exec"), scope)
  return scope


def run_pallas_prof(program: Program, inputs, device=None):
  import pallas_prof
  from jax.experimental import pallas as pl
  scope = build(program)
  device = device or jax.devices("cpu")[0]
  args = [jax.device_put(a, device) for a in inputs]
  # bench/fuzz/fuzz.py --tma: TMA loads and stores wherever pallas-prof finds them legal
  # --persistent N: N programs loop over each grid of more points than that
  # --loop-stages S: each innermost loop that loads and has no dot is tl.range(num_stages=S)
  params = pallas_prof.CompilerParams(tma=os.environ.get(TMA_ENV) == "1" or None,
                                      num_warps=program.num_warps,
                                      persistent=int(os.environ.get(PERSISTENT_ENV) or 0) or None,
                                      loop_stages=int(os.environ.get(LOOP_STAGES_ENV) or 0) or None)
  with jax.default_device(device):
    if program.kind == "values":
      fn = scope["fn"]
      outs = jax.eval_shape(fn, *[jax.ShapeDtypeStruct(a.shape, a.dtype) for a in inputs])

      def kernel(*refs):
        ins, outs_refs = refs[:len(inputs)], refs[len(inputs):]
        for ref, value in zip(outs_refs, fn(*[r[...] for r in ins])):
          ref[...] = value

      call = pl.pallas_call(kernel, out_shape=list(outs), compiler_params=params,
                            name=f"fuzz_{program.seed}")
      result = call(*args)
    else:
      result = pl.pallas_call(scope["kernel"], compiler_params=params,
                              name=f"fuzz_{program.seed}", **scope["call"])(*args)
  return [np.asarray(r) for r in jax.tree.leaves(result)]


def run_reference(program: Program, inputs):
  from jax.experimental import pallas as pl
  scope = build(program)
  cpu = jax.devices("cpu")[0]
  args = [jax.device_put(a, cpu) for a in inputs]
  with jax.default_device(cpu):
    if program.kind == "values":
      result = jax.jit(scope["fn"])(*args)
    elif "expected" in scope:
      result = scope["expected"](*inputs)
    else:
      result = pl.pallas_call(scope["kernel"], interpret=True, **scope["call"])(*args)
  return [np.asarray(r) for r in jax.tree.leaves(result)]


# A fragile program (Builder.fragile) may differ from XLA's CPU in this share of an
# output's elements (at least FLIPS): a rounding difference flips a discontinuous op.
FRAGILE_SHARE = 1 / 20
# ... and from a reference that reproduces the GPU's rounding (the scans' order, float64
# rounded back: _xla_agreeing_elsewhere's), in this many elements: what is left is the
# last ulp of an exp or a sin that no CPU reproduces, and a miscompile of more hides nowhere
FLIPS = 2


def compare(program: Program, got, want, flips: int | None = None) -> tuple[str | None, str]:
  """(what differs or None, a note on tolerated differences); `flips`: the elements a
  fragile program may differ in (None: FRAGILE_SHARE of each output, at least FLIPS)."""
  if len(got) != len(want):
    return f"{len(got)} outputs, the reference has {len(want)}", ""
  notes = []
  for k, (g, w) in enumerate(zip(got, want)):
    if g.shape != w.shape or g.dtype != w.dtype:
      return (f"output {k}: {g.dtype}{list(g.shape)}, the reference gives "
              f"{w.dtype}{list(w.shape)}"), ""
    bad = _mismatches(program, g, w)
    if not bad.any():
      continue
    count, total = int(bad.sum()), bad.size
    where = np.argwhere(bad)[:5]
    sample = "; ".join(f"[{', '.join(map(str, i))}]: {g[tuple(i)]!r} vs {w[tuple(i)]!r}"
                       for i in where)
    text = f"output {k} ({w.dtype}{list(w.shape)}): {count} of {total} elements differ: {sample}"
    allowed = max(FLIPS, int(total * FRAGILE_SHARE)) if flips is None else flips
    if program.fragile and count <= allowed:
      notes.append(f"tolerated (a rounding difference flips a discontinuous op): {text}")
      continue
    return text, ""
  return None, "; ".join(notes)


def _mismatches(program: Program, got, want) -> np.ndarray:
  if not jnp.issubdtype(want.dtype, jnp.floating):
    return got != want
  g, w = got.astype(np.float64), want.astype(np.float64)
  both_nan = np.isnan(g) & np.isnan(w)
  finite = np.isfinite(w)
  magnitude = max(1.0, float(np.max(np.abs(w[finite]))) if finite.any() else 1.0)
  tol = program.tolerance or 1e-6
  atol = tol * magnitude
  with np.errstate(invalid="ignore"):
    close = np.abs(g - w) <= atol + tol * np.abs(w)
  close |= both_nan | ((g == w) & ~np.isnan(w))
  return ~close


def check(program: Program, device=None, on_stage=None) -> Outcome:
  """Raises Difference when pallas-prof and the reference disagree.
  `on_stage("reference" | "pallas-prof")` is called as each starts (a runner
  whose child dies then knows which of the two killed it)."""
  inputs = make_inputs(program)
  if on_stage:
    on_stage("reference")
  try:
    want = run_reference(program, inputs)
  except Exception as e:  # noqa: BLE001 - the generator made something JAX rejects
    raise AssertionError(f"the reference failed, the generator is wrong: "
                         f"{type(e).__name__}: {e}\n{program.source}") from e
  if on_stage:
    on_stage("pallas-prof")
  try:
    got = run_pallas_prof(program, inputs, device)
  except Exception as e:  # noqa: BLE001 - sorted into limitations and bugs below
    text = f"{type(e).__name__}: {e}"
    if _is_limitation(e, text):
      return Outcome("unsupported", _first_line(e))
    raise Difference(f"pallas-prof failed where the reference ran: {text}") from e
  diff, note = compare(program, got, want)
  op_by_op_agrees = None
  if (diff is not None or note) and op_by_op.has_16bit_floats(program, inputs, got):
    judged, op_by_op_agrees = _judged_op_by_op(program, inputs, got, diff or note)
    if judged is not None:
      return judged
  if diff is not None:
    # where XLA disagrees with itself and pallas-prof agrees with one of its
    # answers: counted apart, with what differed, not a bug
    other = _xla_agreeing_elsewhere(program, inputs, got, device, op_by_op_agrees)
    if other is None and as_far_from_float64(program, inputs, got, want):
      other = "xla_as_far_from_float64"
    if other is not None:
      return Outcome(other, diff)
    raise Difference(diff)
  return Outcome("tolerated" if note else "ok", note)


def _judged_op_by_op(program: Program, inputs, got, what: str) -> tuple[Outcome | None, bool | None]:
  """A 16-bit float program that differs from XLA's jitted reference (`what`: the
  difference, or the tolerated flips of a fragile one), judged by the op-by-op reference
  (testkit/fuzz/op_by_op.py: every equation rounded to its dtype, as JAX's semantics say):
  pallas-prof equal to it is "xla_skips_16bit_rounding", the jit's fused float32 being
  the difference; pallas-prof beyond a fragile program's flips from it too is a
  Difference. Returns (the outcome or None: judge on, whether it agreed or None: no
  op-by-op answer)."""
  reference = op_by_op.reference_or_none(program, inputs)
  if reference is None:
    return None, None
  if compare(program, got, reference, FLIPS)[0] is None:
    return Outcome("xla_skips_16bit_rounding", what), True
  beyond, _ = compare(program, got, reference)
  if beyond is not None and what.startswith("tolerated"):
    raise Difference(f"{beyond} (against the op-by-op reference, every 16-bit rounding kept; "
                     f"against XLA's jit: {what})")
  return None, False


# the features (testkit/fuzz/programs.py, scans.py) of a program that sums or multiplies along
# an axis: a cumsum or cumprod, a reduction, a dot
ACCUMULATING = frozenset({"cumsum", "cumprod", "cumlogsumexp", "reduce", "dot"})
# the features of a program with a cumsum or cumprod whose order testkit/fuzz/scan_order.py knows
SCANNING = frozenset({"cumsum", "cumprod"})


def _xla_agreeing_elsewhere(program: Program, inputs, got, device,
                            op_by_op_agrees: bool | None = None) -> str | None:
  """For a "values" program that differs from the jitted XLA-on-CPU reference:
  "xla_jit_and_eager_differ" when pallas-prof equals XLA run op by op on the
  CPU (jit folds constants its own way: atan2(0, 0) of an iota folds to NaN,
  its kernel gives 0, as IEEE says), "xla_platforms_differ" when it equals
  XLA on the GPU it ran on (int -> bfloat16: XLA's CPU rounds through float32,
  its GPU once), "xla_low_precision_accumulates" when it sums (ACCUMULATING) and
  equals the program run on float32 copies of its 16-bit float inputs and rounded
  back (pallas-prof accumulates 16-bit floats in float32 where XLA may not),
  "gpu_scan_order" (on a GPU) when it equals the program with its 16-bit cumsums and
  cumprods in a GPU warp's order (testkit/fuzz/scan_order.py), "interpreter_scan_order"
  (on the CPU) when it equals the program with its cumsums and cumprods in Triton's
  interpreter's order,
  "xla_less_precise_than_float64" when it equals the program run in float64 on
  its float32 inputs and rounded back; else None."""
  if program.kind != "values":
    return "xla_less_precise_than_float64" if rounded_reference_agrees(program, inputs, got) \
        else None
  scope = build(program)
  cpu = jax.devices("cpu")[0]
  with jax.default_device(cpu):
    eager = scope["fn"](*[jax.device_put(a, cpu) for a in inputs])
  # eager jnp still compiles a jnp function whole: where the op-by-op reference ran and
  # pallas-prof differs from it, eager's agreement is a rounding skipped on both sides
  if op_by_op_agrees is not False and compare(
      program, got, [np.asarray(r) for r in jax.tree.leaves(eager)], FLIPS)[0] is None:
    return "xla_jit_and_eager_differ"
  low = [a.dtype in (jnp.bfloat16, jnp.float16) for a in inputs]
  # only where something accumulates: a program of 16-bit elementwise steps must round
  # after each as XLA does, and one that skipped a rounding would equal this float32 run
  if any(low) and ACCUMULATING.intersection(program.features):
    # The same program on float32 inputs, rounded back: XLA's CPU rounds a bfloat16
    # cumsum to bfloat16 at every step of its scan, pallas-prof accumulates in float32
    # (sin(cumsum(x)) over 19 rows: XLA -3.25 -> 0.108, exact -3.328 -> 0.185, 2026-12-02)
    wide = [a.astype(np.float32) if lo else a for a, lo in zip(inputs, low)]
    with jax.default_device(cpu):
      result = jax.jit(scope["fn"])(*[jax.device_put(a, cpu) for a in wide])
    rounded = [np.asarray(r).astype(g.dtype) if np.asarray(r).dtype != np.asarray(g).dtype
               else np.asarray(r) for r, g in zip(jax.tree.leaves(result), got)]
    if compare(program, got, rounded, FLIPS)[0] is None:
      return "xla_low_precision_accumulates"
  if SCANNING.intersection(program.features) and device is not None \
      and device.platform != "cpu":
    # The same program with its scans summed in the order the kernel's compiled code sums
    # them, op by op (every step rounded): Triton's GPU scan takes the lanes 1, 2, 4, ...
    # before, then the chunks' totals, where XLA's CPU sums windows, then their totals; both
    # are right, a sin or a clip and a product after the scan can make their last bits
    # whole differences (testkit/fuzz/scan_order.py)
    if gpu_scan_order_agrees(program, inputs, got, compiled_scan_layouts(program, device)):
      return "gpu_scan_order"
  if SCANNING.intersection(program.features) and (device is None or device.platform == "cpu") \
      and interpreter_scan_order_agrees(program, inputs, got):
    # On the CPU the same, in Triton's interpreter's order: one element after another
    # (a float16 double cumsum that cancels: tests/fuzz/test_interpreter_scan_order.py)
    return "interpreter_scan_order"
  if any(a.dtype == np.float32 for a in inputs):
    # The same program in float64, rounded back: where XLA's float32 is an ulp off and a
    # discontinuity turns the ulp into a jump (XLA's tanh(9) is 1.0, the float32 nearest
    # 1 - 3.05e-8 is 1 - 5.96e-8; through tanh(x*x)*0.5 + x*0.25 + 0.25 at x = -3 and
    # atan2(v, v), XLA gives -pi at its exact 0 where pallas-prof gives pi/4, 2026-12-02)
    rounded = [r.astype(np.asarray(g).dtype) for r, g in zip(in_float64(program, inputs), got)]
    if compare(program, got, rounded, FLIPS)[0] is None:
      return "xla_less_precise_than_float64"
  if rounded_reference_agrees(program, inputs, got):
    return "xla_less_precise_than_float64"
  if device is None or device.platform == "cpu":
    return None
  with jax.default_device(device):
    result = jax.jit(scope["fn"])(*[jax.device_put(a, device) for a in inputs])
  if compare(program, got, [np.asarray(r) for r in jax.tree.leaves(result)], FLIPS)[0] is None:
    return "xla_platforms_differ"
  return None


def gpu_scan_order_agrees(program: Program, inputs, got, layouts=None) -> bool:
  """Whether `got` equals the "values" program run op by op on the CPU with its cumsums
  and cumprods in the GPU's order (testkit/fuzz/scan_order.py): the kernel's own (`layouts`,
  its TTGIR's scans), else a warp's for 16-bit scans; with the other jnp and lax calls as
  XLA gives them, or each rounded from float64 (testkit/fuzz/rounded.py: the GPU's exp
  and sin are nearer the exact value than XLA's CPU ones)."""
  from .rounded import namespace_rounded_from_float64
  from .scan_order import (OrderUnknown, namespace_with_triton_scans,
                           namespace_with_warp_scans, triton_scans)
  tries = [] if layouts is None else [
      (lambda: namespace_with_triton_scans(namespace(), layouts), False),
      (lambda: namespace_rounded_from_float64(namespace(), **triton_scans(layouts)), True)]
  # without the kernel's layouts (or where they do not line up with the program's scans):
  # one 16-bit element a lane, as the H200's 16-bit findings were
  tries.append((lambda: namespace_with_warp_scans(namespace()), False))
  for make, wide in tries:
    try:
      if _agrees_op_by_op(program, inputs, got, make(), wide):
        return True
    except OrderUnknown:
      continue
  return False


def interpreter_scan_order_agrees(program: Program, inputs, got) -> bool:
  """Whether `got` equals the "values" program run op by op on the CPU with its cumsums
  and cumprods as Triton's interpreter runs pallas-prof's kernel (scan_order.py's
  interpreter_scan), the other jnp and lax calls as XLA gives them."""
  from .scan_order import interpreter_scan, namespace_with_scans
  scope = namespace_with_scans(namespace(), interpreter_scan)
  try:
    return _agrees_op_by_op(program, inputs, got, scope)
  except Exception:  # noqa: BLE001 - a program the model cannot run is not explained by it
    return False


def _agrees_op_by_op(program: Program, inputs, got, scope: dict, wide: bool = False) -> bool:
  """Whether `got` equals the "values" program run op by op on the CPU with `scope` as its
  namespace (some jnp and lax calls done another way), under jax.enable_x64(`wide`)."""
  cpu = jax.devices("cpu")[0]
  exec(compile(program.source, f"<fuzz program {program.seed}>", "exec"), scope)
  with jax.enable_x64(wide), jax.default_device(cpu):
    result = scope["fn"](*[jax.device_put(a, cpu) for a in inputs])
    result = [np.asarray(r).astype(np.asarray(g).dtype)
              for r, g in zip(jax.tree.leaves(result), got)]
  return compare(program, got, result, FLIPS)[0] is None


def in_float64(program: Program, inputs) -> list[np.ndarray]:
  """The "values" program jitted by XLA on the CPU in float64, its float32 inputs widened."""
  scope = build(program)
  cpu = jax.devices("cpu")[0]
  wide = [a.astype(np.float64) if a.dtype == np.float32 else a for a in inputs]
  with jax.enable_x64(True), jax.default_device(cpu):
    result = jax.jit(scope["fn"])(*[jax.device_put(a, cpu) for a in wide])
    return [np.asarray(r) for r in jax.tree.leaves(result)]


# pallas-prof's float32 may miss the float64 answer by at most this many times XLA's worst
# miss in an output where XLA's misses it too: two float32 orders of one sum err alike in
# size, not in which elements; a miscompiled element is off by the values' size instead
AS_FAR = 2.0


def as_far_from_float64(program: Program, inputs, got, want) -> bool:
  """Whether each output where `got` differs from XLA's float32 `want` is one float32
  cannot settle at the program's tolerance: XLA's own float32 answer misses the float64
  answer (the program run in float64 on the same inputs) in some of its elements, and
  pallas-prof's misses it in no more elements (FLIPS aside) and by no more than AS_FAR
  times XLA's worst miss. A sin of a cumsum of thousands is such a program: an ulp of
  the sum is a thousandth of the sin, whoever sums (the CPU fuzz at 49c3970, seed
  20261224: XLA off float64 in 99 of 1089 elements, pallas-prof in 83)."""
  if program.kind != "values" or not any(a.dtype == np.float32 for a in inputs):
    return False
  try:
    exact = in_float64(program, inputs)
  except Exception:  # noqa: BLE001 - a program float64 cannot run is not explained by it
    return False
  if len(exact) != len(got) or len(want) != len(got):
    return False
  for g, w, e in zip(got, want, exact):
    g, w = np.asarray(g), np.asarray(w)
    if not _mismatches(program, g, w).any():
      continue
    if w.dtype != np.float32 or g.dtype != np.float32 or e.shape != w.shape:
      return False
    near = e.astype(np.float32)
    off_xla, off_ours = _mismatches(program, w, near), _mismatches(program, g, near)
    if not off_xla.any() or off_ours.sum() > off_xla.sum() + FLIPS:
      return False          # XLA's float32 settles it, or pallas-prof misses more elements
    finite = np.isfinite(e)
    if not (np.isfinite(g[finite]).all() and np.isfinite(w[finite]).all()):
      return False
    if not (np.array_equal(g[~finite], w[~finite], equal_nan=True)):
      return False
    miss_ours = np.abs(g[finite].astype(np.float64) - e[finite])
    miss_xla = np.abs(w[finite].astype(np.float64) - e[finite])
    if miss_ours.size and miss_ours.max() > AS_FAR * miss_xla.max():
      return False
  return True


def rounded_reference_agrees(program: Program, inputs, got) -> bool:
  """Whether `got` equals the program with every jnp and lax call worked in float64 and
  rounded back to its dtype (testkit/fuzz/rounded.py), op by op: where XLA's CPU tanh or exp
  is ulps off and a discontinuity after it (a ceil, a sin of thousands) makes the ulps a
  whole difference."""
  from jax.experimental import pallas as pl
  from .rounded import namespace_rounded_from_float64
  if not any(jnp.issubdtype(a.dtype, jnp.floating) for a in inputs) \
      and "float" not in program.source:
    return False
  scope = namespace_rounded_from_float64(namespace())
  exec(compile(program.source, f"<fuzz program {program.seed}>", "exec"), scope)
  cpu = jax.devices("cpu")[0]
  args = [jax.device_put(a, cpu) for a in inputs]
  try:
    with jax.enable_x64(True), jax.default_device(cpu):
      if program.kind == "values":
        result = scope["fn"](*args)
      else:
        result = pl.pallas_call(scope["kernel"], interpret=True, **scope["call"])(*args)
      result = [np.asarray(r).astype(np.asarray(g).dtype)
                for r, g in zip(jax.tree.leaves(result), got)]
  except Exception:  # noqa: BLE001 - a program float64 cannot run is not explained by it
    return False
  return compare(program, got, result, FLIPS)[0] is None


def compiled_scan_layouts(program: Program, device) -> list | None:
  """The scans of the kernel pallas-prof compiled for the program's last run, as the GPU
  compiles them (through pallas-prof's workarounds where Triton fails), read from the
  TTGIR; None where there is no kernel or a layout the model does not know."""
  from pallas_prof.backend import kernel_registry
  from pallas_prof.backend.compiling.failures import workarounds
  from .scan_order import scan_layouts
  records = [r for r in kernel_registry.kernels() if r.name == f"fuzz_{program.seed}"]
  if not records:
    return None
  major, _, minor = str(getattr(device, "compute_capability", "9.0")).partition(".")
  target = ("cuda", int(major) * 10 + int(minor or 0))
  rec = records[-1]
  try:
    ck = workarounds.compile_working_around(rec.generated, target, rec.relower,
                                            use_disk_cache=False)
  except Exception:  # noqa: BLE001 - a kernel that does not compile has no order to read
    return None
  return scan_layouts(str(ck.asm.get("ttgir", "")))


def _is_limitation(error: BaseException, text: str) -> bool:
  from pallas_prof import LoweringError
  if BUGS.search(text):
    return False
  return isinstance(error, LoweringError) and bool(UNSUPPORTED.search(text))


def _first_line(error: BaseException) -> str:
  reason = getattr(error, "reason", None) or str(error)
  return reason.strip().splitlines()[0][:200]


# --- reproducers ----------------------------------------------------------------

def reproducer(program: Program, message: str) -> str:
  """A script that re-runs the program and prints what happened: on the CPU, on a
  GPU (`gpu`), compiled for sm_90 with its SASS read (`sm90`, testkit/fuzz/sm90.py), and for
  a second target (`sm_80`, `gfx942`: testkit/fuzz/second_target.py)."""
  spec = json.dumps(dataclasses.asdict(program), indent=1)
  return textwrap.dedent('''\
      """A finding of the pallas-prof fuzzer (a difference shrunk by hypothesis, a failed
      sm_90 compile, or a hazard lead to run on a GPU).

      {message}

      Run from the repository root: python3 {{this file}} [gpu] [sm90] [sm_80] [gfx942]
      """
      import json
      import os
      import sys
      sys.path.insert(0, os.getcwd())
      from testkit.fuzz.programs import InputSpec, Program
      from testkit.fuzz.check import check

      PROGRAM = json.loads(r\'\'\'
      {spec}
      \'\'\')
      PROGRAM["inputs"] = tuple(InputSpec(**dict(i, shape=tuple(i["shape"])))
                                for i in PROGRAM["inputs"])
      PROGRAM["features"] = tuple(PROGRAM["features"])
      program = Program(**PROGRAM)
      print(program.source)
      if "gpu" in sys.argv[1:]:
        import jax
        print(check(program, jax.devices("gpu")[0]))
      else:
        print(check(program))
      if "sm90" in sys.argv[1:]:
        from testkit.fuzz.sm90 import compile_sm90
        print(compile_sm90(program))
      for target in [a for a in sys.argv[1:] if a in ("sm_80", "gfx942")]:
        from testkit.fuzz.second_target import compile_for_target
        print(compile_for_target(program, target))
      ''').format(message=textwrap.indent(message.replace('"""', "'''"), "").strip()[:3000],
                  spec=spec)


def save_reproducer(program: Program, message: str, directory: str) -> str:
  import hashlib
  os.makedirs(directory, exist_ok=True)
  # shrunk programs often share a seed (0): the source's hash keeps them apart
  tag = hashlib.sha1(program.source.encode()).hexdigest()[:8]
  path = os.path.join(directory, f"repro_{program.kind}_{program.seed}_{tag}.py")
  with open(path, "w") as f:
    f.write(reproducer(program, message))
  return path


def load_reproducer(path: str) -> Program:
  """The Program a script of save_reproducer's holds."""
  with open(path) as f:
    text = f.read()
  start = text.index("json.loads(r'''") + len("json.loads(r'''")
  data = json.loads(text[start:text.index("''')", start)])
  return Program(**dict(data, features=tuple(data["features"]),
                        inputs=tuple(InputSpec(**dict(i, shape=tuple(i["shape"])))
                                     for i in data["inputs"])))
