"""The run report in a terminal: typed, sized to the console, text printed as written."""
from __future__ import annotations

import dataclasses
import glob
import json
import os
import re

import pytest
from rich.console import Console
from rich.text import Text

from pallas_prof.cli.terminal import render
from pallas_prof.cli.terminal.render import kernel_table, render_run
from pallas_prof.cli.report import ReportError, RunReport
from pallas_prof.profiler.schema import (EquationProfile, InsituStats, KernelProfile, ProfileReport,
                                         StaticProfile)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# `pallas-prof run` directories recorded on the H200 by earlier versions (bench/results)
RECORDED = sorted(glob.glob(os.path.join(ROOT, "bench", "results", "**", "cli_gpu_*",
                                         "report.json"), recursive=True))


def text_of(renderable, width=250) -> str:
  con = Console(width=width, no_color=True, record=True, markup=False)
  con.print(renderable)
  return con.export_text()


def _typed(run: dict) -> RunReport:
  return RunReport.from_dict({"schema": "pallas-prof/run/1", **run})


def test_kernel_table_shows_cold_median_and_sustained():
  # a report dict as a GPU run writes it (figures are test inputs)
  kernel = {"label": "softmax_kernel#abc", "name": "softmax_kernel", "grid": [8192],
            "num_warps": 4, "num_stages": 1}
  runtime = {"mode": "cold", "median_s": 129.8e-6, "p10_s": 129.0e-6, "p90_s": 131.0e-6,
             "sustained": {"mode": "sustained", "median_s": 136.0e-6}}
  run = {"kernels": [kernel], "profile": {"gpu_present": True, "kernels": [
      {"label": kernel["label"], "name": "softmax_kernel", "runtime": runtime}]}}
  text = text_of(kernel_table(_typed(run)))
  assert "cold median µs" in text and "[p10-p90]" in text and "sustained" in text
  assert "129.8 [129.0-131.0]" in text and "136.0" in text and "(sustained)" not in text
  # a report from before the two modes timed back-to-back: its median is marked so
  run["profile"]["kernels"][0]["runtime"] = {"median_s": 136.0e-6, "p10_s": 1e-4, "p90_s": 2e-4}
  assert "136.0 [100.0-200.0] (sustained)" in text_of(kernel_table(_typed(run)))


def test_kernel_table_shows_a_compile_s_wait_for_the_worker():
  def compile_cell(wait_ms):
    kernel = {"label": "k#1", "name": "k", "grid": [4], "num_warps": 4, "num_stages": 1,
              "compile": {"cache": "miss", "total_ms": 52.0, "worker_wait_ms": wait_ms,
                          "stages_ms": {"ttir": 14, "ttgir": 9, "llir": 20, "ptx": 9}}}
    return text_of(kernel_table(_typed({"kernels": [kernel], "profile": {"gpu_present": False}})))

  text = compile_cell(310.4)
  assert "52 (14/9/20/9) +310 wait" in text and "+N wait: ms the compile waited" in text
  text = compile_cell(2.0)             # a trip to a ready worker is not worth a mention
  assert "52 (14/9/20/9)" in text and "wait" not in text


def test_insitu_cell_per_device():
  def stats(launches, mean_s, device_ids):
    return InsituStats("k", launches, launches * mean_s, mean_s, device_ids, [])
  assert render._insitu_cell(None) == "-"
  assert render._insitu_cell(stats(0, 0.0, [])) == "not launched on this GPU"
  assert render._insitu_cell(stats(3, 35e-6, [1])) == "3 x 35.0 µs on gpu 1"


