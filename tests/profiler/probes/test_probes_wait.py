"""A run of loads is a probe region of its own, ended by a probe that waits for its data;
and the 'alone' reading: the probed variant again with one CTA per SM (CPU: sm_90 SASS
compiled here, and the host-memory stand-in for the driver)."""
import re
import types

import numpy as np
import pytest

import pallas_prof
from pallas_prof.backend.compiling.compile import assemble_cubin, compile_kernel
from pallas_prof.profiler.probes import probing
from pallas_prof.profiler.static.correlate import correlate
from pallas_prof.profiler.probes.probe_results import text_table

from ..conftest import lowered_record, sds
from ..fake_cuda import script_probe_replay
from .test_probes import _write

# what the wait compares each loaded value with (backend/lowering/features/probes.py: _NEVER)
PATTERNS = ("0x7fc00123", "0x123")


def _copy_call(dtype, cols=96, rows=8):
  import jax
  from jax.experimental import pallas as pl

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]

  return pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec((rows, cols), lambda i: (i, 0))],
                        out_specs=pl.BlockSpec((rows, cols), lambda i: (i, 0)),
                        out_shape=jax.ShapeDtypeStruct((2 * rows, cols), dtype),
                        compiler_params=pallas_prof.CompilerParams(num_warps=4))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "float64", "bool"])
def test_the_load_region_ends_after_the_warp_has_its_data(installed, dtype):
  """In the SASS, something that reads the loaded registers (the never-taken store's
  compare) lies between the loads and the clock read that ends the load's region, so
  the scoreboard wait for the data is inside the region."""
  import contextlib
  import jax
  with jax.enable_x64(True) if dtype == "float64" else contextlib.nullcontext():
    rec = lowered_record(jax.jit(_copy_call(dtype)), sds((16, 96), dtype))
    gk = rec.relower(probes=True)
  kinds = [r.kind for r in gk.probe_layout.regions]
  assert kinds == ["prologue", "load", "store", "epilogue"], kinds
  waits = [line for line in gk.source.splitlines() if line.lstrip().startswith("pp_wait")]
  assert len(waits) == 1
  assert ("bitcast=True" in waits[0]) == (dtype != "bool")
  sass = [i.text for i in correlate(compile_kernel(gk, ("cuda", 90))).sass]
  clocks = [n for n, t in enumerate(sass) if "SR_CLOCKLO" in t]
  assert len(clocks) == len(kinds) + 1
  loads = [n for n, t in enumerate(sass) if "LDG" in t]
  end_of_load = clocks[2]             # entry, end of the prologue, end of the load region
  assert loads and max(loads) < end_of_load, (loads, clocks)
  between = sass[max(loads) + 1:end_of_load]
  assert any(p in t for t in between for p in PATTERNS), between


def test_a_run_of_loads_and_their_index_math_is_one_region_waited_for_once(installed):
  """Both loads are issued before the first wait (their latencies overlap as in the
  plain kernel); the scalar index math between them does not end the run."""
  import jax
  from jax.experimental import pallas as pl

  def kernel(x_ref, w_ref, o_ref):
    x = x_ref[...]
    j = pl.program_id(0) * 8
    w = w_ref[pl.ds(j, 8), :]
    o_ref[...] = x * w

  call = pl.pallas_call(kernel, grid=(2,),
                        in_specs=[pl.BlockSpec((8, 40), lambda i: (i, 0)),
                                  pl.BlockSpec((16, 40), lambda i: (0, 0))],
                        out_specs=pl.BlockSpec((8, 40), lambda i: (i, 0)),
                        out_shape=jax.ShapeDtypeStruct((16, 40), "float32"))
  rec = lowered_record(jax.jit(call), sds((16, 40), "float32"), sds((16, 40), "float32"))
  gk = rec.relower(probes=True)
  regions = gk.probe_layout.regions
  assert [r.kind for r in regions] == ["prologue", "load", "mul", "store", "epilogue"]
  run = regions[1]
  assert [gk.eqns[i].primitive for i in run.eqns][0] == "get"
  assert [gk.eqns[i].primitive for i in run.eqns].count("get") == 2
  assert re.fullmatch(r"\[0\] get @ test_probes_wait\.py:\d+ \(\+\d+\)", run.label), run.label
  lines = gk.source.splitlines()
  waits = [n + 1 for n, line in enumerate(lines) if line.lstrip().startswith("pp_wait")]
  last_load = max(max(gk.eqns[i].lines) for i in run.eqns if gk.eqns[i].primitive == "get")
  assert len(waits) == 2 and min(waits) > last_load


