"""`pallas-prof diff` on real runs made here on the CPU (issue 39, item 3): a failed run
is the first thing it says and fails the gate; a kernel whose grid changed for the same
work is compared per byte, not called a regression for doing twice the work per program."""
from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from tests.cli.test_cli import pallas_prof

ROWS = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def rows_kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] * 2.0 + 1.0

    x = jnp.ones((64, 128), jnp.float32)
    spec = pl.BlockSpec((BLOCK_ROWS, 128), lambda i: (i, 0))
    pl.pallas_call(rows_kernel, grid=(64 // BLOCK_ROWS,), in_specs=[spec], out_specs=spec,
                   out_shape=x)(x).block_until_ready()
    """)

# reads x_ref[i * 8 + OFFSET : +8]: in bounds at 0, past the end at 4 (caught on a CPU)
READS = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
      i = pl.program_id(0)
      o_ref[...] = x_ref[pl.ds(i * 8 + OFFSET, 8)] * 2.0

    f = jax.jit(pl.pallas_call(kernel, grid=(4,), in_specs=[pl.BlockSpec((32,), lambda i: (0,))],
                               out_specs=pl.BlockSpec((8,), lambda i: (i,)),
                               out_shape=jax.ShapeDtypeStruct((32,), jnp.float32)))
    CALL
    """)
CAUGHT = ("import pallas_prof\ntry:\n  f(jnp.arange(32, dtype=jnp.float32))\n"
          "except pallas_prof.BoundsError as e:\n  print('caught', e)\n")

SCRIPTS = {
    "rows8": (ROWS.replace("BLOCK_ROWS", "8"), ()),
    "rows16": (ROWS.replace("BLOCK_ROWS", "16"), ()),
    "rows16_bare": (ROWS.replace("BLOCK_ROWS", "16"), ("--no-analysis",)),
    "in_bounds": (READS.replace("OFFSET", "0").replace("CALL", "print(f(jnp.ones(32)))"), ()),
    "reads_past": (READS.replace("OFFSET", "4").replace("CALL", "print(f(jnp.ones(32)))"), ()),
    "caught": (READS.replace("OFFSET", "4").replace("CALL", CAUGHT), ()),
}
EXIT = {"reads_past": 1}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  where = tmp_path_factory.mktemp("diff")
  out = {}
  for name, (text, options) in SCRIPTS.items():
    script = where / f"{name}.py"
    script.write_text(text)
    result = pallas_prof("run", *options, "--out", str(where / name), str(script), cwd=where)
    assert result.returncode == EXIT.get(name, 0), (name, result.stdout + result.stderr)
    out[name] = where / name
  return out


def _diff(runs, a, b, *gate):
  """(exit code, lines, the text with its wrapping undone) of `pallas-prof diff A B`."""
  result = pallas_prof("diff", str(runs[a]), str(runs[b]), *gate)
  assert "Traceback" not in result.stderr, result.stderr
  return result.returncode, result.stdout.splitlines(), " ".join(result.stdout.split())


pytestmark = pytest.mark.no_gpu      # what the CPU's runs hold: no runtimes


def test_a_run_that_failed_at_run_time_is_said_first_and_fails_the_gate(runs):
  """The issue: a run whose kernel read out of bounds (exit 1) diffed against one that
  passed said only `instructions +25.0%`."""
  for gate in (("--fail-on-regression", "5"), ("--fail-on-regression", "1000"), ()):
    code, lines, text = _diff(runs, "in_bounds", "reads_past", *gate)
    assert lines[0].startswith("FAILED: run B ("), lines
    assert text.startswith(f"FAILED: run B ({runs['reads_past']}): the script exited with "
                           "code 1; kernel `kernel` failed at run time at reads_past.py:7: ")
    assert f"(`pallas-prof report {runs['reads_past']}` shows it in full)" in text
    if gate:          # however lenient the threshold, a failed run fails it
      assert code == 1 and lines[-1].startswith("regressions: run B failed"), lines
    else:
      assert code == 0


def test_a_failed_run_with_other_kernels_still_fails_the_gate(runs):
  """The issue: two runs with different kernels gave "only in A / only in B" and exit 0,
  though B had failed."""
  code, lines, _ = _diff(runs, "rows8", "reads_past", "--fail-on-regression", "5")
  assert code == 1 and lines[0].startswith("FAILED: run B")
  assert any(ln.endswith("only in A") for ln in lines) and \
      any(ln.endswith("only in B") for ln in lines)
  assert lines[-1] == "regressions: run B failed"


