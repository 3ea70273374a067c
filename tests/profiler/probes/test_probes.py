"""The probed variant (backend/lowering/features/probes.py), its buffer's parser and what the
profiler makes of it (probe_results.py, probing.py, instrument/probe_tracks.py), on CPU.

Triton's interpreter cannot run inline PTX, so the probed kernel is checked as
source and as PTX/SASS compiled for sm_90, and the parser is fed a buffer
written by hand the way the layout says the kernel writes it.
"""
import re

import numpy as np
import pytest

import pallas_prof
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.backend.lowering.features.probes import (HEADER_WORDS, MAX_REGIONS, ProbeLayout,
                                                          ProbeOptions, ProbeRegion, plan)
from pallas_prof.instrument.probe_tracks import perfetto_events
from pallas_prof.profiler.probes import probing
from pallas_prof.profiler.probes.probe_results import (ProbeBufferError, parse, summarize,
                                                      text_table)

from ..conftest import lowered_record, sds


@pytest.fixture(scope="module")
def softmax_probed(examples):
  rec = lowered_record(examples["softmax"].softmax, sds((64, 1000), "float32"))
  return rec, rec.relower(probes=True)


def _mark_offsets(source: str) -> list[int]:
  return [int(m) for line in source.splitlines() if line.lstrip().startswith("pp_mark")
          for m in re.findall(r"st\.global\.u64 \[\$1\+(\d+)\], %ppd0", line)]


def test_the_probed_variant_marks_each_top_level_equation_in_order(softmax_probed):
  rec, gk = softmax_probed
  layout = gk.probe_layout
  assert gk.params[-1].role == "probes" and gk.params[-1].name == layout.param
  assert gk.params[-1].shape == (layout.words,) and gk.params[-1].dtype == "uint64"
  assert re.search(rf"def softmax_kernel\(x_ref, o_ref, {layout.param}\):", gk.source)
  # one boundary per region, each writing the next clock word
  offsets = _mark_offsets(gk.source)
  assert offsets == [8 * (HEADER_WORDS + r.slot) for r in layout.regions]
  top = [e for e in gk.eqns if e.parent is None]
  kinds = [r.kind for r in layout.regions]
  assert kinds[0] == "prologue" and kinds[-1] == "epilogue"
  assert "broadcast_in_dim" not in kinds        # a view joins the equation after it
  marked = [i for r in layout.regions for i in r.eqns]
  assert marked == [e.index for e in top if e.lines]     # every equation that generated code
  # the load (8 values per thread) is a region of its own, ending in a wait for its data
  # (tests/profiler/probes/test_probes_wait.py); its first use, reduce_max, the next
  first, second = layout.regions[1:3]
  assert first.eqns == (0,) and first.kind == "load" and second.eqns == (1,)
  assert re.fullmatch(r"\[0\] get @ softmax\.py:\d+", first.label), first.label
  assert second.kind == "reduce_max" and first.line == gk.eqns[0].line
  # each mark follows its equation's last line
  lines = gk.source.splitlines()
  for region in layout.regions[1:-1]:
    last = max(gk.eqns[region.eqns[-1]].lines)
    after = "wait for the data of " if region.kind == "load" else "end of "
    assert "probe: " + after + region.label in lines[last], lines[last]


def test_the_plain_kernel_is_untouched(softmax_probed):
  rec, gk = softmax_probed
  assert "pp_" not in rec.generated.source and rec.generated.probe_layout is None
  assert rec.relower().source == rec.generated.source
  assert gk.key != rec.generated.key


