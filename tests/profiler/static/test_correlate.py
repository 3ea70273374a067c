"""Static correlation on the examples' compile output (sm_90, no GPU needed)."""
from __future__ import annotations

import os

import pytest

from pallas_prof.profiler.static import correlate
from pallas_prof.backend.compiling.lineinfo import LlvmLocs as _LlvmLocs
from pallas_prof.backend.compiling.lineinfo import Loc
from pallas_prof.backend.compiling.lineinfo import MlirLocs as _MlirLocs
from pallas_prof.profiler.static.correlate import classify_ptx, classify_sass

from ..conftest import line_of


def _eqn(ck, index):
  return ck.generated.eqns[index]


def _user_line(ck, index):
  return correlate.user_location(ck.generated, index)


def _assert_all_on_dot(ck, instrs, dot_line):
  assert instrs, "no instructions of this kind in the compiled kernel"
  for ins in instrs:
    assert ins.eqn is not None, f"{ins.stage} {ins.text!r} is attributed to no equation"
    e = _eqn(ck, ins.eqn)
    file, line, _ = _user_line(ck, ins.eqn)
    assert e.primitive == "dot_general", f"{ins.text!r} -> [{e.index}] {e.primitive}"
    assert os.path.basename(file) == "matmul.py" and line == dot_line, (ins.text, file, line)


@pytest.mark.parametrize("which, ptx_op, sass_op", [("matmul_wgmma", "wgmma.mma_async", "HGMMA"),
                                                     ("matmul_mma", "mma.sync", "HMMA")])
def test_tensor_core_instructions_belong_to_the_jnp_dot(request, which, ptx_op, sass_op):
  _, ck = request.getfixturevalue(which)
  dot_line = line_of("matmul", "jnp.dot(")
  corr = correlate.correlate(ck)
  assert corr.sass_error is None, corr.sass_error
  ptx_tc = [i for i in corr.ptx if "tensor_core" in i.categories]
  sass_tc = [i for i in corr.sass if "tensor_core" in i.categories]
  assert all(i.opcode.startswith(ptx_op) for i in ptx_tc), {i.opcode for i in ptx_tc}
  assert all(i.opcode.startswith(sass_op) for i in sass_tc), {i.opcode for i in sass_tc}
  _assert_all_on_dot(ck, ptx_tc, dot_line)
  _assert_all_on_dot(ck, sass_tc, dot_line)
  # the per-equation summary says the same
  dot = next(e for e in corr.profile.equations if e.primitive == "dot_general")
  assert dot.user_line == dot_line
  assert dot.ptx_counts["tensor_core"] == len(ptx_tc)
  assert dot.sass_counts["tensor_core"] == len(sass_tc)
  others = [e for e in corr.profile.equations if e.index != dot.index]
  assert all(e.sass_counts["tensor_core"] == 0 for e in others)


def test_softmax_exp_goes_to_the_special_function_unit(softmax_kernel):
  _, ck = softmax_kernel
  exp_line = line_of("softmax", "jnp.exp(")
  corr = correlate.correlate(ck)
  ptx_ex2 = [i for i in corr.ptx if i.opcode.startswith("ex2")]
  sass_ex2 = [i for i in corr.sass if i.opcode.startswith("MUFU.EX2")]
  assert ptx_ex2 and sass_ex2
  for ins in ptx_ex2 + sass_ex2:
    e = _eqn(ck, ins.eqn)
    assert e.primitive == "exp", (ins.text, e)
    assert _user_line(ck, ins.eqn)[1] == exp_line
  exp = next(e for e in corr.profile.equations if e.primitive == "exp")
  assert exp.sass_counts["special_function"] >= len(sass_ex2)
  assert exp.ptx_counts["special_function"] == len(ptx_ex2)


@pytest.mark.parametrize("which", ["softmax_kernel", "matmul_wgmma", "matmul_mma"])
def test_global_memory_traffic_belongs_to_get_and_swap(request, which):
  _, ck = request.getfixturevalue(which)
  corr = correlate.correlate(ck)
  for stage in (corr.ptx, corr.sass):
    loads = [i for i in stage if "global_load" in i.categories]
    stores = [i for i in stage if "global_store" in i.categories]
    assert loads and stores
    for ins in loads:
      assert ins.eqn is not None and _eqn(ck, ins.eqn).primitive in ("get", "load"), ins.text
    for ins in stores:
      assert ins.eqn is not None and _eqn(ck, ins.eqn).primitive in ("swap", "store"), ins.text


