"""Measured attribution on a CPU, from CUPTI PC samples recorded on the H200
(fixtures/pcsampling/README.md): decoding, mapping to equations and lines, memory
waits charged to loads, and the static basis when there is no GPU."""
from __future__ import annotations

import json
import os

import pytest

from pallas_prof.cli import run_directory
from pallas_prof.profiler import driver
from pallas_prof.profiler.sampling import attribution, cupti_pcs, pcsampling, sassdeps, stalls
from pallas_prof.profiler.static import correlate
from pallas_prof.profiler.schema import (KernelProfile, ProfileReport, RuntimeStats,
                                         TimingStats)

from .. import known_answer_checks as checks

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures",
                        "pcsampling")


def _recorded(name):
  d = os.path.join(FIXTURES, name)
  gk, ck = run_directory.load_kernel(d)
  with open(os.path.join(d, "samples.json")) as f:
    data = json.load(f)
  with open(os.path.join(d, "meta.json")) as f:
    meta = json.load(f)
  return gk, ck, data, meta


def _measured(name):
  gk, ck, data, meta = _recorded(name)
  samples, other = pcsampling.instruction_samples(data, data["kernel"])
  att = attribution.measured(gk, ck and correlate.correlate(ck), samples, basis="pc_sampling",
                             description="recorded", replay_median_s=meta["replay_median_s"],
                             sampling=pcsampling.sampling_run(data, other))
  return gk, att, data


def test_every_recorded_stall_reason_is_decoded():
  _, _, data, _ = _recorded("softmax_kernel-dc90ff")
  names = list(data["stall_reasons"].values())
  assert len(names) >= 30
  counted = [stalls.canonical(n) for n in names]
  reasons = {r for r, keep in counted if keep}
  assert "long_scoreboard" in reasons and "selected" in reasons
  assert all(r in stalls.WORDS for r in reasons), reasons - set(stalls.WORDS)
  # the not-issued duplicates and the two sample counters are never counted
  assert ("long_scoreboard", False) in counted
  assert stalls.canonical("smsp__pcsamp_sample_count") == ("sample_count", False)
  assert stalls.canonical("stall_long_sb (Not Issued)") == ("long_scoreboard", False)
  assert stalls.canonical("stall_math") == ("math_pipe_throttle", True)


@pytest.mark.parametrize("name", ["softmax_kernel-dc90ff", "ka_copy_kernel-f38816",
                                  "ka_matmul_kernel-4f3400", "ka_loop_kernel-3c5725"])
def test_samples_add_up_and_land_on_the_disassembly(name):
  gk, att, data = _measured(name)
  # what CUPTI counted is what the PCs carry, all of them in this kernel's function
  assert att.total == data["total_samples"] > 10_000
  assert att.sampling.other_function_samples == 0 and att.sampling.dropped_samples == 0
  assert not att.notes                       # every sampled offset is an instruction we know
  assert att.unattributed < 0.01 * att.total
  weights = sum(e.weight for e in att.equations)
  assert weights + att.unattributed / att.total == pytest.approx(1.0)
  assert [e.weight for e in att.equations] == sorted((e.weight for e in att.equations),
                                                     reverse=True)
  for e in att.equations:
    assert e.time_s == pytest.approx(e.weight * att.replay_median_s)
    assert e.inclusive_weight >= e.weight - 1e-12


def test_softmax_wait_for_x_is_charged_to_its_load_line():
  gk, att, _ = _measured("softmax_kernel-dc90ff")
  ok, text = checks.softmax_wait({"attribution": att.to_dict()})
  assert ok, text
  x = att.equations[0]
  assert (x.primitive, os.path.basename(x.user_file), x.user_line) == ("get", "softmax.py", 19)
  first = x.waits[0]
  assert (first.consumer_primitive, first.consumer_line, first.reason) == \
      ("reduce_max", 20, "long_scoreboard")
  reduce_max = att.equation(first.consumer)
  # the samples stay visible where the warps stood
  assert reduce_max.share_at > reduce_max.weight and reduce_max.charged_out > 0
  assert x.charged_in == pytest.approx(sum(w.samples for w in x.waits))
  text = attribution.wait_text(gk, x)
  assert "waiting for global memory" in text and "reduce_max at :20" in text