def _report_with_brackets(tmp_path) -> RunReport:
  """A CPU run's report whose kernel line and message hold square brackets."""
  user = tmp_path / "matmul.py"
  user.write_text("def kernel(a_ref, b_ref):\n  b = b_ref[pl.ds(k * block_k, block_k), :]\n")
  eqn = EquationProfile(
      index=5, path="5", primitive="get", text="d = get[...] b", user_file=str(user),
      user_line=2, function="kernel", parent=None, region="body", generated_lines=[12],
      ptx_instructions=10, sass_instructions=8, weight=0.42, inclusive_weight=0.42,
      loop_instructions=0, ptx_counts={"global_load": 4}, sass_counts={"global_load": 4})
  static = StaticProfile(
      kernel="matmul_kernel", target="cuda:90", generated_path="x.py", grid=[4], launch_grid=[4],
      num_warps=4, num_stages=3, resources={}, ptx_instructions=10, sass_instructions=8,
      weight_basis="sass", sass_error=None, ptx_counts={}, sass_counts={},
      unattributed_instructions=0, unattributed_counts={}, equations=[eqn], top_equations=[0])
  message = ("no NVIDIA GPU: cuda-bindings is not installed: pip install 'pallas-prof[gpu]' "
             "(NVIDIA's cuda-bindings) to replay kernels on the GPU.")
  profile = ProfileReport(gpu_present=False, message=message, device=None, ceilings=None,
                          kernels=[KernelProfile(label="matmul_kernel#8608b1", name="matmul_kernel",
                                                 in_avals=[], out_avals=[], static=static,
                                                 work=None, verdict="static only")],
                          notes=["[bold]not markup[/bold]"], created=0.0)
  return RunReport.from_dict({
      "schema": "pallas-prof/run/1", "script": str(user), "exit_code": 0,
      "kernels": [{"label": "matmul_kernel#8608b1", "name": "matmul_kernel", "grid": [32, 32],
                   "num_warps": 4, "num_stages": 3, "cpu_launches": 1,
                   "compile": {"cache": "miss", "total_ms": 339.0, "worker_wait_ms": 0,
                               "stages_ms": {"ttir": 30, "ttgir": 32, "llir": 211, "ptx": 66,
                                             "cubin": 142}},
                   "resources": {"shared_bytes": 98304, "registers": 164, "spill_stores": 0,
                                 "spill_loads": 0}}],
      "profiles": [profile.to_dict()]})


def test_square_brackets_print_as_written(tmp_path):
  report = _report_with_brackets(tmp_path)
  text = text_of(report, 200)
  assert "pip install 'pallas-prof[gpu]'" in text
  assert "b = b_ref[pl.ds(k * block_k, block_k), :]" in text
  assert "note: [bold]not markup[/bold]" in text


@pytest.mark.parametrize("width", [80, 120, 200])
def test_report_fits_the_terminal(tmp_path, monkeypatch, capsys, width):
  monkeypatch.setenv("COLUMNS", str(width))
  report = _report_with_brackets(tmp_path)
  render_run(report, "pallas-prof-out/x")        # stdout is not a terminal here
  out = capsys.readouterr().out
  lines = out.splitlines()
  assert max(len(line) for line in lines) <= width
  assert "\x1b[" not in out                      # plain text: no colour codes
  assert "matmul_kernel#8608b1" in out           # the label whole, at every width
  assert "339 (30/32/211/66/142)" in out.replace("\n", " ") or width < 120
  source = [line for line in lines if "b = b_ref" in line]
  assert len(source) == 1
  if width >= 120:
    assert "b = b_ref[pl.ds(k * block_k, block_k), :]" in source[0]
  else:
    assert "b = b_ref[pl.ds(k * block_k, " in source[0] and "…" in source[0]   # cut, and says so


def test_width_comes_from_columns_and_is_clamped(monkeypatch):
  monkeypatch.setenv("COLUMNS", "40")
  assert render.console_width(False) == 80
  monkeypatch.setenv("COLUMNS", "500")
  assert render.console_width(True) == 200
  monkeypatch.setenv("COLUMNS", "133")
  assert render.console().width == 133
  monkeypatch.delenv("COLUMNS")
  assert render.console_width(False) == render.PIPE_WIDTH


def test_piped_output_is_a_terminals_width_without_trailing_spaces(tmp_path):
  """Issue 39, item 5: `pallas-prof report` into a pipe, COLUMNS unset, printed 160
  columns with each table title padded by spaces to the table's width."""
  import subprocess
  import sys
  from tests.cli.test_cli import EXAMPLES, pallas_prof
  out = tmp_path / "run"
  made = pallas_prof("run", "--no-trace", "--out", str(out), os.path.join(EXAMPLES, "softmax.py"))
  assert made.returncode == 0, made.stderr
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env.pop("COLUMNS", None)
  for args in (["report", str(out)], ["diff", str(out), str(out)]):
    piped = subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=600)
    assert piped.returncode == 0, piped.stderr
    lines = piped.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert [line for line in lines if line != line.rstrip()] == []
    assert piped.stdout.strip()