def test_the_probed_variant_compiles_with_its_probes_in_order(softmax_probed):
  rec, gk = softmax_probed
  ck = compile_kernel(gk, ("cuda", 90))
  ptx = ck.ptx
  assert ptx.count("%globaltimer") == 2 and ptx.count("%smid") == 1
  assert ptx.count("%clock64") == len(gk.probe_layout.regions) + 1
  stored = [int(m) for m in re.findall(r"st\.global\.u64 \[%rd\d+\+(\d+)\], %ppd0", ptx)]
  # the entry's globaltimer at +8, then each boundary's clock at its word, in program order
  assert stored == [8] + [8 * (HEADER_WORDS + r.slot) for r in gk.probe_layout.regions]
  d = probing.static_distortion(compile_kernel(rec.generated, ("cuda", 90)), ck)
  assert d.registers_probed and d.registers_plain
  # each boundary costs a clock read and a predicated store at least
  assert d.sass_probe_instructions >= 2 * (len(gk.probe_layout.regions) + 1)
  assert d.sass_kernel_pct == pytest.approx(
      100 * ((d.sass_probed - d.sass_probe_instructions) / d.sass_plain - 1))
  # where the compilers put each region's code, by the SASS line info
  placed, notes = probing.placement(gk, ck)
  assert [p.label for p in placed] == [r.label for r in gk.probe_layout.regions]
  exp = next(p for p in placed if "exp @" in p.label)
  assert exp.instructions > 0
  for p in placed:
    if p.moved_out or p.foreign:
      assert any(n.startswith(p.label) for n in notes) or \
          p.moved_out + p.foreign <= 0.1 * (p.instructions + p.moved_out)


def test_sampling_keeps_the_buffer_small_for_any_grid():
  assert plan(ProbeOptions(), 100, 4) == (1, 1)
  assert plan(ProbeOptions(), 65536, 8) == (16, 2)
  layout = ProbeLayout(regions=(), programs=65536, program_stride=16, num_warps=8,
                       warp_stride=2, row_words=HEADER_WORDS + 1 + MAX_REGIONS)
  assert layout.sampled_programs == 4096 and layout.sampled_warps == 4
  assert layout.nbytes <= 4096 * 4 * 8 * (HEADER_WORDS + 1 + MAX_REGIONS)   # ~9 MB at most
  with pytest.raises(ValueError, match="max_programs"):
    ProbeOptions(max_programs=0)


def _layout(programs=10, stride=3, warps=4, warp_stride=2, n_regions=3):
  regions = tuple(ProbeRegion(slot=k + 1, eqns=(k,), primitive=p, kind=kind, file="/a/k.py",
                              line=10 + k)
                  for k, (p, kind) in enumerate([("get", "load"), ("scan", "loop"),
                                                 ("swap", "store")][:n_regions]))
  return ProbeLayout(regions=regions, programs=programs, program_stride=stride, num_warps=warps,
                     warp_stride=warp_stride, row_words=HEADER_WORDS + 1 + n_regions + 1)