def test_a_load_too_big_to_wait_for_shares_its_first_uses_region(installed):
  """128 values per thread: a wait would hold them all live across the probe, so the
  load goes with its first use, named after both (as before the wait existed)."""
  import jax
  rec = lowered_record(jax.jit(_copy_call("float32", cols=1024, rows=16)),
                       sds((32, 1024), "float32"))
  gk = rec.relower(probes=True)
  assert "pp_wait" not in gk.source
  store = gk.probe_layout.regions[1]
  assert store.kind == "store" and store.loads and store.label.startswith("[0] get @ ")


# --- alone: one CTA per SM ---------------------------------------------------------------------

def _replay(fake, gk, layout, beside, alone, name):
  """The stand-in's probed kernel writes rows whose region cycles are `beside`, or `alone`
  when the launch asks for more than half an SM's shared memory (Replayer.isolate)."""
  script_probe_replay(fake, name, len(gk.params), layout.words,
                      lambda buffer, shared: buffer.__setitem__(
                          slice(None), _write(layout, alone if shared > 116 * 1024 else beside)))


def _two_loops_replay(installed, fake_driver, beside, alone):
  """The two-loop kernel's (target, probe layout, stand-in driver), its replay scripted."""
  _, target = _two_loops_target(installed)
  gk, _ = probing.variant(target)
  fake = fake_driver(None, l2_bytes=1 << 20)
  _replay(fake, gk, gk.probe_layout, beside, alone, target.name)
  return target, gk.probe_layout, fake


def _two_loops_target(installed):
  import jax
  from ..known_answer import _rows, ka_two_kernel
  # 160 programs: more than the stand-in's 132 SMs hold at once
  rec = lowered_record(jax.jit(lambda y: _rows((160, 256), 1, ka_two_kernel, y)),
                       sds((160, 256), "float32"))
  plain = assemble_cubin(compile_kernel(rec.generated, ("cuda", 90)))
  return rec, types.SimpleNamespace(name=rec.generated.name, compiled=plain, aliases=(),
                                    relower=rec.relower)


def test_the_alone_reading_launches_one_cta_per_sm_and_reports_each_regions_slowdown(
    installed, fake_driver):
  # beside others the first loop holds the waits (ratio 1:0.5); alone the work, 1:3
  beside = [10, 100, 600, 300, 5, 20, 1]
  alone = [10, 90, 100, 300, 5, 20, 1]
  target, layout, fake = _two_loops_replay(installed, fake_driver, beside, alone)
  kinds = [r.kind for r in layout.regions]
  assert kinds == ["prologue", "load", "loop", "loop", "add", "store", "epilogue"], kinds
  result = probing.measure(target, 0, min_launches=10, min_seconds=0.0)
  # the last launch asked for all a block may have: the stand-in's opt-in less static
  assert fake.launches[-1][2] == 232448
  assert "cuFuncSetAttribute dynamic 232448" in fake.calls
  a = result.alone
  assert a is not None and a.ctas_per_sm_alone == 1 and a.ctas_per_sm_beside == 16
  assert a.ctas_per_sm_plain == 16 and not any(n.startswith("occupancy") for n in result.notes)
  loops = [r for r in result.regions if r.kind == "loop"]
  assert loops[1].share / loops[0].share == pytest.approx(0.5)
  assert loops[1].alone_share / loops[0].alone_share == pytest.approx(3.0)
  assert loops[0].beside_over_alone == pytest.approx(6.0)
  assert loops[1].beside_over_alone == pytest.approx(1.0)
  table = text_table(result)
  assert "beside/alone" in table and "6.00x" in table and "one CTA per SM (16 at once" in table
  d = result.to_dict()
  assert d["alone"]["ctas_per_sm_alone"] == 1
  assert d["regions"][2]["beside_over_alone"] == pytest.approx(6.0)
  # report.json's reader gets the same figures back, typed
  from pallas_prof.serial import decode
  from pallas_prof.profiler.probe_schema import ProbeResult
  back = decode(ProbeResult, d)
  assert back.alone.ctas_per_sm_beside == 16
  assert back.regions[2].beside_over_alone == pytest.approx(6.0)
  from pallas_prof.cli.html.probes import probes_view
  view = probes_view(back)
  assert "beside/alone" in view.header and any("6.00x" in row for row in view.rows)