def test_a_failed_baseline_and_a_caught_failure_are_failures_too(runs):
  code, lines, _ = _diff(runs, "reads_past", "in_bounds", "--fail-on-regression", "5")
  assert code == 1 and lines[0].startswith("FAILED: run A") and \
      lines[-1].startswith("regressions: run A failed")
  code, lines, text = _diff(runs, "in_bounds", "caught", "--fail-on-regression", "1000")
  assert code == 1 and text.startswith(f"FAILED: run B ({runs['caught']}): the script caught "
                                       "1 failure(s) of its kernels at run time")
  code, _, text = _diff(runs, "in_bounds", "in_bounds", "--fail-on-regression", "5")
  assert code == 0 and "FAILED" not in text


def test_twice_the_rows_per_block_is_the_same_work_not_a_regression(runs, tmp_path):
  """The issue: block_rows 8 -> 16 (same work, half the grid) was reported as registers,
  shared memory and instructions regressions, exit 1; the grid was not among the columns."""
  code, lines, text = _diff(runs, "rows8", "rows16", "--fail-on-regression", "5")
  assert code == 0, lines
  header = next(ln for ln in lines if ln.startswith("kernel "))
  assert header.split()[1] == "grid"
  row = next(ln for ln in lines if ln.startswith("rows_kernel#"))
  assert " 8 -> 4 " in row and row.split()[-1] == "better"     # fewer instructions per byte
  assert ": grid 8 -> 4, each program moves 8 KiB -> 16 KiB: compared per byte " in text
  # fewer instructions executed per byte moved
  assert "): instructions (per byte, whole grid) -" in text
  assert "worse:" not in text
  # a kernel that got worse per byte is still caught: B's instructions tripled
  worse = tmp_path / "worse"
  shutil.copytree(runs["rows16"], worse)
  report = json.loads((worse / "report.json").read_text())
  static = report["profile"]["kernels"][0]["static"]
  static["sass_instructions"] *= 3                   # a test input
  (worse / "report.json").write_text(json.dumps(report))
  runs = dict(runs, worse=worse)
  code, lines, text = _diff(runs, "rows8", "worse", "--fail-on-regression", "5")
  assert code == 1 and lines[-1].startswith("regressions: rows_kernel#"), lines
  assert "instructions (per byte, whole grid) +" in text.split("worse: rows_kernel#")[1]


def test_per_program_and_whole_grid_figures_are_labelled_in_the_table_and_the_verdict(runs):
  """Issue 47, item 5: the table showed instructions per program falling (464 -> 264) beside
  "worse: instructions per byte +127.6 %" over the whole grid, and nothing said which was
  which. 16-row blocks -> 8-row ones (twice the grid, the same bytes): fewer instructions in
  each program, more in the whole grid."""
  code, lines, text = _diff(runs, "rows16", "rows8")
  assert code == 0, lines
  names, whose = next((a, b) for a, b in zip(lines, lines[1:]) if b.startswith("kernel "))
  assert names.split() == ["registers", "shared", "spills", "instructions"], names
  assert " ".join(whose.split()) == ("kernel grid per thread per program per thread per "
                                     "program verdict"), whose
  row = next(ln for ln in lines if ln.startswith("rows_kernel#"))
  before, after = (int(n) for n in row.split()[-4:-1:2])     # instructions per program
  assert after < before, row
  assert row.split()[-1] == "worse"
  assert ("per thread, per program: one program's figures; per launch, whole grid: all the "
          "grid's programs together") in text
  grew = 100 * (after * 8 / (before * 4) - 1)
  (worse,) = [ln for ln in lines if ln.startswith("worse: ")]
  assert worse.endswith(f": instructions (per byte, whole grid) +{grew:.1f}%"), worse
  assert "instructions (per byte, whole grid) +" in text.split("compared per byte of work (")[1]
  assert "instructions per byte" not in text and "instructions +" not in text


def test_without_a_work_model_a_changed_grid_is_said_not_to_compare(runs):
  code, lines, text = _diff(runs, "rows8", "rows16_bare", "--fail-on-regression", "5")
  assert code == 0, lines
  row = next(ln for ln in lines if ln.startswith("rows_kernel#"))
  assert row.split()[-1] == "n/a" and "None" not in row
  assert ("grid 8 -> 4: the programs' figures do not compare as they are, and run B has no "
          "work model to scale them by (run it without --no-analysis); not counted as "
          "regressions") in text


def _edited(runs, tmp_path, name, edit):
  """A copy of the run `name` whose report.json `edit` changed (a test input)."""
  copy = tmp_path / name
  shutil.copytree(runs["rows8"], copy)
  report = json.loads((copy / "report.json").read_text())
  edit(report["profile"]["kernels"][0])
  (copy / "report.json").write_text(json.dumps(report))
  return dict(runs, **{name: copy})


