"""`pallas-prof` as a user runs it: subprocesses on the CPU (Triton's interpreter)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pallas_prof.profiler import driver

_GPU = driver.gpu_status()[0]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def pallas_prof(*args, cwd=None, timeout=600, cache_dir=None):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env.pop("PALLAS_PROF_TRACE", None)
  if cache_dir is not None:
    env["PALLAS_PROF_CACHE_DIR"] = str(cache_dir)   # a cold compile: stage spans to check
  return subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                        text=True, env=env, cwd=cwd or ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory):
  out = tmp_path_factory.mktemp("run") / "softmax"
  result = pallas_prof("run", "--out", str(out), os.path.join(EXAMPLES, "softmax.py"),
                       cache_dir=tmp_path_factory.mktemp("cache"))
  assert result.returncode == 0, result.stdout + result.stderr
  return out, result


def test_run_writes_the_run_directory(softmax_run):
  out, result = softmax_run
  report = json.loads((out / "report.json").read_text())
  assert report["schema"] == "pallas-prof/run/1" and report["exit_code"] == 0
  (kernel,) = report["kernels"]
  # the interpreter's launches; on a GPU XLA launches the kernel
  assert kernel["name"] == "softmax_kernel" and kernel["cpu_launches"] == (0 if _GPU else 1)
  assert kernel["resources"]["registers"] > 0
  assert set(kernel["compile"]["stages_ms"]) == {"ttir", "ttgir", "llir", "ptx", "cubin"}
  assert kernel["compile"]["worker_wait_ms"] >= 0
  for what in ("source", "ptx", "cubin", "ttir", "ttgir", "llir", "kernel"):
    assert (out / kernel["files"][what]).stat().st_size > 0, what
  # traces: OTLP-JSON lines and a Perfetto file with the kernel's spans
  otlp = [json.loads(line) for line in (out / "trace.otlp.jsonl").read_text().splitlines()]
  names = {s["name"] for req in otlp for rs in req["resourceSpans"] for ss in rs["scopeSpans"]
           for s in ss["spans"]}
  assert "pallas_call softmax_kernel" in names and "lower exp" in names
  assert {f"compile {st}" for st in ("ttir", "ttgir", "llir", "ptx", "cubin")} <= names
  assert "profile softmax_kernel" in names       # profile() tells the same hook
  perfetto = json.loads((out / "trace.perfetto.json").read_text())
  assert any(e.get("name") == "lower exp" for e in perfetto["traceEvents"])


@pytest.mark.skipif(_GPU, reason="checks the report of a machine without a GPU")
def test_run_report_names_hot_equations_on_cpu(softmax_run):
  out, result = softmax_run
  report = json.loads((out / "report.json").read_text())
  prof = report["profile"]
  assert prof["gpu_present"] is False and prof["message"].startswith("no NVIDIA GPU")
  static = prof["kernels"][0]["static"]
  top = static["equations"][static["top_equations"][0]]
  source = open(os.path.join(EXAMPLES, "softmax.py")).read().splitlines()
  assert top["user_file"].endswith("softmax.py")
  assert "jnp" in source[top["user_line"] - 1] or "ref" in source[top["user_line"] - 1]
  # the exp equation carries the special-function instructions
  (exp,) = [e for e in static["equations"] if e["primitive"] == "exp"]
  assert source[exp["user_line"] - 1].strip().startswith("e = jnp.exp(x)")
  assert exp["sass_counts"].get("special_function", 0) > 0
  # what the user sees
  assert "softmax_kernel#" in result.stdout and "hot equations" in result.stdout
  assert "softmax.py:21" in result.stdout
  # no GPU: the weights are static instruction shares, and both the report and its
  # JSON say so
  assert prof["kernels"][0]["weight_basis"] == "static"
  assert "static SASS instructions times loop trips: no GPU" in " ".join(result.stdout.split())


@pytest.mark.skipif(_GPU, reason="checks the report of a machine without a GPU")
def test_show_user_prints_the_users_lines_with_their_share(softmax_run, monkeypatch):
  monkeypatch.setenv("COLUMNS", "80")        # a narrow terminal: lines are not wrapped
  out, _ = softmax_run
  shown = pallas_prof("show", "softmax_kernel", "--dir", str(out), "--user")
  assert shown.returncode == 0, shown.stderr
  lines = shown.stdout.splitlines()
  assert "not measured: share of instructions" in shown.stdout
  exp = next(line for line in lines if "e = jnp.exp(x)" in line)
  assert exp.split()[0] == "21" and exp.split()[1].endswith("%")
  assert any(line.split()[:1] == ["18"] and "def softmax_kernel" in line for line in lines)


def test_show_annotates_ptx_and_source(softmax_run):
  out, _ = softmax_run
  ptx = pallas_prof("show", "softmax_kernel", "--dir", str(out), "--ptx")
  assert ptx.returncode == 0, ptx.stderr
  assert "── [4] exp @ softmax.py:21: e = jnp.exp(x)" in ptx.stdout
  assert "ex2.approx" in ptx.stdout or "ex2" in ptx.stdout
  src = pallas_prof("show", "softmax_kernel", "--dir", str(out))
  assert "── [4] exp @ softmax.py:21: e = jnp.exp(x)" in src.stdout
  assert re.search(r"^ +\d+ \[4\] +exp = libdevice\.exp\(sub\)$", src.stdout, re.M), src.stdout


def test_report_rerenders_and_diff_flags_regressions(softmax_run, tmp_path, monkeypatch):
  monkeypatch.setenv("COLUMNS", "200")       # the verdicts on one line each
  out, _ = softmax_run
  rendered = pallas_prof("report", str(out))
  assert rendered.returncode == 0 and "softmax_kernel#" in rendered.stdout
  # two runs: B is A with the kernel made 20% slower (edited report, a test input)
  a, b = tmp_path / "a", tmp_path / "b"
  shutil.copytree(out, a)
  shutil.copytree(out, b)
  for run_dir, median in ((a, 100e-6), (b, 120e-6)):
    report = json.loads((run_dir / "report.json").read_text())
    report["profile"]["kernels"][0]["runtime"] = {"median_s": median}
    (run_dir / "report.json").write_text(json.dumps(report))
  ok = pallas_prof("diff", str(a), str(a), "--fail-on-regression", "5")
  assert ok.returncode == 0, ok.stdout
  slower = pallas_prof("diff", str(a), str(b), "--fail-on-regression", "5")
  assert slower.returncode == 1 and "SLOWER (per launch) by 20.0%" in slower.stdout
  lenient = pallas_prof("diff", str(a), str(b), "--fail-on-regression", "25")
  assert lenient.returncode == 0


def test_eject_runs_standalone_and_matches(tmp_path):
  rng = np.random.default_rng()
  x = rng.standard_normal((8, 300)).astype(np.float32) * 3
  np.savez(tmp_path / "inputs.npz", x_ref=x)
  script = tmp_path / "run_softmax.py"
  script.write_text(textwrap.dedent(f"""
      import sys
      sys.path.insert(0, {EXAMPLES!r})
      import numpy as np
      import softmax
      x = np.load({str(tmp_path / 'inputs.npz')!r})["x_ref"]
      np.save({str(tmp_path / 'expected.npy')!r}, np.asarray(softmax.softmax(x)))
      """))
  out = tmp_path / "run"
  run = pallas_prof("run", "--no-analysis", "--out", str(out), str(script))
  assert run.returncode == 0, run.stdout + run.stderr
  ejected = tmp_path / "softmax_standalone.py"
  show = pallas_prof("show", "softmax_kernel", "--dir", str(out), "--eject", str(ejected))
  assert show.returncode == 0, show.stderr
  assert "import jax" not in ejected.read_text()
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  result = subprocess.run([sys.executable, str(ejected), "--interpret", "--inputs",
                           str(tmp_path / "inputs.npz"), "--output", str(tmp_path / "out.npz")],
                          capture_output=True, text=True, env=env, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  got = np.load(tmp_path / "out.npz")["o_ref"]
  np.testing.assert_allclose(got, np.load(tmp_path / "expected.npy"), rtol=1e-6, atol=1e-7)


def test_failing_kernel_reports_the_users_line(tmp_path):
  script = tmp_path / "bad_kernel.py"
  script.write_text(textwrap.dedent("""
      import jax, jax.numpy as jnp
      from jax.experimental import pallas as pl

      def kernel(x_ref, o_ref):
        o_ref[...] = jnp.sort(x_ref[...])   # not lowerable

      x = jnp.arange(16.0)
      pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))(x)
      print("unreachable")
      """))
  result = pallas_prof("run", "--out", str(tmp_path / "out"), str(script))
  assert result.returncode != 0
  text = result.stdout + result.stderr
  assert f"{script}:6" in text and "sort" in text and "hint" in text
  assert "unreachable" not in text
  report = json.loads((tmp_path / "out" / "report.json").read_text())
  (error,) = report["errors"]
  assert error["location"] == f"{script}:6" and error["primitive"] == "sort"


@pytest.mark.parametrize("body, code, needle", [
    ("import sys\nsys.exit(3)\n", 3, None),
    ("def f():\n  raise ValueError('boom from the script')\nf()\n", 1, "boom from the script"),
    ("import sys\nprint(sys.argv[1:])\n", 0, "['--flag', 'value']"),
])
def test_script_exit_codes_and_errors_are_preserved(tmp_path, body, code, needle):
  script = tmp_path / "plain.py"
  script.write_text(body)
  result = pallas_prof("run", "--out", str(tmp_path / "out"), str(script), "--flag", "value")
  assert result.returncode == code, result.stdout + result.stderr
  if needle:
    assert needle in result.stdout + result.stderr
  if code == 1:
    assert f'File "{script}", line 2' in result.stderr   # the script's own traceback


@pytest.mark.parametrize("flag, value, needle", [
    ("--kernel", "softmax(", "not a regular expression"),
    ("--device", "first", "takes an index, a list like 0,1, or all"),
    ("--device", "0;1", "takes an index"),
])
def test_a_bad_option_is_refused_before_the_script_runs(tmp_path, flag, value, needle):
  """A --kernel regex or --device that cannot be used stops pallas-prof at once, naming the
  option: the regex was compiled only after the script had run (a traceback from re, the
  run lost), the device list once profiling began."""
  marker = tmp_path / "ran"
  script = tmp_path / "script.py"
  script.write_text(f"open({str(marker)!r}, 'w').close()\n")
  result = pallas_prof("run", flag, value, "--out", str(tmp_path / "out"), str(script))
  assert result.returncode == 2, result.stdout + result.stderr
  assert f"argument {flag}" in result.stderr and needle in result.stderr, result.stderr
  assert "Traceback" not in result.stderr and not marker.exists()