def test_loop_known_answer_from_recorded_samples():
  gk, att, _ = _measured("ka_loop_kernel-3c5725")
  ok, text = checks.loop({"attribution": att.to_dict()})
  assert ok, text
  loop = next(e for e in att.equations if e.primitive == "scan")
  # the body's equations are nested in the loop: inclusive, not exclusive
  assert loop.weight < 0.01 and loop.inclusive_samples > 0.9 * att.total
  assert {gk.eqns[e.index].parent for e in att.equations[:2]} == {loop.index}


def test_copy_and_matmul_known_answers_from_recorded_samples():
  _, copy, _ = _measured("ka_copy_kernel-f38816")
  ok, text = checks.copy({"attribution": copy.to_dict()})
  assert ok, text
  _, mm, _ = _measured("ka_matmul_kernel-4f3400")
  ok, text = checks.matmul({"attribution": mm.to_dict()})
  assert ok, text
  # the pipelined loop's long-scoreboard waits are for its cp.async copies (LDGSTS):
  # charged to the loads, away from the loop's own control instructions
  loop = next(e for e in mm.equations if e.primitive == "scan")
  assert loop.charged_out > 0.5 * loop.samples
  assert loop.inclusive_weight > 0.9


def test_user_lines_sum_their_equations():
  gk, att, _ = _measured("softmax_kernel-dc90ff")
  lines = {ln.user_line: ln for ln in att.lines}
  assert set(lines) == {19, 20, 21, 22}
  for ln in att.lines:
    assert ln.weight == pytest.approx(sum(att.equation(i).weight for i in ln.equations))
  assert lines[19].top_stall == "waiting for global memory"


def test_register_dependencies_of_sass_lines():
  assert sassdeps.registers("LDG.E.128 R4, desc[UR4][R2.64]", "LDG.E.128") == ({4, 5, 6, 7}, {2, 3})
  assert sassdeps.registers("FMNMX R9, R4, R5, !PT", "FMNMX") == ({9}, {4, 5})
  assert sassdeps.registers("STG.E.128 desc[UR4][R2.64+0x10], R8", "STG.E.128") == \
      (set(), {2, 3, 8, 9, 10, 11})
  assert sassdeps.registers("ISETP.GE.AND P0, PT, R0, 0x3f, PT", "ISETP.GE.AND") == (set(), {0})
  assert sassdeps.registers("LDSM.16.M88.4 R4, [R20+UR4+0x800]", "LDSM.16.M88.4") == \
      ({4, 5, 6, 7}, {20})
  texts = ["LDG.E R2, desc[UR4][R6.64]", "FADD R3, R9, 1", "FMUL R4, R2, R3"]
  deps = sassdeps.Dependencies(texts, [t.split()[0] for t in texts], [])
  assert deps.producers(2, "long_scoreboard") == [0]     # R2 from the load; R3 from an FADD
  assert deps.producers(2, "short_scoreboard") == []
  # in a loop, a value loaded at the bottom of the previous iteration
  texts = ["FMUL R4, R2, R2", "IADD3 R6, R6, 4", "LDG.E R2, desc[UR4][R6.64]", "BRA 0"]
  deps = sassdeps.Dependencies(texts, [t.split()[0] for t in texts], [(0, 3)])
  assert deps.producers(0, "long_scoreboard") == [2]


def test_sampling_period_and_launches():
  # softmax 8192^2 on an H200: 136 us, 132 SMs at 1.98 GHz
  launches = pcsampling.sampled_launches(136e-6)
  assert launches == 148
  assert pcsampling.period_log2(136e-6, launches, 1.98e9, 132) == 15
  assert pcsampling.sampled_launches(0.05) == 3
  assert pcsampling.period_log2(1e-9, 3, 1.98e9, 132) == 5


@pytest.mark.parametrize("kernel_s,ctas", [(227e-6, 8192), (136e-6, 8192), (192e-6, 1024),
                                           (1.26e-3, 8192), (40e-6, 65536), (3e-3, 7)])