def _write(layout, cycles, skip=(), sm_of=lambda p: p % 2, ns_per_cycle=0.5):
  """The buffer as the probed kernel writes it: per sampled program and warp, a row."""
  words = np.zeros(layout.words, np.uint64).reshape(layout.rows, layout.row_words)
  for row in range(layout.rows):
    program = (row // layout.sampled_warps) * layout.program_stride
    if program in skip:
      continue
    t0 = 1_000_000 + 700 * program
    clocks = np.cumsum([5000 + program] + list(cycles))
    words[row, 0] = (sm_of(program) << 32) | (program + 1)
    words[row, 1] = t0
    words[row, 2] = t0 + int((clocks[-1] - clocks[0]) * ns_per_cycle)
    words[row, HEADER_WORDS:HEADER_WORDS + len(clocks)] = clocks
  return words.reshape(-1)


def test_the_parser_reads_what_the_layout_says():
  layout = _layout()
  rows = parse(_write(layout, [100, 700, 200]), layout)
  assert layout.sampled_programs == 4 and list(np.unique(rows.program)) == [0, 3, 6, 9]
  assert list(rows.warp[:2]) == [0, 2] and rows.unwritten == 0
  result = summarize(rows, layout)
  assert [round(r.share, 3) for r in result.regions] == [0.1, 0.7, 0.2]
  assert result.regions[1].cycles_median == 700 and result.regions[1].ns_median == 350
  assert result.ns_per_cycle == pytest.approx(0.5)
  assert result.sms == 2 and len(result.ctas) == 4
  cta = result.ctas[1]
  assert (cta.program, cta.sm, cta.start_ns) == (3, 1, 2100)
  assert cta.boundaries_ns == pytest.approx([2100, 2150, 2500, 2600])
  assert "700" in text_table(result)


def test_the_parser_rejects_a_buffer_of_another_layout():
  layout = _layout()
  with pytest.raises(ProbeBufferError, match="layout says"):
    parse(np.zeros(layout.words + 1, np.uint64), layout)
  words = _write(layout, [1, 2, 3]).reshape(layout.rows, layout.row_words)
  words[0, 0] = (1 << 32) | 6          # program 5 where program 0 belongs
  with pytest.raises(ProbeBufferError, match="holds program 5"):
    parse(words.reshape(-1), layout)
  with pytest.raises(ProbeBufferError, match="no sampled warp"):
    summarize(parse(np.zeros(layout.words, np.uint64), layout), layout)


def test_rows_never_written_are_counted_not_parsed():
  layout = _layout()
  result = summarize(parse(_write(layout, [10, 10, 10], skip={3}), layout), layout)
  assert result.rows == 6 and "2 sampled rows were never written" in result.notes


def test_sm_tracks_nest_regions_inside_ctas_and_split_overlapping_ctas():
  layout = _layout(programs=4, stride=1, warps=1, warp_stride=1)
  # every program on SM 0: with 700 ns between entries and ~2,500 ns per CTA they overlap
  result = summarize(parse(_write(layout, [1000, 3000, 1000], sm_of=lambda p: 0), layout),
                     layout)
  events = perfetto_events("k#1", result)
  ctas = [e for e in events if e.get("cat") == "cta"]
  names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
  assert len(ctas) == 4 and len({e["tid"] for e in ctas}) == result.max_concurrent_ctas > 1
  assert sorted(names.values())[:2] == ["SM 0", "SM 0 #2"]
  for cta in ctas:
    inside = [e for e in events if e.get("cat") == "probe" and e["tid"] == cta["tid"]
              and cta["ts"] <= e["ts"] < cta["ts"] + cta["dur"]]
    assert [e["name"] for e in inside] == [r.label for r in layout.regions]
    assert all(e["ts"] + e["dur"] <= cta["ts"] + cta["dur"] + 1e-9 for e in inside)
  # same tracks from report.json's dict
  assert perfetto_events("k#1", result.to_dict()) == events


class _Eq:
  def __init__(self, index, weight, share_at, parent=None):
    self.index, self.weight, self.inclusive_weight = index, weight, weight
    self.share_at, self.parent = share_at, parent


class _Attribution:
  """Samples where the warps stood: 10 % at the load, 5 % at the loop and 65 % in its
  body, 20 % at the store; charged (the load's waits moved to it): 50 / 30 / 20 %."""
  equations = [_Eq(0, 0.5, 0.1), _Eq(1, 0.3, 0.05), _Eq(3, 0.0, 0.65, parent=1),
               _Eq(2, 0.2, 0.2)]


class _Disagreeing:
  equations = [_Eq(0, 0.5, 0.5), _Eq(1, 0.3, 0.3), _Eq(2, 0.2, 0.2)]


def test_reconciliation_lists_disagreements_with_the_samples():
  layout = _layout(stride=1)
  result = summarize(parse(_write(layout, [100, 700, 200]), layout), layout)
  rec = probing.reconcile(result, _Attribution(), "pc_sampling", None)
  assert [r.sampling_share for r in rec.regions] == [0.5, 0.3, 0.2]
  assert [r.stood_share for r in rec.regions] == pytest.approx([0.1, 0.7, 0.2])
  assert rec.disagreements == []         # the probes agree with where the warps stood
  rec = probing.reconcile(result, _Disagreeing(), "pc_sampling", None)
  assert rec.regions[1].difference_points == pytest.approx(40.0)
  assert len(rec.disagreements) == 2 and rec.disagreements[0].startswith("[0] get")
  static = probing.reconcile(result, _Attribution(), "static", None)
  assert static.disagreements == ["no measured weights to set beside the probes (basis: static)"]


def test_distortion_names_the_figures_to_distrust():
  d = probing.Distortion(runtime_plain_s=1e-3, runtime_probed_s=1.2e-3, runtime_pct=20.0,
                         registers_plain=40, registers_probed=40, sass_plain=100,
                         sass_probed=105, sass_pct=5.0, distrust=[])
  assert len(probing.distrust(d)) == 1 and "per-region ns" in probing.distrust(d)[0]
  d.runtime_pct = 2.0
  assert probing.distrust(d) == []
  d.sass_kernel_pct, d.registers_probed = -12.0, 48
  assert [w.split()[0] for w in probing.distrust(d)] == ["around", "registers"]


def _probed_report(tmp_path):
  from pallas_prof.cli.report import RunReport
  from pallas_prof.profiler.schema import KernelProfile, ProfileReport
  layout = _layout(stride=1)
  result = summarize(parse(_write(layout, [100, 700, 200]), layout), layout)
  result.distortion = probing.Distortion(
      runtime_plain_s=100e-6, runtime_probed_s=125e-6, runtime_pct=25.0, registers_plain=32,
      registers_probed=34, sass_plain=400, sass_probed=430, sass_pct=7.5, distrust=[])
  result.distortion.distrust = probing.distrust(result.distortion)
  result.distortion_pct = 25.0
  result.reconciliation = probing.reconcile(result, _Disagreeing(), "pc_sampling", 3e-6)
  kp = KernelProfile(label="k#1", name="k", in_avals=[], out_avals=[], static=None, work=None,
                     probes=result)
  profile = ProfileReport(gpu_present=True, message="replayed", device=None, ceilings=None,
                          kernels=[kp], notes=[], created=0.0)
  run = RunReport.from_dict({"schema": "pallas-prof/run/1", "script": str(tmp_path / "k.py"),
                             "exit_code": 0, "kernels": [{"label": "k#1", "name": "k",
                                                          "grid": [10], "num_warps": 4,
                                                          "num_stages": 1}],
                             "profiles": [profile.to_dict()]})
  return run, result


def test_report_json_keeps_the_probes_typed_and_the_report_shows_them(tmp_path):
  from rich.console import Console
  run, result = _probed_report(tmp_path)
  back = run.kernel_profile("k#1").probes
  assert type(back) is type(result) and back.distortion_pct == 25.0
  assert [r.share for r in back.regions] == pytest.approx([r.share for r in result.regions])
  assert back.reconciliation.regions[1].sampling_share == 0.3
  data = run.to_dict()["profile"]["kernels"][0]["probes"]
  assert data["distortion_pct"] == 25.0 and len(data["regions"]) == 3
  for width in (80, 160):
    con = Console(width=width, no_color=True, record=True, markup=False)
    con.print(run)
    text = con.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
  assert "probes of k#1" in text and "[1] scan @ k.py:11" in text and "70.0%" in text
  assert "runtime 100.0 → 125.0 µs (+25.0%)" in text
  assert "distrust: the probed kernel runs +25.0%" in text
  assert "disagrees: [0] get @ k.py:10: probes 10.0%, pc_sampling 50.0% where the" in text


def test_the_sm_tracks_join_the_runs_trace(tmp_path):
  import json
  from pallas_prof.instrument.probe_tracks import add_to_trace
  run, result = _probed_report(tmp_path)
  path = tmp_path / "trace.perfetto.json"
  path.write_text(json.dumps({"traceEvents": [{"name": "kernel k", "ph": "X", "pid": 1,
                                               "tid": 1, "ts": 0, "dur": 5}]}))
  add_to_trace(str(path), run.profiles)
  events = json.loads(path.read_text())["traceEvents"]
  assert events[0]["name"] == "kernel k"           # the spans stay
  ctas = [e for e in events if e.get("cat") == "cta"]
  assert len(ctas) == result.sampled_programs and all(e["pid"] != 1 for e in ctas)


def test_measure_replays_the_variant_with_its_buffer_and_times_both_alike(softmax_probed,
                                                                         fake_driver):
  """probing.measure on the host-memory stand-in for the driver: the probed kernel gets the
  buffer at its last parameter, zeroed before the launch read back; the "kernel" writes
  its rows as the layout says; scripted event times (1.0 ms plain, 1.25 ms probed) give
  the distortion."""
  import types
  from pallas_prof.backend.compiling.compile import assemble_cubin
  from ..fake_cuda import script_probe_replay
  rec, gk = softmax_probed
  plain = assemble_cubin(compile_kernel(rec.generated, ("cuda", 90)))
  layout = gk.probe_layout
  fake = fake_driver(None, l2_bytes=1 << 20)
  zeroed_before_read = []

  def fill(buffer, shared):
    zeroed_before_read.append(not buffer.any())
    buffer[:] = _write(layout, [10 * (k + 1) for k in range(len(layout.regions))],
                       sm_of=lambda p: p % 7)

  kinds = script_probe_replay(fake, "softmax_kernel", len(gk.params), layout.words, fill,
                              probed_ms=1.25)
  target = types.SimpleNamespace(name="softmax_kernel", compiled=plain, aliases=(),
                                 relower=rec.relower)
  result = probing.measure(target, 0, min_launches=20, min_seconds=0.0)
  assert zeroed_before_read[3] and result.rows == layout.rows and result.sms == 7
  shares = [r.share for r in result.regions]
  weights = [10 * (k + 1) for k in range(len(layout.regions))]
  assert shares == pytest.approx([w / sum(weights) for w in weights])
  d = result.distortion
  assert (d.runtime_plain_s, d.runtime_probed_s) == pytest.approx((1e-3, 1.25e-3))
  assert result.distortion_pct == pytest.approx(25.0) and "per-region ns" in d.distrust[0]
  # alternated: plain, probed, plain, probed timing windows
  timed = [k for k in kinds[4:] if k != "flush"]
  runs = [k for i, k in enumerate(timed) if i == 0 or timed[i - 1] != k]
  assert runs == ["plain", "probed", "plain", "probed"]
  assert [p.label for p in result.placement] == [r.label for r in layout.regions]


def _control_flow_kernel(x_ref, o_ref):
  import jax
  from jax.experimental import pallas as pl
  x = x_ref[...]
  y = jax.lax.fori_loop(0, 5, lambda i, v: v * 0.5 + 1.0, x)
  y = jax.lax.cond(pl.program_id(1) == 0, lambda v: v + 1.0, lambda v: v - 1.0, y)
  o_ref[...] = y


def test_loops_and_conditionals_are_regions_of_a_two_dimensional_grid(installed):
  import jax
  from jax.experimental import pallas as pl
  call = pl.pallas_call(_control_flow_kernel, grid=(3, 5),
                        in_specs=[pl.BlockSpec((8, 24), lambda i, j: (i, j))],
                        out_specs=pl.BlockSpec((8, 24), lambda i, j: (i, j)),
                        out_shape=jax.ShapeDtypeStruct((24, 120), "float32"))
  rec = lowered_record(jax.jit(call), sds((24, 120), "float32"))
  gk = rec.relower(probes=pallas_prof.ProbeOptions(max_programs=4, max_warps=2))
  layout = gk.probe_layout
  # the load (a few values per thread) is a region waited for; the scalar program_id
  # and == the cond tests join the cond's region
  assert [r.kind for r in layout.regions] == ["prologue", "load", "loop", "conditional",
                                              "store", "epilogue"]
  assert layout.regions[1].label.startswith("[0] get @ ")
  cond = layout.regions[3]
  assert [gk.eqns[i].primitive for i in cond.eqns][-1] == "cond" and len(cond.eqns) >= 3
  assert cond.label.startswith(f"[{cond.eqns[-1]}] cond @ test_probes.py:")
  # the program's linear index over the launch grid, every 4th of 15 sampled
  assert "pp_program = tl.program_id(0) + 3 * (tl.program_id(1) + 5 * tl.program_id(2))" \
      in gk.source
  assert (layout.programs, layout.program_stride, layout.sampled_programs) == (15, 4, 4)
  assert (layout.warp_stride, layout.sampled_warps) == (2, 2)
  assert "rem.u32 %ppt3, %ppt2, 2;" in gk.source
  ck = compile_kernel(gk, ("cuda", 90))
  assert ck.ptx.count("%clock64") == len(layout.regions) + 1


def test_regions_past_the_limit_merge_into_the_last(installed):
  import jax
  from jax.experimental import pallas as pl

  def long_kernel(x_ref, o_ref):
    v = x_ref[...]
    for k in range(MAX_REGIONS + 10):
      v = v * 1.01 + float(k)          # two equations each
    o_ref[...] = v

  call = pl.pallas_call(long_kernel, out_shape=jax.ShapeDtypeStruct((128,), "float32"))
  rec = lowered_record(jax.jit(call), sds((128,), "float32"))
  gk = rec.relower(probes=True)
  layout = gk.probe_layout
  assert len(layout.regions) == MAX_REGIONS
  assert layout.row_words == HEADER_WORDS + 1 + MAX_REGIONS
  last = layout.regions[-1]
  assert len(last.eqns) > 10 and last.slot == MAX_REGIONS and "(+" in last.label
  top = [e.index for e in gk.eqns if e.parent is None and e.lines]
  assert [i for r in layout.regions for i in r.eqns] == top
  assert max(_mark_offsets(gk.source)) == 8 * (HEADER_WORDS + MAX_REGIONS)


def test_the_profile_span_carries_the_probe_shares(tmp_path):
  pytest.importorskip("opentelemetry")
  from pallas_prof.instrument import conventions as cv
  from pallas_prof.instrument.span_attributes import profile_attributes
  run, result = _probed_report(tmp_path)
  attrs = profile_attributes(run.kernel_profile("k#1"))
  assert attrs[cv.PROFILE_PROBES] == ["[0] get @ k.py:10: 10.0%", "[1] scan @ k.py:11: 70.0%",
                                      "[2] swap @ k.py:12: 20.0%"]
  assert attrs[cv.PROFILE_PROBES_DISTORTION_PCT] == 25.0


def test_the_known_answer_checks_read_the_probe_regions():
  from ..known_answer_checks import probe_copy, probe_two_loops

  def region(kind, share, loads=()):
    return {"kind": kind, "share": share, "loads": list(loads), "label": kind}

  copy = {"regions": [region("prologue", 0.05), region("mul", 0.5, ["[0] get"]),
                      region("add", 0.2), region("store", 0.25)]}
  assert probe_copy(copy)[0] and "75.0%" in probe_copy(copy)[1]
  assert "2 region(s)" in probe_copy(copy)[1]
  copy["regions"][2]["share"], copy["regions"][3]["share"] = 0.3, 0.15
  assert not probe_copy(copy)[0]
  # two loops: the shares, then per SM the first and the last CTA's ratio
  two = {"regions": [region("prologue", 0.0), region("loop", 0.25, ["[0] get"]),
                     region("loop", 0.75), region("store", 0.0)],
         "ctas": [{"sm": 0, "start_ns": 0, "boundaries_ns": [0, 1, 11, 41, 42]},
                  {"sm": 0, "start_ns": 5, "boundaries_ns": [5, 6, 46, 66, 67]}]}
  ok, what = probe_two_loops(two)
  assert not ok and "no 'alone' reading" in what     # the work is checked alone
  assert "ratio 3.00" in what and "first to start on each of 1 SMs: 3.00" in what
  assert "the last: 0.50" in what
  two["alone"] = {"ctas_per_sm_beside": 16}
  for r, alone in zip(two["regions"], (0.0, 0.26, 0.74, 0.0)):
    r["alone_share"] = alone
  ok, what = probe_two_loops(two)
  assert ok and "one CTA per SM: 26.0% and 74.0%, ratio 2.85" in what
  two["regions"][1]["alone_share"] = 0.5
  assert not probe_two_loops(two)[0]


def test_report_html_has_the_probes_section_with_the_sm_timeline(tmp_path):
  pytest.importorskip("jinja2")
  from pallas_prof.cli import html
  run, result = _probed_report(tmp_path)
  html.write_or_warn(str(tmp_path), run)
  page = (tmp_path / "report.html").read_text()
  assert "time inside the kernel: probes (3 regions)" in page
  assert "[1] scan @ k.py:11" in page and "where warps stood" in page
  assert page.count('class="cta"') == len(result.ctas)
  assert "distrust: the probed kernel runs +25.0%" in page


@pytest.mark.parametrize("rows, regions", [
    (1, ["prologue", "load", "mul", "add", "store", "epilogue"]),    # 8 values a thread: split
    (16, ["prologue", "store", "epilogue"]),                   # 128 a thread: one region
])
def test_an_elementwise_chain_over_many_values_per_thread_is_not_split(installed, rows, regions):
  """A probe after an elementwise equation keeps its whole result live across the probe;
  above MAX_LIVE_VALUES values per thread the chain joins the store that ends it."""
  import jax
  from jax.experimental import pallas as pl
  from pallas_prof.backend.lowering.features.probes import MAX_LIVE_VALUES

  def chain(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 1.5 + 0.25

  call = pl.pallas_call(chain, grid=(2,), in_specs=[pl.BlockSpec((rows, 1024), lambda i: (i, 0))],
                        out_specs=pl.BlockSpec((rows, 1024), lambda i: (i, 0)),
                        out_shape=jax.ShapeDtypeStruct((2 * rows, 1024), "float32"),
                        compiler_params=pallas_prof.CompilerParams(num_warps=4))
  rec = lowered_record(jax.jit(call), sds((2 * rows, 1024), "float32"))
  layout = rec.relower(probes=True).probe_layout
  assert (rows * 1024 / 128 > MAX_LIVE_VALUES) == (rows == 16)
  assert [r.kind for r in layout.regions] == regions
  # the load: its own region (waited for) at 8 values a thread, with its first use at 128
  assert bool(layout.regions[1].loads) == (rows == 16)
  assert layout.regions[1].label.startswith("[0] get @ ")


def test_a_kernel_without_its_pallas_call_says_probes_need_it():
  import types
  from pallas_prof.profiler.driver import ProfilerError
  target = types.SimpleNamespace(name="k", compiled=None, aliases=(), relower=None)
  with pytest.raises(ProfilerError, match="probes need the pallas_call it came from"):
    probing.variant(target)


def test_a_grid_of_no_programs_is_refused_in_words(installed):
  """64 // 128 programs: nothing runs, so nothing to probe, and the report says why (it
  said 'probes: ZeroDivisionError: integer division or modulo by zero': the sampling
  stride of no programs was 0)."""
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  from pallas_prof.profiler.driver import ProfilerError

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1

  call = jax.jit(pl.pallas_call(kernel, grid=(64 // 128,),
                                in_specs=[pl.BlockSpec((128, 8), lambda i: (i, 0))],
                                out_specs=pl.BlockSpec((128, 8), lambda i: (i, 0)),
                                out_shape=jax.ShapeDtypeStruct((64, 8), jnp.float32),
                                name="no_programs"))
  with pytest.warns(pallas_prof.UncoveredOutputWarning):
    rec = lowered_record(call, sds((64, 8), "float32"))
  rec.compiled = compile_kernel(rec.generated, ("cuda", 90))
  with pytest.raises(ProfilerError, match=r"grid \(0,\) has no programs"):
    probing.variant(rec)
  assert plan(ProbeOptions(), 0, 4) == (1, 1)
  assert ProbeLayout(regions=(), programs=0, program_stride=1, num_warps=4, warp_stride=1,
                     row_words=HEADER_WORDS + 2).rows == 0
