"""report.html without a browser: what the page holds, escaping, the CLI that writes it."""
from __future__ import annotations

import copy
import json
import os
import re
import tarfile

from pallas_prof.cli import html
from pallas_prof.cli.html import charts, model
from pallas_prof.cli.report import RunReport

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARCHIVE = os.path.join(ROOT, "bench", "results", "archive")
GPU_PIPELINE = os.path.join(ARCHIVE, "cli_gpu_pipeline")


def gpu_pipeline_run(tmp_path) -> str:
  """The recorded H200 run of examples/pipeline.py (report.json from before the
  NVML series), with its kernel files unpacked: a GPU run's page, drawn on a CPU."""
  d = tmp_path / "cli_gpu_pipeline"
  d.mkdir()
  with tarfile.open(os.path.join(GPU_PIPELINE, "kernels.tar.gz")) as tar:
    tar.extractall(d, filter="data")
  with open(os.path.join(GPU_PIPELINE, "report.json")) as f:
    (d / "report.json").write_text(f.read())
  return str(d)


def hostile_run(tmp_path) -> tuple[dict, str]:
  """A CPU run whose user file, kernel label and error text carry markup."""
  user = tmp_path / "evil.py"
  user.write_text("def k(x_ref, o_ref):\n  o_ref[...] = x_ref[...] # </td><script>alert(1)</script>\n")
  eq = {"index": 0, "primitive": "swap<b>", "text": "b[...] <- a", "user_file": str(user),
        "user_line": 2, "weight": 1.0, "path": "0"}
  run = {"schema": "pallas-prof/run/1", "script": str(user), "exit_code": 0,
         "platform": {"backend": "cpu", "devices": ["cpu"]},
         "kernels": [{"label": "k<img src=x onerror=alert(2)>#1", "name": "k",
                      "source_info": f"k at {user}:1", "grid": [1], "num_warps": 4,
                      "num_stages": 3, "files": {}}],
         "profile": {"gpu_present": False, "message": "<i>cpu</i>",
                     "kernels": [{"label": "k<img src=x onerror=alert(2)>#1",
                                  "static": {"weight_basis": "sass", "equations": [eq]}}]},
         "errors": [{"kernel": "k2", "reason": "no rule for `sort` <script>", "location": "x:1",
                     "hint": "h", "report": "  >> 5 |   y = <script>alert(3)</script>\n  ok"}],
         "notes": ["<svg onload=alert(4)>"]}
  return run, str(tmp_path)


def test_everything_from_the_users_program_is_escaped(tmp_path):
  run, d = hostile_run(tmp_path)
  page = html.render_html(RunReport.from_dict(run), d)
  for raw in ("<script>alert", "<img src=x", "<svg onload", "<i>cpu</i>", "swap<b>"):
    assert raw not in page, raw
  assert "&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page    # shown, as text
  assert "k&lt;img src=x onerror=alert(2)&gt;#1" in page
  assert page.count("<script>") == 1                                     # the page's own


def test_users_lines_carry_the_equations_weights_and_basis(tmp_path):
  run, d = hostile_run(tmp_path)
  view = model.run_view(RunReport.from_dict(run), d)
  (k,) = view.kernels
  lines = {line.number: line for line in k.user_source.lines}
  assert lines[2].weight == 1.0 and lines[2].eqns == (0,) and lines[1].weight is None
  assert "SASS instructions" in k.weight_basis and "not timed" in k.weight_basis
  assert "no roofline" in k.roofline.absent and "CPU" in k.roofline.absent
  assert k.clocks.absent.startswith("no GPU in this run")
  (err,) = view.errors
  assert err.report[0][1] and not err.report[1][1]          # the ">>" line is the failing one


def test_measured_weights_and_stall_reasons_show_when_the_profile_has_them(tmp_path):
  run, d = hostile_run(tmp_path)
  run = copy.deepcopy(run)
  kp = run["profile"]["kernels"][0]
  kp["weight_basis"] = "pc_sampling"
  kp["attribution"] = {
      "basis": "pc_sampling", "description": "share of 5000 PC samples of a replay",
      "equations": [{"index": 0, "primitive": "swap<b>", "weight": 0.75, "stalls": [
          {"reason": "long_scoreboard", "words": "waiting for global memory", "samples": 40},
          {"reason": "wait", "words": "fixed-latency wait", "samples": 3}]}]}
  (k,) = model.run_view(RunReport.from_dict(run), d).kernels
  assert k.weight_basis == "measured (pc_sampling): share of 5000 PC samples of a replay"
  (line,) = [line for line in k.user_source.lines if line.weight is not None]
  assert line.weight == 0.75 and line.stall == "waiting for global memory"
  assert "waiting for global memory" in html.render_html(RunReport.from_dict(run), d)


def test_recorded_gpu_run_has_a_roofline_per_device(tmp_path):
  d = gpu_pipeline_run(tmp_path)
  page = html.render_html(RunReport.load(d), d)
  sections = re.findall(r'<section class="kernel panel" id="([^"]+)"', page)
  assert len(sections) == 8 and len(set(sections)) == 8          # 4 kernels x 2 GPUs
  assert page.count('class="kernel-point"') == 8
  assert "copy 4.14 TB/s" in page and "bf16 matrix 789 TFLOP/s" in page
  assert "kept NVML&#39;s summary only" in page                  # an old run: no series
  stages = re.findall(r"<summary>(PTX|SASS) <span class=\"muted\">\((\d+) lines", page)
  assert len(stages) == 16 and all(int(n) > 50 for _, n in stages)   # PTX and SASS per kernel
  ptx = page.split("<summary>PTX", 1)[1].split("</details>", 1)[0]
  assert ptx.count('class="hot"') > 20                         # instructions heated


