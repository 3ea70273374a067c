"""The generators grown toward the GPU fuzzer's first miss (tests/fuzz/hazards.py),
the scan generators of issue 28 (tests/fuzz/scans.py), and the sm_90 compile mode
with its SASS hazard reader (tests/fuzz/sm90.py, sass_hazards.py): fixed,
derandomized sets run on the CPU like tests/fuzz/test_fuzz.py's."""
from __future__ import annotations

import collections
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.hazards import hazard_programs
from tests.fuzz.sass_hazards import hazard_leads, in_place_predicated_selects
from tests.fuzz.scans import scan_programs
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
  from tests.fuzz.hazards import _clamped_update
  from tests.fuzz.programs import Builder, Var
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
  """bench/fuzz.py's CPU run of 2026-12-03 (seed 20261211): the chain in float16 over
  64 rows is ill-conditioned (exp of a cumsum near its clip, summed again): XLA and
  pallas-prof each 30-40 of 300 away from the exactly summed answer, 7 from each other.
  Such kernels compute it in float32; so do the generator's, for 16-bit inputs."""
  from tests.fuzz.programs import Builder, Var
  from tests.fuzz.scans import _selective
  for dtype in ("float16", "bfloat16", "float32"):
    b = Builder(lambda strategy, label=None: 0 if label != "row sum" else False,
                [Var("x0", (64,), dtype, 4.0)])
    _selective(b)
    assert ("astype(jnp.float32)" in b.lines[0]) == (dtype != "float32"), b.lines
    assert b.vars[-1].dtype == "float32", b.vars[-1]
