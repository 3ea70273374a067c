"""The views read typed records (issue 42, item 5): a kernel's resources, a compile failure,
where a run happened and a kernel's attribution reach the terminal, the page and `show`
as typed values (cli/summary.py, show.Weights), built once from the run's records."""
from __future__ import annotations

import types

from rich.console import Console

from pallas_prof.cli import processes, show
from pallas_prof.cli.html import model
from pallas_prof.cli.report import RunReport
from pallas_prof.cli.summary import CompileFailure, Origin, Resources, summaries
from pallas_prof.cli.terminal.render import compile_failure_lines, kernel_table
from pallas_prof.profiler.attribution_schema import Attribution, EquationWeight, LineWeight, WaitCharge


def _text(renderable, width=250) -> str:
  con = Console(width=width, no_color=True, record=True, markup=False)
  con.print(renderable)
  return con.export_text()


def _run(resources: dict, origin: dict | None = None) -> RunReport:
  kernel = {"label": "k#1", "name": "k", "grid": [4, 2], "num_warps": 4, "num_stages": 2,
            "platform": "cpu", "resources": resources}
  return RunReport.from_dict({"schema": "pallas-prof/run/1", "kernels": [kernel],
                              "origin": origin or {}})


def test_registers_not_assembled_read_as_a_dash_in_the_table_and_on_the_page():
  """Registers are None while the cubin is deferred (CompiledKernel.resources()): both views
  once printed the dict's None as "None", where every other missing figure reads "-"."""
  run = _run({"registers": None, "shared_bytes": 2048, "spill_stores": None})
  table = _text(kernel_table(run))
  assert "None" not in table
  row = next(line for line in table.splitlines() if "k#1" in line)
  assert row.split() == ["k#1", "4x2", "4/2", "2", "KiB", "-", "-"]    # smem, regs, spills
  (view,) = model.run_view(run, None).kernels
  facts = dict(view.facts)
  assert (facts["registers"], facts["shared memory"], facts["spills"]) == ("-", "2 KiB", "-")


def test_resources_read_once_as_a_record():
  res = Resources.of({"registers": 40, "shared_bytes": 0, "spill_stores": 8,
                      "spill_loads": 4, "target": "sm_90"})
  assert (res.registers_text, res.shared_text, res.spills, res.spills_text) == \
      ("40", "0 B", 12, "12")
  assert Resources.of(None) == Resources()


def test_the_origin_is_worded_in_one_place():
  origin = {"host.name": "vm", "process.pid": 11917, "jax.process_index": 0,
            "jax.process_count": 2, "devices": ["gpu:0"]}
  run = _run({}, origin)
  assert Origin.of(origin).words == "process 0/2 vm pid 11917"
  assert Origin.of(origin).short == "0/2 vm:11917"
  assert processes.process_name("/runs/a", run) == "process 0/2 vm pid 11917"
  assert processes.short_name("/runs/a", run) == "0/2 vm:11917"
  one = {"host.name": "vm", "process.pid": 7}
  assert (Origin.of(one).words, Origin.of(one).short) == ("vm pid 7", "vm:7")
  # a run from before report.json said where it ran: its directory's name
  assert Origin.of({}) is None
  assert processes.process_name("/runs/old/", _run({})) == "old"
  page = model.merged_view([("/runs/a", run)], [processes.process_name("/runs/a", run)])
  assert page.kernels[0].process == "process 0/2 vm pid 11917"
  assert page.processes[0][:4] == ("process 0/2 vm pid 11917", "vm", "11917", "gpu:0")


def test_one_summary_per_kernel_and_device():
  run = _run({"registers": 32})
  (s,) = summaries(run)
  assert (s.label, s.grid_text, s.device_text, s.profiled, s.resources.registers) == \
      ("k#1", "4x2", "", False, 32)


def test_a_compile_failure_is_read_once_and_said_as_before():
  failure = {"equations": [{"index": 3, "primitive": "dot_general", "location": "mm.py:12"},
                           {"index": 4, "primitive": "dot_general", "location": "mm.py:12"}],
             "fault": "triton", "reproducer": {"script": "repro.py"},
             "workaround": "num_stages=1\nthen retried"}
  typed = CompileFailure.of(failure)
  assert typed.fault_words == "Triton's, not the kernel's"
  assert [t.plain for t in compile_failure_lines(typed)] == [
      "  from [3, 4] dot_general at mm.py:12",
      "  fault: Triton's, not the kernel's",
      "  reproducer: python repro.py",
      "  workaround: num_stages=1 (+1 more lines in report.json)"]
  assert CompileFailure.of(None) is None and CompileFailure.of({}) is None
  assert CompileFailure.of({"fault": "compiler-x"}).fault_words == "compiler-x"


def _attribution(path: str) -> Attribution:
  wait = WaitCharge(consumer=2, consumer_primitive="mul", consumer_line=4,
                    reason="long_scoreboard", words="waiting for global memory", samples=40)
  load = EquationWeight(index=1, primitive="load", path="1", parent=None, user_file=path,
                        user_line=3, samples=60, inclusive_samples=60, weight=0.6,
                        inclusive_weight=0.6, share_at=0.2, waits=[wait])
  lines = [LineWeight(user_file=path, user_line=3, weight=0.6, samples=60, equations=[1],
                      top_stall="waiting for global memory", time_s=1.5e-6),
           LineWeight(user_file=path, user_line=4, weight=0.4, samples=40, equations=[2],
                      top_stall=None)]
  return Attribution(basis="pc_sampling", description="PC samples of a replay",
                     unit="samples", total=100, unattributed=0, equations=[load], lines=lines)


def test_show_user_reads_the_attribution_typed(tmp_path):
  """`show --user`: each line's share, time, top stall and the load's first use, from
  show.Weights (the Attribution's records, not a dict rebuilt from it)."""
  path = tmp_path / "kernel.py"
  path.write_text("import jax\n\ndef kernel(x_ref, o_ref):\n  x = x_ref[...]\n"
                  "  o_ref[...] = x * 2\n")
  gk = types.SimpleNamespace(name="kernel", eqns=[
      types.SimpleNamespace(file=str(path), line=4), types.SimpleNamespace(file=str(path),
                                                                           line=5)])
  con = Console(width=200, no_color=True, record=True, markup=False)
  weights = show.Weights.of(_attribution(str(path)))
  assert weights.measured and dict(weights.shares) == {1: 0.6}
  assert show.show_user(con, gk, weights, "/runs/a", wide=True) == 0
  lines = con.export_text().splitlines()
  assert lines[1] == "weights: PC samples of a replay"
  assert lines[2].startswith("    3  60.0%  def kernel(x_ref, o_ref):") and \
      lines[2].endswith("# 1.5 µs; waiting for global memory; first used by mul at :4")
  assert lines[3] == "    4  40.0%    x = x_ref[...]"