def test_the_pipe_stream_keeps_what_is_not_padding():
  import io
  buffer = io.StringIO()
  con = render.console(buffer)
  con.print(Text("title   "), Text("  indented  line  "), Text("last"))
  con.print(Text("a b \nc "), end="")
  assert buffer.getvalue() == "title      indented  line   last\na b\nc "


@pytest.mark.skipif(not RECORDED, reason="no recorded GPU runs under bench/results")
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: os.path.basename(os.path.dirname(p)))
@pytest.mark.parametrize("width", [80, 200])
def test_recorded_gpu_runs_still_render(path, width):
  """Runs saved by earlier versions (profile schema 1 and 2, one and two GPUs)."""
  with open(path) as f:
    saved = json.load(f)
  report = RunReport.load(os.path.dirname(path))
  text = text_of(report, width)
  assert max(len(line) for line in text.splitlines()) <= width
  for k in saved["kernels"]:
    assert k["label"][:12] in text
  # the GPU's state: one line per kernel and device under the table, not a cell
  nvml = [kp["nvml"]["summary"] for p in saved["profiles"] for kp in p["kernels"] if kp.get("nvml")]
  assert text.count("while timing") == len(nvml) > 0
  if width == 200:
    for summary in nvml:
      assert summary in text
  # every field the saved file has comes back with the value it had
  _assert_contains(report.to_dict(), saved)


def _assert_contains(got, saved, where="report"):
  if isinstance(saved, dict):
    for key, value in saved.items():
      assert key in got, f"{where}.{key} lost"
      _assert_contains(got[key], value, f"{where}.{key}")
  elif isinstance(saved, list):
    assert len(got) == len(saved), where
    for i, (g, s) in enumerate(zip(got, saved)):
      _assert_contains(g, s, f"{where}[{i}]")
  else:
    assert got == saved, f"{where}: {got!r} != {saved!r}"


@pytest.mark.skipif(not RECORDED, reason="no recorded GPU runs under bench/results")
def test_round_trip_keeps_every_value():
  for path in RECORDED:
    report = RunReport.load(os.path.dirname(path))
    again = RunReport.from_json(report.to_json())
    assert again == report
    assert again.to_dict() == report.to_dict()
    # typed all the way down
    kp = again.profiles[0].kernels[0]
    assert type(kp).__name__ == "KernelProfile" and type(kp.runtime).__name__ == "RuntimeStats"
    assert dataclasses.is_dataclass(again.kernels[0].compile)


def test_another_schema_is_named(tmp_path):
  (tmp_path / "report.json").write_text(json.dumps({"schema": "pallas-prof/run/7"}))
  with pytest.raises(ReportError, match=re.escape("schema 'pallas-prof/run/7'")) as e:
    RunReport.load(str(tmp_path))
  assert "pallas-prof/run/1" in str(e.value)
  (tmp_path / "report.json").write_text(json.dumps({"resourceSpans": []}))
  with pytest.raises(ReportError, match="not a pallas-prof run report"):
    RunReport.load(str(tmp_path))