def test_inlined_helpers_resolve_to_their_call_site(softmax_kernel):
  # the max combiner lives in a helper function of the generated file and
  # tl.sum in Triton's standard.py: both inlined, attributed to their reduction
  _, ck = softmax_kernel
  corr = correlate.correlate(ck)
  max_nan = [i for i in corr.ptx if i.opcode.startswith("max.NaN")]
  assert max_nan
  assert {_eqn(ck, i.eqn).primitive for i in max_nan} == {"reduce_max"}
  shuffles = [i for i in corr.sass if "shuffle" in i.categories]
  assert shuffles
  assert {_eqn(ck, i.eqn).primitive for i in shuffles} == {"reduce_max", "reduce_sum"}


@pytest.mark.parametrize("which", ["softmax_kernel", "matmul_wgmma"])
def test_weights_account_for_every_instruction(request, which):
  _, ck = request.getfixturevalue(which)
  prof = correlate.correlate(ck).profile
  assert prof.weight_basis == "sass"
  attributed = sum(e.sass_instructions for e in prof.equations)
  assert attributed + prof.unattributed_instructions == prof.sass_instructions
  assert sum(e.weight for e in prof.equations) == pytest.approx(
      1 - prof.unattributed_instructions / prof.sass_instructions)
  # most of the code belongs to some equation
  assert prof.unattributed_instructions < 0.1 * prof.sass_instructions
  weights = [prof.equations[i].weight for i in prof.top_equations]
  assert weights == sorted(weights, reverse=True) and weights[0] > 0


def test_loop_equation_includes_its_body(matmul_wgmma):
  _, ck = matmul_wgmma
  prof = correlate.correlate(ck).profile
  scan = next(e for e in prof.equations if e.primitive == "scan")
  body = [e for e in prof.equations if e.parent == scan.index]
  assert scan.inclusive_weight == pytest.approx(scan.weight + sum(e.weight for e in body))
  dot = next(e for e in body if e.primitive == "dot_general")
  assert dot.parent == scan.index


def test_ptx_loop_depth_marks_the_k_loop(matmul_wgmma):
  _, ck = matmul_wgmma
  corr = correlate.correlate(ck)
  mma = [i for i in corr.ptx if "tensor_core" in i.categories]
  assert all(i.loop_depth >= 1 for i in mma)        # wgmma sits in the K loop of the PTX
  prologue = [i for i in corr.ptx if i.opcode.startswith("ld.param")]
  assert prologue and all(i.loop_depth == 0 for i in prologue)


@pytest.mark.parametrize("stage", correlate.STAGES)
def test_annotated_listing_of_every_stage(matmul_wgmma, stage):
  _, ck = matmul_wgmma
  dot_line = line_of("matmul", "jnp.dot(")
  lines = correlate.annotated_listing(ck, stage)
  assert lines
  annotated = [l for l in lines if l.eqn is not None]
  assert annotated, f"no line of {stage} maps to an equation"
  for l in annotated:
    assert l.primitive == ck.generated.eqns[l.eqn].primitive
    assert l.user_location and ":" in l.user_location
    assert 0 <= l.weight <= 1
  # the dot shows up as itself in every stage
  needles = {"source": "tl.dot(", "ttir": "tt.dot", "ttgir": "ttng.warp_group_dot %",
             "llir": "wgmma.mma_async", "ptx": "wgmma.mma_async", "sass": "HGMMA"}
  hits = [l for l in lines if needles[stage] in l.text]
  assert hits, f"{needles[stage]} not in the {stage} listing"
  for l in hits:
    assert l.primitive == "dot_general", (stage, l.text[:80])
    assert l.user_location.endswith(f"matmul.py:{dot_line}")
  if stage in ("ptx", "sass"):
    assert all(l.is_instruction for l in hits)


def test_annotated_source_is_the_line_map(softmax_kernel):
  _, ck = softmax_kernel
  gk = ck.generated
  lines = correlate.annotated_listing(ck, "source")
  assert [l.text for l in lines] == gk.source.splitlines()
  for l in lines:
    assert l.eqn == gk.line_map.get(l.number)


def test_unknown_stage_is_a_clear_error(softmax_kernel):
  _, ck = softmax_kernel
  with pytest.raises(ValueError, match="unknown stage 'cubin'.*source, ttir"):
    correlate.annotated_listing(ck, "cubin")


# --- the parsers on their own ----------------------------------------------------------------