def test_a_kernel_that_runs_one_cta_per_sm_already_gets_a_note_not_a_second_reading(
    installed, fake_driver, monkeypatch):
  cycles = [10, 100, 100, 300, 5, 20, 1]
  target, layout, fake = _two_loops_replay(installed, fake_driver, cycles, cycles)
  monkeypatch.setattr(fake, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                      lambda fn, threads, shared: (0, 1), raising=False)
  result = probing.measure(target, 0, min_launches=10, min_seconds=0.0)
  assert result.alone is None and all(r.alone_share is None for r in result.regions)
  assert any("one CTA per SM already" in n for n in result.notes)
  assert "beside/alone" not in text_table(result)


def test_a_region_of_loads_that_waits_is_reconciled_with_the_charged_weight():
  """Its region holds the loads' wait, which the samples see at the first use: the
  charged weight (waits moved to the loads) is what it compares with."""
  import dataclasses
  from pallas_prof.backend.lowering.features.probes import ProbeLayout
  from pallas_prof.profiler.probes.probe_results import parse, summarize
  from .test_probes import _Attribution, _layout
  plain = _layout(stride=1)
  regions = (dataclasses.replace(plain.regions[0], waits=True),) + plain.regions[1:]
  layout = ProbeLayout(**{**{f.name: getattr(plain, f.name)
                             for f in dataclasses.fields(plain)}, "regions": regions})
  # probes: load 50 %, loop 30 %, store 20 %: the charged weight exactly
  result = summarize(parse(_write(layout, [500, 300, 200]), layout), layout)
  assert [r.waits for r in result.regions] == [True, False, False]
  rec = probing.reconcile(result, _Attribution(), "pc_sampling", None)
  assert rec.compared_with == "charged" and rec.disagreements == []
  assert [r.difference_points for r in rec.regions] == pytest.approx([0.0, 0.0, 0.0])
  # the same shares without the wait: where the warps stood (10 / 70 / 20 %) disagrees
  result = summarize(parse(_write(plain, [500, 300, 200]), plain), plain)
  rec = probing.reconcile(result, _Attribution(), "pc_sampling", None)
  assert rec.compared_with == "stood" and len(rec.disagreements) == 2
  assert "where the warps stood" in rec.disagreements[0]


def _probed(kernel, in_shapes, out_shape, block_specs=None, warps=4):
  import jax
  from jax.experimental import pallas as pl
  call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out_shape, "float32"),
                        compiler_params=pallas_prof.CompilerParams(num_warps=warps),
                        **(block_specs or {}))
  rec = lowered_record(jax.jit(call), *[sds(s, "float32") for s in in_shapes])
  return rec.relower(probes=True)


def test_work_carried_into_a_run_of_loads_keeps_the_run_unwaited(installed):
  """An exp too big to end its own region joins the next; a load after it would have
  made a 'load' region holding the exp. The run then goes with its first use instead."""
  import jax.numpy as jnp

  def kernel(y_ref, x_ref, o_ref):
    y = y_ref[...]                       # 16 x 1024: 128 values per thread
    o_ref[...] = y
    z = jnp.exp(y)
    x = x_ref[0:1, :]
    o_ref[...] = z * x

  gk = _probed(kernel, [(16, 1024), (16, 1024)], (16, 1024))
  prims = lambda r: [gk.eqns[i].primitive for i in r.eqns]  # noqa: E731
  holding_exp = [r for r in gk.probe_layout.regions if "exp" in prims(r)]
  assert len(holding_exp) == 1 and not holding_exp[0].waits
  assert holding_exp[0].kind != "load", holding_exp[0].label
  assert not any(r.waits and set(prims(r)) - {"get", "mul", "add", "convert_element_type"}
                 for r in gk.probe_layout.regions)


