"""The generators grown toward the GPU fuzzer's first miss (testkit/fuzz/hazards.py),
the scan generators of issue 28 (testkit/fuzz/scans.py), and the sm_90 compile mode
with its SASS hazard reader (testkit/fuzz/sm90.py, sass_hazards.py): fixed,
derandomized sets run on the CPU like tests/fuzz/test_fuzz.py's."""
from __future__ import annotations

import collections
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.fuzz.hazards import hazard_programs
from testkit.fuzz.sass_hazards import hazard_leads, in_place_predicated_selects
from testkit.fuzz.scans import scan_programs
from tests.fuzz.test_fuzz import _check, _run_bounded, fixed

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _sample(strategy, n: int) -> list:
  drawn = []

  @settings(max_examples=n, derandomize=True, database=None, deadline=None,
            suppress_health_check=list(HealthCheck))
  @given(strategy)
  def draw(program):
    drawn.append(program)

  draw()
  return drawn


def test_hazard_programs_have_what_found_the_miss():
  """Clamped starts, live originals, compound masks, masked loads with other= a live
  value, odd lengths and mostly 16-bit floats: each common in a sample, not a rarity."""
  programs = _sample(hazard_programs(), 80)
  features = collections.Counter(f for p in programs for f in p.features)
  assert len(programs) >= 70
  for feature in ("dynamic_update_slice", "compound select", "live use", "dynamic_slice", "pad",
                  "masked_load other=live"):
    assert features[feature] >= 5, (feature, features)
  sixteen = sum(any(i.dtype in ("float16", "bfloat16") for i in p.inputs) for p in programs)
  assert sixteen >= 0.3 * len(programs), sixteen     # value_programs: 2 main dtypes in 10
  odd = sum(any(d % 2 for i in p.inputs for d in i.shape if d > 1) for p in programs)
  assert odd >= 0.5 * len(programs), odd
  sources = "\n".join(p.source for p in programs)
  assert re.search(r"% \d+ - \d+\)", sources), "starts below 0 (a shifted modulus)"
  assert re.search(r"\) \| \(", sources) and re.search(r"\) & \(", sources), "and/or masks"
  assert re.search(r"other=v\d+", sources), "masked loads take a computed value"


def test_scan_programs_cover_ops_axes_shapes_and_warps():
  programs = _sample(scan_programs(), 80)
  sources = "\n".join(p.source for p in programs)
  for op in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
    assert f"{op}(" in sources, op
  assert "reverse=True" in sources and "axis=1" in sources and "axis=-" in sources
  assert "[:, None] * " in sources and "jnp.broadcast_to(" in sources
  assert {p.num_warps for p in programs} == {None, 1, 2, 4, 8}
  dims = {d for p in programs for i in p.inputs for d in i.shape}
  assert 1 in dims and {7, 19, 33} <= dims and {16, 32} <= dims
  dtypes = {i.dtype for p in programs for i in p.inputs}
  assert {"float32", "float16", "bfloat16", "int32"} <= dtypes


def _updates(n: int = 60) -> list[list[str]]:
  """The statements _clamped_update makes of a float16 [7, 19] value, n times."""
  from testkit.fuzz.hazards import _clamped_update
  from testkit.fuzz.programs import Builder, Var
  drawn = []

  @settings(max_examples=n, derandomize=True, database=None, deadline=None,
            suppress_health_check=list(HealthCheck))
  @given(st.data())
  def draw(data):
    b = Builder(data.draw, [Var("x0", (7, 19), "float16", 4.0)])
    _clamped_update(b)
    drawn.append(b.lines)

  draw()
  return drawn


def test_clamped_updates_take_one_axis_or_two_with_starts_past_the_clamp():
  """Updates along one axis or both, each start from the data modulo more than its
  axis's length (so past the clamp, n - width, often: XLA and pallas-prof clamp it),
  and the original value read again after most of them."""
  drawn = _updates()
  two = [lines for lines in drawn if "dynamic_update_slice(" in lines[0]]
  assert 5 <= len(two) <= len(drawn) - 5, len(two)
  for lines in drawn:
    moduli = [int(m) for m in re.findall(r"% (\d+)", lines[0])]
    axis = re.search(r"axis=(\d)", lines[0])
    lengths = [(7, 19)[int(axis.group(1))]] if axis else [7, 19]
    assert len(moduli) == len(lengths) and all(m > n for m, n in zip(moduli, lengths)), lines
  live = sum(any(re.match(r"v\d+ = x0 \* ", line) for line in lines[1:]) for lines in drawn)
  assert live >= len(drawn) // 3, live


@fixed(32)
@given(hazard_programs())
def _hazards(program):
  _check(program)


@fixed(30)
@given(scan_programs())
def _scans(program):
  _check(program)


def test_hazard_programs_match_their_references():
  _run_bounded(_hazards, 32)


def test_scan_programs_match_xla():
  _run_bounded(_scans, 30)


