"""The known-answer corpus (tests/profiler/ground_truth.py) on the CPU: static weights.

Static weights are instructions times loop trips, not time (docs/report.md), so they are
judged on what instructions can show: the heavy lines hold the instructions the
construction puts there, and no cheap line holds more than 10 %. The GPU's measured
answers are recorded in bench/results (bench/profiler/ground_truth_gpu.sh). A line that
lost its library code, a decomposition charged to the pallas_call, or loop trips left out
of the weights each fail a kernel here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_prof.backend import kernel_registry
from testkit.helpers import pallas
from tests.profiler import ground_truth_checks as checks

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(os.path.dirname(HERE), "ground_truth.py")


@pytest.fixture(scope="module")
def corpus_report(tmp_path_factory):
  out = tmp_path_factory.mktemp("ground_truth") / "run"
  result = subprocess.run([sys.executable, "-m", "pallas_prof.cli.main", "run", "--out",
                           str(out), CORPUS], capture_output=True, text=True, timeout=600)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  with open(out / "report.json") as f:
    return json.load(f)


def test_every_corpus_kernel_ran_right_and_was_weighed(corpus_report):
  names = {k["name"] for k in corpus_report["profile"]["kernels"]}
  assert set(checks.ground_truth.kernels_in_this_file()) <= names
  for k in corpus_report["profile"]["kernels"]:
    assert k["attribution"]["basis"] == "static"
    assert "loop trips" in k["attribution"]["description"]


def test_the_static_answers_put_the_work_on_the_marked_lines(corpus_report):
  verdicts = {v.kernel: v for v in checks.verdicts(corpus_report)}
  assert len(verdicts) == len(checks.ground_truth.kernels_in_this_file())
  failed = [v.row() for v in verdicts.values() if not v.passed]
  assert not failed, "\n".join(failed)


def test_the_closing_table_has_a_row_per_kernel_and_a_column_per_basis(corpus_report):
  """--table: one row per corpus kernel with its heavy lines and the static column's
  shares, a failing verdict shown as such."""
  rows = checks.table([corpus_report])
  assert rows[0] == ("| kernel | heavy lines (construction) | static: heavy / worst cheap |")
  body = rows[2:]
  assert len(body) == len(checks.ground_truth.kernels_in_this_file())
  verdicts = {v.kernel: v for v in checks.verdicts(corpus_report)}
  for row in body:
    kernel = row.split("|")[1].strip()
    v = verdicts[kernel]
    assert f"{100 * v.heavy:.1f} % (>= {100 * v.want_heavy:.0f})" in row
    assert ("PASS" in row) == v.passed
  # a kernel whose heavy lines weigh nothing fails in its row
  broken = json.loads(json.dumps(corpus_report))
  (k,) = [k for k in broken["profile"]["kernels"] if k["name"] == "gt_sin_large_kernel"]
  for row in k["attribution"].get("lines") or []:
    row["user_line"] = None
  (row,) = [r for r in checks.table([broken]) if "| gt_sin_large_kernel |" in r]
  assert "**FAIL**" in row and "0.0 %" in row


def test_a_decomposition_and_what_it_nests_keep_the_line_of_the_equation_lowered():
  """erf_inv is lowered by tracing a polynomial (a decomposition) holding jnp.where's own
  jaxprs: every equation of it is the erf_inv line's, none the pallas_call's."""

  def erfinv_kernel(x_ref, o_ref):
    def body(i, v):
      return jax.scipy.special.erfinv(v * 0.5)
    o_ref[...] = jax.lax.fori_loop(0, 2, body, x_ref[...])
  line = erfinv_kernel.__code__.co_firstlineno + 2
  x = np.linspace(-0.9, 0.9, 256, dtype=np.float32)

  def call(x):       # under jit, a pallas_call of this file's: the frame the lowering had
    return pallas(erfinv_kernel, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
  out = jax.jit(call)(x)
  want = jax.scipy.special.erfinv(jax.scipy.special.erfinv(x * 0.5) * 0.5)
  np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-5, atol=1e-6)
  gk = kernel_registry.find("erfinv_kernel")[-1].generated
  nested = [e for e in gk.eqns if ".decomposition." in f".{e.path}."]
  from pallas_prof.backend import compat
  helper = jax.make_jaxpr(compat.erf_inv_lowering_helper())(x).jaxpr
  if any(q.primitive.name in ("pjit", "jit", "closed_call") for q in helper.eqns):
    # jnp.where's jaxpr is in there (jax 0.12.1 writes the polynomial with lax.polynomial)
    assert any(".call." in f".{e.path}." for e in nested)
  assert nested and {e.line for e in nested} == {line}, \
      sorted({(e.path, e.line) for e in nested if e.line != line})[:5]