def _verdict(lines) -> str:
  return next(ln for ln in lines if ln.startswith("rows_kernel#")).split()[-1]


def test_without_a_gate_a_regression_is_called_worse_not_ok(runs, tmp_path):
  """The issue: without --fail-on-regression, instructions that tripled were shown `ok`."""
  runs = _edited(runs, tmp_path, "tripled", lambda k: k["static"].update(
      sass_instructions=k["static"]["sass_instructions"] * 3))
  for gate in ((), ("--fail-on-regression", "1000")):
    code, lines, text = _diff(runs, "rows8", "tripled", *gate)
    assert code == 0 and _verdict(lines) == "worse", lines
    assert "worse: rows_kernel#" in text and "instructions (per program) +200.0%" in text
    assert "regressions:" not in text         # the gate alone decides the exit code
  code, lines, text = _diff(runs, "tripled", "rows8")
  assert code == 0 and _verdict(lines) == "better" and "instructions (per program) -66.7%" in text
  code, lines, text = _diff(runs, "rows8", "rows8")
  assert code == 0 and _verdict(lines) == "same" and "worse:" not in text
  assert "verdict: worse or better where a figure moved beyond its noise" in text


def test_a_runtime_within_its_noise_is_the_same_beyond_it_worse(runs, tmp_path):
  timed = lambda median: lambda k: k.update(runtime={"median_s": median})
  runs = _edited(runs, tmp_path, "base", timed(100e-6))
  runs = _edited(runs, tmp_path, "noisy", timed(103e-6))
  runs = _edited(runs, tmp_path, "slower", timed(150e-6))
  code, lines, _ = _diff(runs, "base", "noisy")
  assert code == 0 and _verdict(lines) == "same", lines
  code, lines, text = _diff(runs, "base", "slower")
  assert code == 0 and _verdict(lines) == "worse" and "SLOWER (per launch) by 50.0%" in text
  code, lines, text = _diff(runs, "slower", "base")
  assert code == 0 and _verdict(lines) == "better" and "faster (per launch) by 33.3%" in text
  # a gate tighter than the noise: what fails it is not called `same`
  code, lines, text = _diff(runs, "base", "noisy", "--fail-on-regression", "2")
  assert code == 1 and _verdict(lines) == "worse" and "SLOWER (per launch) by 3.0%" in text


def test_the_report_a_failed_line_points_to_shows_the_failure_in_full(runs):
  """The issue: diff's FAILED line said `pallas-prof report DIR` shows it in full; that
  printed one line of it. It prints the error as the live run did: the kernel, the
  reason, the user's line marked, the hint."""
  _, _, text = _diff(runs, "in_bounds", "reads_past")
  assert f"`pallas-prof report {runs['reads_past']}` shows it in full" in text
  shown = pallas_prof("report", str(runs["reads_past"]))
  assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
  out = shown.stdout
  assert "pallas-prof: kernel `kernel` failed at run time, at `get`" in out
  assert "it reads 4 element(s) outside x_ref" in out
  assert f"--> {runs['reads_past'].parent / 'reads_past.py'}:7 in kernel" in out
  assert "  >> 7 |   o_ref[...] = x_ref[pl.ds(i * 8 + 4, 8)] * 2.0" in out
  assert "  hint: an index of this `get` lies outside its ref: PALLAS_PROF_CHECK=bounds" in out
  # a run that went through prints no error
  fine = pallas_prof("report", str(runs["in_bounds"]))
  assert fine.returncode == 0 and "failed" not in fine.stdout, fine.stdout


def test_a_kernel_that_failed_gets_no_advice_but_says_it_failed(runs):
  """Issue 39, item 4: a kernel that read out of bounds (the script ended, or caught it
  and went on) was given advice on its blocks. It gets none, in report.json, the terminal
  and report.html, and each says the kernel failed instead."""
  for name, how in (("reads_past", "at run time at reads_past.py:7: "),
                    ("caught", "at run time (the script caught it) at caught.py:7: ")):
    report = json.loads((runs[name] / "report.json").read_text())
    (kernel,) = report["kernels"]
    assert report["advice"] == [] and kernel["failed"].startswith(how), kernel["failed"]
    shown = pallas_prof("report", str(runs[name]))
    text = " ".join(shown.stdout.split())
    assert f"no advice for {kernel['label']}: it failed {how}" in text, shown.stdout
    assert f"advice for {kernel['label']} (" not in text and "kinds:" not in text
    page = (runs[name] / "report.html").read_text()
    assert "<dt>failed</dt>" in page and 'class="advice"' not in page
  # a kernel that worked keeps its advice
  shown = pallas_prof("report", str(runs["in_bounds"]))
  assert "advice for kernel#" in shown.stdout and "no advice" not in shown.stdout