def test_mlir_locations_follow_aliases_callsites_fused_and_names():
  text = "\n".join([
      '#loc = loc("/k/gen.py":10:0)',
      '#loc1 = loc(unknown)',
      '#loc2 = loc("/k/gen.py":15:28)',
      '#loc3 = loc("/lib/standard.py":263:15)',
      '#loc4 = loc("sum"(#loc2))',
      '#loc5 = loc(callsite(#loc3 at #loc4))',
      '#loc6 = loc(fused[#loc2, #loc])',
  ])
  locs = _MlirLocs(text)
  assert locs.chain("#loc5") == [Loc("/lib/standard.py", 263), Loc("/k/gen.py", 15)]
  assert locs.chain("#loc6") == [Loc("/k/gen.py", 15), Loc("/k/gen.py", 10)]
  assert locs.chain("#loc1") == []
  op = '    %x = arith.addf %a, %b : f32 loc(callsite(#loc1 at #loc4))'
  assert locs.line_chain(op) == [Loc("/k/gen.py", 15)]
  inline = '  %y = tt.load %p : tensor<4xf32> loc("/k/gen.py":12:3)'
  assert locs.line_chain(inline) == [Loc("/k/gen.py", 12)]
  assert locs.line_chain('#loc2 = loc("/k/gen.py":15:28)') is None


def test_llvm_locations_follow_inlined_at():
  text = "\n".join([
      '!1 = !DIFile(filename: "gen.py", directory: "/k")',
      '!5 = distinct !DISubprogram(name: "k", scope: !1, file: !1, line: 10)',
      '!16 = distinct !DILexicalBlockFile(scope: !5, file: !1, discriminator: 0)',
      '!21 = distinct !DILexicalBlockFile(scope: !5, file: !22, discriminator: 0)',
      '!22 = !DIFile(filename: "standard.py", directory: "/lib")',
      '!23 = !DILocation(line: 19, column: 17, scope: !16)',
      '!20 = !DILocation(line: 293, column: 36, scope: !21, inlinedAt: !23)',
  ])
  locs = _LlvmLocs(text)
  assert locs.line_chain("  %7 = fadd float %5, %6, !dbg !20") == [
      Loc("/lib/standard.py", 293), Loc("/k/gen.py", 19)]
  assert locs.line_chain("  ret void") is None


@pytest.mark.parametrize("opcode, expected", [
    ("ld.global.v4.b32", {"global_load"}), ("st.global.b16", {"global_store"}),
    ("cp.async.cg.shared.global", {"global_load", "shared_store"}),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
     {"global_load", "shared_store"}),
    ("ld.shared.b32", {"shared_load"}), ("ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                                         {"shared_load"}),
    ("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", {"tensor_core"}),
    ("wgmma.fence.sync.aligned", set()), ("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                                          {"tensor_core"}),
    ("ex2.approx.ftz.f32", {"special_function"}), ("rsqrt.approx.f32", {"special_function"}),
    ("div.full.f32", set()), ("atom.global.add.f32", {"atomic", "global_load", "global_store"}),
    ("bar.sync", {"barrier"}), ("shfl.sync.bfly.b32", {"shuffle"})])
def test_ptx_classification(opcode, expected):
  assert set(classify_ptx(opcode)) == expected


@pytest.mark.parametrize("opcode, expected", [
    ("LDG.E.128", {"global_load"}), ("STG.E", {"global_store"}),
    ("LDGSTS.E.BYPASS.LTC128B.128", {"global_load", "shared_store"}),
    ("HGMMA.64x64x16.F32.BF16", {"tensor_core"}), ("HMMA.16816.F32.BF16", {"tensor_core"}),
    ("MUFU.EX2", {"special_function"}), ("LDS.128", {"shared_load"}), ("STS", {"shared_store"}),
    ("LDSM.16.M88.4", {"shared_load"}), ("BAR.SYNC.DEFER_BLOCKING", {"barrier"}),
    ("FFMA", set()), ("REDG.E.ADD.F32.FTZ.RN.STRONG.GPU", {"atomic", "global_load",
                                                            "global_store"})])
def test_sass_classification(opcode, expected):
  assert set(classify_sass(opcode)) == expected


def test_lineinfo_finds_the_equations_of_ir_ops_and_error_locations(softmax_kernel):
  from pallas_prof.backend.compiling import lineinfo
  _, ck = softmax_kernel
  gk = ck.generated
  for stage in ("ttir", "ttgir", "llir"):
    prims = {e.primitive for e in lineinfo.equations_in_ir(gk, ck.asm[stage], stage=stage)}
    assert {"get", "exp", "swap"} <= prims, (stage, prims)
  exp_ops = lineinfo.equations_in_ir(gk, ck.asm["ttgir"], ("math.exp", "tt.extern_elementwise"))
  assert [e.primitive for e in exp_ops] == ["exp"]
  line = next(n for n, i in gk.line_map.items() if gk.eqns[i].primitive == "exp")
  message = f'error: loc("{gk.path}":{line}:7): cannot do it'
  assert lineinfo.generated_lines_in_message(gk, message) == [line]
  assert lineinfo.generated_lines_in_message(gk, 'loc("other.py":3:1)') == []