# --- the SASS signature ---------------------------------------------------------------

def test_the_pattern_finder_reads_the_miscompiled_sass_as_a_strong_lead():
  """The SASS of seed 18680 before e05b0f8 (sm_90, ptxas of Triton 3.6): v3's register
  R3 overwritten in place by a predicated SEL, then read by packed 16-bit math (an
  HMUL2 directly, the HFMA2 through PRMT copies), which is what went wrong."""
  with open(os.path.join(DATA, "fuzz_18680_miscompiled.sass")) as f:
    sass = f.read()
  assert in_place_predicated_selects(sass) == ["@P0 SEL R3, R14, R3, !P3 ;"]
  [lead] = hazard_leads(sass)
  assert lead.strong and lead.select == "@P0 SEL R3, R14, R3, !P3 ;"
  assert lead.readers == ("HMUL2 R5, R3.H0_H0, R6 ;", "HFMA2.MMA R4, R15, R4, -RZ ;")


def _sass(*lines: str) -> str:
  return "\n".join(f"        /*{16 * i:04x}*/                   {line} ;"
                   for i, line in enumerate(lines))


@pytest.mark.parametrize("lines, strong", [
    (["@P0 SEL R3, R14, R3, !P3", "HMUL2 R5, R3.H0_H0, R6"], True),
    (["@P0 SEL R3, R14, R3, !P3", "PRMT R4, R3, 0x5410, R8", "HFMA2 R4, R4, R9, -RZ"], True),
    # no packed math after it; other registers only; a branch ends the block
    (["@P0 SEL R3, R14, R3, !P3", "FMUL R5, R3, R6"], False),
    (["@P0 SEL R3, R14, R3, !P3", "HMUL2 R5, R7.H0_H0, R6"], False),
    (["@P0 SEL R3, R14, R3, !P3", "@P1 BRA `(.L_x_1)", "HMUL2 R5, R3.H0_H0, R6"], False),
    # R3 written anew (not from itself) before the packed math reads it
    (["@P0 SEL R3, R14, R3, !P3", "MOV R3, R9", "HMUL2 R5, R3.H0_H0, R6"], False),
])
def test_a_lead_is_strong_only_where_packed_math_reads_the_overwritten_register(lines, strong):
  [lead] = hazard_leads(_sass(*lines))
  assert lead.strong is strong, lead


def test_a_label_ends_the_block_and_an_unpredicated_select_is_no_lead():
  sass = _sass("@P0 SEL R3, R14, R3, !P3") + "\n.L_x_1:\n" + _sass("HMUL2 R5, R3.H0_H0, R6")
  assert [lead.strong for lead in hazard_leads(sass)] == [False]
  assert hazard_leads(_sass("SEL R3, R14, R3, !P3", "HMUL2 R5, R3.H0_H0, R6")) == []
  assert hazard_leads(_sass("@!P1 FSEL R7, R2, R9, P2", "HMUL2 R5, R7.H0_H0, R6")) == []


def test_the_selective_scan_chain_of_16_bit_inputs_computes_in_float32():
  """bench/fuzz/fuzz.py's CPU run of 2026-12-03 (seed 20261211): the chain in float16 over
  64 rows is ill-conditioned (exp of a cumsum near its clip, summed again): XLA and
  pallas-prof each 30-40 of 300 away from the exactly summed answer, 7 from each other.
  Such kernels compute it in float32; so do the generator's, for 16-bit inputs."""
  from testkit.fuzz.programs import Builder, Var
  from testkit.fuzz.scans import _selective
  for dtype in ("float16", "bfloat16", "float32"):
    b = Builder(lambda strategy, label=None: 0 if label != "row sum" else False,
                [Var("x0", (64,), dtype, 4.0)])
    _selective(b)
    assert ("astype(jnp.float32)" in b.lines[0]) == (dtype != "float32"), b.lines
    assert b.vars[-1].dtype == "float32", b.vars[-1]


def test_an_add_of_a_float_product_is_inexact_as_an_fma_may_round_it_once():
  """XLA's CPU contracts `a * b + c` into one FMA (float32 here; float16 too on the H200's
  host), pallas-prof rounds the product first: such a value may differ by a last bit."""
  from testkit.fuzz.programs import Builder, Var
  b = Builder(None, [Var("x1", (19,), "float16", 4.0), Var("k", (19,), "int32", 100)])
  assert b.add("x1 * x1 + 1", 17.0, "live").inexact
  assert b.add("x1 * 1.5 - 0.25", 6.25, "unary").inexact
  square = b.add("x1 * x1", 16.0, "unary")
  assert not square.inexact                              # one rounding, the same everywhere
  assert b.add(f"{square.name} + x1", 20.0, "binary").inexact      # fused across statements
  for exact in ("x1 + x1", "-x1", "jnp.clip(x1, -5, 5)", "x1 - 0.25"):
    assert not b.add(exact, 100.0, "unary").inexact, exact
  assert not b.add("k * 3 + 1", 301, "binary").inexact      # integers wrap, never round