def test_an_equation_of_no_operands_ends_the_run_of_loads(installed):
  import jax
  import jax.numpy as jnp

  def kernel(x_ref, o_ref):
    x = x_ref[...]
    i = jax.lax.broadcasted_iota(jnp.float32, x.shape, 1)
    o_ref[...] = x + i

  gk = _probed(kernel, [(8, 128)], (8, 128))
  load = gk.probe_layout.regions[1]
  assert load.kind == "load" and load.waits and "pp_wait" in gk.source
  assert [gk.eqns[i].primitive for i in load.eqns] == ["get"]


def test_the_limit_counts_the_padded_block_the_registers_hold(installed):
  """40 x 200 float32 over 4 warps is 62.5 values a thread, but Triton holds the padded
  64 x 256 block: 128 a thread, too many to keep live across a wait."""
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0

  gk = _probed(kernel, [(40, 200)], (40, 200))
  assert "pp_wait" not in gk.source
  assert not any(r.waits for r in gk.probe_layout.regions)
  small = _probed(kernel, [(8, 128)], (8, 128))
  assert "pp_wait" in small.source


@pytest.mark.parametrize("how", ["still two CTAs per SM", "the driver refuses", "a small grid"])
def test_without_an_alone_reading_the_report_says_why_and_keeps_the_rest(
    installed, fake_driver, monkeypatch, how):
  cycles = [10, 100, 600, 300, 5, 20, 1]
  target, layout, fake = _two_loops_replay(installed, fake_driver, cycles, [1] * len(cycles))
  if how == "still two CTAs per SM":
    monkeypatch.setattr(fake, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                        lambda fn, threads, shared: (0, 2 if shared > 116 * 1024 else 16),
                        raising=False)
  elif how == "the driver refuses":
    from ..fake_cuda import CUresult

    def refuse(fn, attr, value):
      if attr == "dynamic" and value > 116 * 1024:
        return (CUresult.CUDA_ERROR_INVALID_VALUE,)
      return (CUresult.CUDA_SUCCESS,)
    monkeypatch.setattr(fake, "cuFuncSetAttribute", refuse, raising=False)
  else:
    attribute = fake.cuDeviceGetAttribute
    monkeypatch.setattr(fake, "cuDeviceGetAttribute",
                        lambda attr, dev: (0, 1000) if attr == "sms" else attribute(attr, dev),
                        raising=False)
  result = probing.measure(target, 0, min_launches=10, min_seconds=0.0)
  assert result.alone is None and all(r.alone_share is None for r in result.regions)
  why = {"still two CTAs per SM": "left 2 CTAs per SM",
         "the driver refuses": "no 'alone' reading: CudaError",
         "a small grid": "CTAs fit on the 1000 SMs at once"}[how]
  assert any(why in n for n in result.notes), result.notes
  # the reading beside the others is whole
  loops = [r for r in result.regions if r.kind == "loop"]
  assert loops[1].share / loops[0].share == pytest.approx(0.5)
  assert result.distortion is not None and result.distortion.runtime_plain_s > 0


def test_an_occupancy_the_probes_changed_is_said(installed, fake_driver, monkeypatch):
  cycles = [10, 100, 600, 300, 5, 20, 1]
  target, layout, fake = _two_loops_replay(installed, fake_driver, cycles, cycles)
  functions = []
  get_function = fake.cuModuleGetFunction

  def cuModuleGetFunction(module, name):
    result, handle = get_function(module, name)
    functions.append(int(handle))
    return result, handle
  monkeypatch.setattr(fake, "cuModuleGetFunction", cuModuleGetFunction, raising=False)
  # the probed kernel (loaded first) holds 12 CTAs an SM, the plain one 16
  monkeypatch.setattr(fake, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                      lambda fn, threads, shared: (0, 1 if shared > 116 * 1024 else
                                                   12 if int(fn) == functions[0] else 16),
                      raising=False)
  result = probing.measure(target, 0, min_launches=10, min_seconds=0.0)
  assert result.alone.ctas_per_sm_beside == 12 and result.alone.ctas_per_sm_plain == 16
  assert any(n.startswith("occupancy: the probed kernel runs 12 CTAs per SM, the kernel "
                          "without probes 16") for n in result.notes), result.notes