def test_roofline_places_the_point_between_its_ceilings():
  r = model.Roofline(intensity=1.0, flops_per_s=2e12, bytes_per_s=2e12, copy_bytes_per_s=4e12,
                     matrix_flops_per_s=(("bf16", 8e14),))
  svg = str(charts.roofline(r))
  cx, cy = map(float, re.search(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg).groups())
  # the copy line at intensity 1 is 4e12: the point (2e12) lies below it
  x1, y1, x2, y2 = map(float, re.search(
      r'<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)" class="ceiling copy"',
      svg).groups())
  copy_y_at_cx = y1 + (y2 - y1) * (cx - x1) / (x2 - x1)
  assert x1 < cx < x2 and cy > copy_y_at_cx
  assert "copy 4 TB/s" in svg and "bf16 matrix 800 TFLOP/s" in svg


def test_clock_chart_marks_throttled_buckets():
  c = model.Clocks(t_s=(0.0, 0.1, 0.2), sm_clock_mhz=(1980, 1500, 1980),
                   power_w=(300, 700, 300), slowdown=((), ("SwPowerCap",), ()),
                   max_sm_clock_mhz=1980, power_limit_w=700)
  svg = str(charts.clocks(c))
  assert svg.count('class="throttled"') == 1 and "throttled: SwPowerCap" in svg
  assert svg.count('class="series clock"') == 1 and svg.count('class="series power"') == 1


def recorded_attribution_run(tmp_path) -> str:
  """A run directory around the softmax kernel whose CUPTI PC samples were recorded on the
  H200 (tests/profiler/fixtures/pcsampling): its weights and stall reasons as the profiler
  attributes them. No runtime, rates or ceilings: none were recorded with the samples."""
  from pallas_prof.cli import run_directory
  from pallas_prof.profiler.sampling import attribution, pcsampling
  from pallas_prof.profiler.static import correlate
  fixture = os.path.join(ROOT, "tests", "profiler", "fixtures", "pcsampling",
                         "softmax_kernel-dc90ff")
  d = tmp_path / "recorded_softmax"
  kdir = d / "kernels" / "softmax_kernel-dc90ff"
  kdir.mkdir(parents=True)
  for name in ("kernel.json", "source.py", "kernel.ptx", "kernel.cubin"):
    (kdir / name).write_bytes(open(os.path.join(fixture, name), "rb").read())
  gk, ck = run_directory.load_kernel(str(kdir))
  data = json.loads(open(os.path.join(fixture, "samples.json")).read())
  meta = json.loads(open(os.path.join(fixture, "meta.json")).read())
  samples, other = pcsampling.instruction_samples(data, data["kernel"])
  corr = correlate.correlate(ck)
  att = attribution.measured(gk, corr, samples, basis="pc_sampling",
                             description="CUPTI PC sampling recorded on the H200",
                             replay_median_s=meta["replay_median_s"],
                             sampling=pcsampling.sampling_run(data, other))
  files = {"kernel": "kernels/softmax_kernel-dc90ff/kernel.json",
           "source": "kernels/softmax_kernel-dc90ff/source.py"}
  run = {"schema": "pallas-prof/run/1", "script": os.path.join(ROOT, "examples", "softmax.py"),
         "exit_code": 0, "command": meta["command"], "platform": {"devices": [meta["device"]]},
         "kernels": [{"label": meta["label"], "name": gk.name, "source_info": gk.source_info,
                      "grid": list(gk.grid), "num_warps": gk.num_warps,
                      "num_stages": gk.num_stages, "files": files}],
         "profiles": [{"gpu_present": True, "message": "composed from recorded PC samples",
                       "kernels": [{"label": meta["label"], "name": gk.name,
                                    "static": corr.profile.to_dict(),
                                    "weight_basis": "pc_sampling",
                                    "attribution": att.to_dict()}]}]}
  (d / "report.json").write_text(json.dumps(run, default=str))
  return str(d)


def test_recorded_h200_samples_heat_the_lines_and_name_their_stalls(tmp_path):
  d = recorded_attribution_run(tmp_path)
  run = json.loads(open(os.path.join(d, "report.json")).read())
  (k,) = model.run_view(RunReport.from_dict(run), d).kernels
  assert k.weight_basis.startswith("measured (pc_sampling)")
  hot = [line for line in k.user_source.lines if line.weight]
  assert hot and abs(sum(line.weight for line in hot) - 1.0) < 0.2    # most samples on lines
  assert any(line.stall for line in hot)                               # a reason, in words
  gen_hot = [line for line in k.generated.lines if line.weight]
  assert gen_hot and all(line.note.startswith("[") for line in gen_hot)
  ptx = k.stages[0]
  assert ptx.title == "PTX" and sum(1 for line in ptx.lines if line.weight) > 20
  page = html.render_html(RunReport.from_dict(run), d)
  assert 'class="stall"' in page


def test_code_in_a_narrow_cell_is_escaped_and_wraps_between_arguments():
  text = 'CompilerParams(num_warps=4, name="<b>&")'
  out = str(html.code_breaks(text))
  assert "<b>" not in out and "&lt;b&gt;&amp;" in out
  assert out.replace("<wbr>", "") == 'CompilerParams(num_warps=4, name=&#34;&lt;b&gt;&amp;&#34;)'
  assert "CompilerParams(<wbr>num_warps=<wbr>4,<wbr> " in out     # breaks after ( = and ,
  assert "Compiler<wbr>" not in out and "num_<wbr>" not in out   # never inside a name