def test_measured_attribution_is_what_the_hot_equations_show(tmp_path):
  """The profiler's measured weights (PC samples) with each equation's top stall reason
  come through report.json and into the table."""
  from pallas_prof.profiler.attribution_schema import Attribution, EquationWeight, StallShare
  report = _report_with_brackets(tmp_path)
  eqn = report.profile.kernels[0].static.equations[0]
  stall = StallShare(reason="long_scoreboard", words="waiting for global memory",
                     samples=80.0, share=0.8)
  weight = EquationWeight(index=eqn.index, primitive=eqn.primitive, path=eqn.path, parent=None,
                          user_file=eqn.user_file, user_line=eqn.user_line, samples=100.0,
                          inclusive_samples=100.0, weight=0.75, inclusive_weight=0.75,
                          share_at=0.6, time_s=97.5e-6, stalls=[stall])
  att = Attribution(basis="pc_sampling", description="CUPTI PC sampling", unit="samples",
                    total=133.0, unattributed=33.0, equations=[weight], lines=[])
  data = report.to_dict()
  data["profiles"][0]["kernels"][0]["attribution"] = att.to_dict()
  data["profiles"][0]["kernels"][0]["weight_basis"] = "pc_sampling"
  data["profile"] = data["profiles"][0]
  again = RunReport.from_json(json.dumps(data))
  assert again.profile.kernels[0].attribution == att      # typed all the way down
  text = text_of(again, 200)
  assert "(CUPTI PC sampling)" in text and "top stall" in text
  row = next(line for line in text.splitlines() if "[5] get" in line)
  assert "75.0%" in row and "97.5" in row and "waiting for global memory" in row


def test_the_instruction_mix_is_worded_as_the_page_words_it_and_never_blank(tmp_path):
  """An equation of plain arithmetic (select_n, gt, mul) had a blank cell in the terminal
  while report.html said "arithmetic and other N"; the kinds read "global load", not
  "global_load"."""
  report = _report_with_brackets(tmp_path)
  static = report.profile.kernels[0].static
  assert render._instruction_mix(static, 0) == "global load 4, arithmetic and other 4"
  arith = dataclasses.replace(static.equations[0], sass_counts={"other": 6}, sass_instructions=6)
  assert render._instruction_mix(dataclasses.replace(static, equations=[arith]), 0) \
      == "arithmetic and other 6"
  from pallas_prof.cli.html.equations import equation_table
  from pallas_prof.cli.html.model import equation_weights
  kp = report.profile.kernels[0]
  page = equation_table(kp, equation_weights(kp), lambda path: path)
  assert page.rows[0].detail == render._instruction_mix(static, 0)     # one wording, one place


@pytest.mark.parametrize("resources, spills, shown", [
    ({"spill_stores": 8, "spill_loads": 12}, 20, "20"),
    ({"spill_stores": 0, "spill_loads": 0}, 0, "0"),
    ({"spill_stores": 8}, 8, "8"),
    ({"registers": 32}, None, "-"),        # ptxas said nothing of spills: not "0"
    (None, None, "-"),
])
def test_spills_are_counted_alike_for_a_run_a_profile_and_the_page(resources, spills, shown):
  from pallas_prof.cli.html.model import _kernel_facts
  from pallas_prof.cli.report import KernelEntry
  from pallas_prof.cli.summary import KernelSummary, Resources
  entry = KernelEntry(label="k#1", name="k", resources=resources)
  assert entry.spills == spills
  assert Resources.of(resources).spills == spills         # a run's row and a profile's alike
  assert dict(_kernel_facts(KernelSummary("k#1", "k", resources=Resources.of(resources)),
                            False))["spills"] == shown
  assert Resources.of(resources).spills_text == shown     # the terminal's cell


class _Terminal:
  """A stream that says it is a terminal (tests/cli/test_pty.py runs a real one)."""

  def __init__(self):
    self.written = []

  def isatty(self):
    return True

  def write(self, text):
    self.written.append(text)

  def flush(self):
    pass


def test_the_clis_own_messages_fit_a_terminal_and_stay_whole_in_a_log(monkeypatch, capsys):
  """advise's first line was 259 columns on a terminal of 100 (tests/cli/test_pty.py)."""
  monkeypatch.setenv("COLUMNS", "90")
  message = "pallas-prof advise: " + " ".join(["nothing can be tried or timed here"] * 8) + \
      " \x1b]0;title\x07"
  terminal = _Terminal()
  render.say(message, terminal)
  lines = "".join(terminal.written).rstrip("\n").split("\n")
  assert len(lines) > 1 and all(len(line) <= 90 for line in lines), lines
  assert " ".join(lines).endswith("\u241b]0;title\u2407")       # the escapes shown, not sent
  render.say(message)                                           # stderr: not a terminal here
  assert capsys.readouterr().err == message + "\n"             # one line, as written