def _rounded_twice(source: str) -> str:
  """The program with its live value's product and sum each rounded to float16, as the GPU
  computes it (no FMA). Written out with reduce_precision, which XLA keeps: a float16
  `x1 * x1 + 1`, or a round trip through float16 between float32 steps, XLA's CPU may
  compute with one rounding (it did on a processor with avx512_fp16)."""
  half = "exponent_bits=5, mantissa_bits=10"
  return source.replace(
      "x1 * x1 + 1", f"lax.reduce_precision(lax.reduce_precision(x1.astype(jnp.float32) * "
      f"x1.astype(jnp.float32), {half}) + 1, {half}).astype(x1.dtype)")


def _fused_live(source: str) -> str:
  """The program with its live value rounded once, as an FMA would."""
  return source.replace("x1 * x1 + 1",
                        "(x1.astype(jnp.float32) * x1.astype(jnp.float32) + 1).astype(x1.dtype)")


@pytest.mark.parametrize("steps, mask, n, grid, block, element, message", [
    # bench/results/fuzz_gpu_h200_04b520d_seed20261215.json: the shrunk finding, and the
    # one hypothesis started from (its dead statements left out)
    (["v4 = x0 * v2", "v5 = jnp.sin(v4)"], "(gi >= 0) & (gi < 1)", 19, 1, 19, 17,
     "[17]: np.float16(0.5664) vs np.float16(0.665)"),
    (["v4 = x0 * v2", "v5 = x0 * x0", "v6 = x0 * v5", "v7 = jnp.cos(v6)"],
     "((gi % 3) != 1) & (gi < 78)", 60, 4, 17, 46, "[46]: np.float16(0.793) vs np.float16(0.342)"),
])
def test_the_gpu_fuzzers_float16_live_value_findings_are_fragile(steps, mask, n, grid, block,
                                                                 element, message):
  """The GPU fuzzer's two float16 differences of 2026-12-15 are the reference's FMA, no
  miscompile: the values the GPU gave are the ones JAX's CPU gives rounding `x1 * x1 + 1`
  twice, the reference's are the ones it gives rounding it once, and sin/cos of a square
  of it (in the hundreds, in the thousands) turn that last bit into anything. The
  generator now calls such a program fragile (the product is inexact, and x0, loaded
  over the live value, is as large as it); a fragile program tolerates those elements."""
  import dataclasses

  from testkit.fuzz import check as fuzz_check
  from testkit.fuzz.hazards import _load_over_live
  from testkit.fuzz.programs import Builder, InputSpec, Program, Var
  b = Builder(None, [Var("x1", (block,), "float16", 4.0), Var("gi", (block,), "int32", n)])
  live = b.add("x1 * x1 + 1", 17.0, "live")
  _load_over_live(b, live, 4.0)
  for step in steps[1:]:
    name, expr = step.split(" = ")
    bound = 1.0 if "jnp." in expr else b.env()[expr.split(" * ")[0]].bound * \
        b.env()[expr.split(" * ")[1]].bound
    assert b.add(expr, bound, "unary").name == name
  assert b.fragile
  body = "\n".join(f"  {line}" for line in [
      f"gi = pl.program_id(0) * {block} + lax.broadcasted_iota(jnp.int32, ({block},), 0)",
      "x1 = x1_ref[...]", "v2 = x1 * x1 + 1",
      f"x0 = plgpu.load(x0_ref, mask={mask}, other=v2)", *steps,
      f"o_ref[...] = {steps[-1].split(' = ')[0]}", "live_ref[...] = v2 * x1"])
  spec = f"pl.BlockSpec(({block},), lambda i: (i,))"
  source = (f"def kernel(x0_ref, x1_ref, o_ref, live_ref):\n{body}\n\n"
            f"call = dict(grid=({grid},), in_specs=[{spec}, {spec}], out_specs=[{spec}, {spec}],\n"
            f"            out_shape=[jax.ShapeDtypeStruct(({n},), jnp.float16)] * 2)\n")
  inputs = (InputSpec((n,), "float16", -4, 4),) * 2
  seed = 0 if n == 19 else 3628800
  strict = Program("kernel", source, inputs, seed, 0.01, 289.0, ("masked_load other=live",))
  values = fuzz_check.make_inputs(strict)
  twice = fuzz_check.run_reference(dataclasses.replace(strict, source=_rounded_twice(source)),
                                   values)                # what the GPU gave (at the element)
  once = fuzz_check.run_reference(dataclasses.replace(strict, source=_fused_live(source)), values)
  diff, _ = fuzz_check.compare(strict, twice, once)
  assert diff == f"output 0 (float16[{n}]): 1 of {n} elements differ: {message}"
  diff, note = fuzz_check.compare(dataclasses.replace(strict, fragile=True), twice, once)
  assert diff is None and note.startswith("tolerated")
