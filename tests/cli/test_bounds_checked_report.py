"""Issue 39, item 5: a run whose kernels were built bounds-checked (PALLAS_PROF_CHECK=bounds
or pallas_prof.install(check_bounds=True)) says so in the terminal, report.json and
report.html, before any figure: its timings, registers and instructions are the checked
build's, and were taken for the kernel's. Runs on the CPU (Triton's interpreter)."""
from __future__ import annotations

import json
import textwrap

import pytest

from tests.cli.test_cli import pallas_prof

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl
    import pallas_prof
    INSTALL

    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...] * 2.0

    spec = pl.BlockSpec((8,), lambda i: (i,))
    pl.pallas_call(kernel, grid=(4,), in_specs=[spec], out_specs=spec,
                   out_shape=jax.ShapeDtypeStruct((32,), jnp.float32))(jnp.ones(32))
    """)
SAID = "bounds-checked run (PALLAS_PROF_CHECK=bounds or install(check_bounds=True))"


def _run(tmp_path, install: str = ""):
  script = tmp_path / "checked.py"
  script.write_text(SCRIPT.replace("INSTALL", install))
  out = tmp_path / "out"
  result = pallas_prof("run", "--out", str(out), str(script), cwd=tmp_path)
  assert result.returncode == 0, result.stdout + result.stderr
  return result, json.loads((out / "report.json").read_text()), (out / "report.html").read_text()


@pytest.mark.parametrize("how", ["environment", "install"])
def test_a_bounds_checked_run_says_so_everywhere(tmp_path, monkeypatch, how):
  if how == "environment":
    monkeypatch.setenv("PALLAS_PROF_CHECK", "bounds")
  result, report, page = _run(tmp_path, "pallas_prof.install(check_bounds=True)"
                              if how == "install" else "")
  (kernel,) = report["kernels"]
  assert kernel["bounds_checked"] is True
  lines = result.stdout.splitlines()
  assert lines[0].startswith("pallas-prof checked.py  exit 0")
  said = " ".join(" ".join(lines[1:4]).split())         # the line after the heading
  assert said.startswith(f"{SAID}: every load and store of the kernels was checked, so the "
                         "timings, registers and instructions here are the checked build's")
  assert "<dt>bounds checks</dt>" in page and "the checked build&#39;s" in page
  again = pallas_prof("report", str(tmp_path / "out"))
  assert SAID in " ".join(again.stdout.split())


def test_an_unchecked_run_says_nothing_of_it(tmp_path, monkeypatch):
  monkeypatch.delenv("PALLAS_PROF_CHECK", raising=False)
  result, report, page = _run(tmp_path)
  assert report["kernels"][0]["bounds_checked"] is False
  assert "bounds-checked" not in result.stdout and "bounds checks" not in page