def test_sampling_period_stays_under_a_cta_life(kernel_s, ctas):
  # A period near the CTAs' life could sample every CTA of a wave at the same phase: the
  # plan keeps SAMPLES_PER_CTA periods in the shortest life a CTA can have, and brings the
  # launches down so the sample count stays near what is wanted.
  clock, sms = 1.98e9, 132
  n, launches = pcsampling.sampling_plan(kernel_s, clock, sms, ctas)
  shortest_life = kernel_s * clock / -(-ctas // sms)
  assert 2 ** n <= max(shortest_life / pcsampling.SAMPLES_PER_CTA, 32)
  assert 3 <= launches <= pcsampling.MAX_LAUNCHES
  samples = kernel_s * clock * sms / 2 ** n * launches
  assert samples >= pcsampling.SAMPLES_WANTED / 2 or launches == pcsampling.MAX_LAUNCHES
  if launches > 3:   # not forced up by the minimum: near the wanted count
    assert samples <= 2.5 * pcsampling.SAMPLES_WANTED


def test_sampling_period_unchanged_where_ctas_live_long():
  # 7 CTAs of a 3 ms kernel: the period is the one the sample count asks for
  launches = pcsampling.sampled_launches(3e-3)
  assert pcsampling.sampling_plan(3e-3, 1.98e9, 132, 7) == (
      pcsampling.period_log2(3e-3, launches, 1.98e9, 132), launches)


def test_ncu_source_counters_agree_with_pc_sampling():
  # the cross-check recorded on the H200: Nsight Compute's warp-stall samples of the
  # same kernel, mapped the same way, weigh every equation within 2 points of CUPTI's
  # (1 point before contention was charged: the charge follows the issued samples, 3 %
  # of all, and ncu's 15,220 samples hold about 460 of them)
  gk, ck, _, meta = _recorded("softmax_kernel-dc90ff")
  with open(os.path.join(FIXTURES, "softmax_kernel-dc90ff", "ncu.json")) as f:
    ncu = json.load(f)
  samples = {int(a, 16): r for a, r in ncu["instruction_samples"].items()}
  by_ncu = attribution.measured(gk, correlate.correlate(ck), samples, basis="ncu",
                                description="ncu", replay_median_s=meta["replay_median_s"])
  _, by_pcs, _ = _measured("softmax_kernel-dc90ff")
  assert by_ncu.total > 10_000
  assert [e.index for e in by_ncu.equations[:4]] == [e.index for e in by_pcs.equations[:4]]
  for e in by_pcs.equations:
    other = by_ncu.equation(e.index)
    assert other is not None and abs(other.weight - e.weight) < 0.02, (e.primitive, e.weight)
  ok, text = checks.softmax_wait({"attribution": by_ncu.to_dict()})
  assert ok, text


@pytest.mark.skipif(driver.gpu_status()[0], reason="checks the machine without a GPU")
def test_static_basis_without_a_gpu(softmax_kernel):
  from pallas_prof.profiler import profile
  record, _ = softmax_kernel
  report = profile([record])
  assert not report.gpu_present
  (k,) = report.to_dict()["kernels"]
  assert k["weight_basis"] == "static"
  assert k["attribution"]["description"].startswith("static SASS instructions times loop trips: no GPU")
  assert k["attribution"]["unit"] == "instructions"
  assert "share of instructions" in k["verdict"]


def test_runtime_headline_is_written_into_report_json():
  cold = TimingStats("cold", 10, 3, 2e-4, 1e-4, 3e-4, 1e-4, 2e-4, 0.5)
  rt = RuntimeStats(device_index=0, input_sets=2, set_bytes=1, l2_bytes=1, outputs_written=True,
                    unwritten_elements=[0], mode="cold", cold=cold)
  k = KernelProfile("k#1", "k", [], [], None, None, runtime=rt)
  d = ProfileReport(True, "", None, None, [k], [], 0.0).to_dict()["kernels"][0]["runtime"]
  assert d["median_s"] == 2e-4 and d["launches"] == 10 and d["cold"]["median_s"] == 2e-4


def test_cupti_struct_layouts_match_the_header():
  # sizes and offsets printed by a C program compiled against CUDA 13.0's
  # cupti_pcsampling.h (PACKED_ALIGNMENT: packed, aligned to 8)
  import ctypes
  assert ctypes.sizeof(cupti_pcs._PCData) == 64
  assert cupti_pcs._PCData.correlationId.offset == 56
  assert ctypes.sizeof(cupti_pcs._SamplingData) == 80
  assert cupti_pcs._SamplingData.hardwareBufferFull.offset == 72
  assert ctypes.sizeof(cupti_pcs._ConfigInfo) == 32
  assert cupti_pcs._ConfigInfo.attributeData.offset == 8
  assert ctypes.sizeof(cupti_pcs._ConfigParams) == 40
  assert ctypes.sizeof(cupti_pcs._StallNamesParams) == 48
  assert ctypes.sizeof(cupti_pcs._GetDataParams) == 32


def test_contention_is_charged_to_the_issuers():
  # The known answer: two loops of the same body, 16 and 48 rounds, cost 1:3. Where the
  # warps stood (share_at) says the opposite (most samples queue at the first loop's
  # special-function instructions, "not selected" and "queue full"); charged to the
  # instructions that were issuing, the loops' weights come out 1:3 within 20 %.
  gk, att, data = _measured("ka_two_kernel-714ff6")
  k = {"attribution": att.to_dict()}
  ok, text = checks.two_loops(k)
  assert ok, text
  loops = sorted((e for e in att.equations if e.primitive == "scan"), key=lambda e: e.index)
  short_at = sum(e.share_at for e in att.equations if e.index == loops[0].index
                 or gk.eqns[e.index].parent == loops[0].index)
  long_at = sum(e.share_at for e in att.equations if e.index == loops[1].index
                or gk.eqns[e.index].parent == loops[1].index)
  assert short_at > 2 * long_at          # the raw samples really do point the wrong way
  # recorded at a period of 2^7 cycles: CUPTI dropped 0.3 % of the samples
  assert att.total + att.sampling.dropped_samples == pytest.approx(data["total_samples"])
  assert sum(e.contended_out for e in att.equations) > 0.3 * att.total
  assert sum(e.weight for e in att.equations) + att.unattributed / att.total == pytest.approx(1)
  words = [s.words for e in att.equations for s in e.stalls]
  assert any("waiting for its issue slots" in w for w in words)


def test_contention_rule_on_a_made_up_kernel():
  from pallas_prof.profiler.sampling import contention
  # instruction 0 (eqn "a", MUFU) is where warps queue; 1 (eqn "b", MUFU) and 2 (eqn "c",
  # FFMA) issue. not_selected goes to every issuer by issued samples; mio_throttle only
  # to the MUFU issuers.
  per = {0: {"not_selected": 40, "mio_throttle": 30, "selected": 0},
         1: {"selected": 30}, 2: {"selected": 10, "math_pipe_throttle": 5}}
  moves = contention.charges(per, ["MUFU.EX2", "MUFU.EX2", "FFMA"], ["a", "b", "c"])
  got = {(s, t, r): round(v, 6) for s, t, r, v in moves}
  assert got == {("a", "b", "not_selected"): 30.0, ("a", "c", "not_selected"): 10.0,
                 ("a", "b", "mio_throttle"): 30.0}   # c's own math throttle: c is the issuer
  assert contention.pipe("@P0 BRA") is None and contention.pipe("LDG.E.128") == "lg"


def test_samples_cupti_dropped_are_said_with_their_share():
  import types
  from pallas_prof.profiler.api import _dropped_text
  assert _dropped_text(types.SimpleNamespace(dropped_samples=0, total_samples=5000)) == ""
  text = _dropped_text(types.SimpleNamespace(dropped_samples=4460, total_samples=1348850))
  assert text == " (4,460 of 1,348,850 dropped by CUPTI, 0.33 %)"
  tiny = _dropped_text(types.SimpleNamespace(dropped_samples=1, total_samples=10_000_000))
  assert tiny == " (1 of 10,000,000 dropped by CUPTI, under 0.01 %)"
