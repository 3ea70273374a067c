"""bench/fuzz/fuzz.py --compile-sm90's checks (testkit/fuzz/sm90.py): each program's kernels
compiled for sm_90 on the CPU; a stage failure is a finding, shrunk, with a reproducer; the
SASS is read for the ptxas hazard of issue 32, whose strong leads come with theirs. The
runner's side (its worker, summary and replay) is tested in bench/tests/test_fuzz_sm90.py."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from testkit.fuzz import sm90
from testkit.fuzz.check import check, save_reproducer
from testkit.fuzz.findings import FUZZ_18680
from testkit.fuzz.programs import InputSpec, Program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _old_window_test(lanes, start, size):
  """dynamic_update_slice's window test before e05b0f8: two comparisons and an `and`."""
  return f"(({lanes} >= {start}) & ({lanes} < {start} + {size}))"


@pytest.mark.parametrize("old_form,ptx_rewrites", [(False, True), (True, False), (True, True)])
def test_the_sm90_mode_sees_the_miscompile_of_seed_18680_only_in_the_old_form(monkeypatch,
                                                                             old_form,
                                                                             ptx_rewrites):
  """Run as the fuzzer runs it (check on the CPU, then compile_sm90): the lowering
  before e05b0f8, with the PTX handed to ptxas as Triton wrote it, gives the strong
  lead (an in-place predicated select whose register packed 16-bit math reads
  after it); today's lowering none, and the old one none either once the PTX's
  nested selects are one (backend/compiling/ptx_rewrites.py)."""
  from pallas_prof.backend.compiling import ptx_rewrites as rewrites
  from pallas_prof.backend.lowering.rules import shape
  if old_form:
    monkeypatch.setattr(shape, "window_test", _old_window_test)
  if not ptx_rewrites:
    monkeypatch.setenv(rewrites.ENV, "0")
  old_form = old_form and not ptx_rewrites
  sm90.forget(FUZZ_18680)
  assert check(FUZZ_18680).status == "ok"      # right under the interpreter either way
  outcome = sm90.compile_sm90(FUZZ_18680)
  sm90.forget(FUZZ_18680)
  assert outcome.status == "compiled" and outcome.kernels == 1, outcome
  if old_form:
    assert [lead.strong for lead in outcome.leads] == [True], outcome.leads
    assert any("HFMA2" in r for r in outcome.leads[0].readers), outcome.leads
  else:
    assert outcome.leads == [], outcome.leads


# issue 28's selective-scan step as the fuzzer shrank it (bench/results/
# fuzz_cpu_9d109f4_seed20261210_sm90.json): Triton 3.6 asserts in ScanOpToLLVM.cpp
SCAN_STEP = Program(
    "values",
    "def fn(x0, x1, x2):\n  v3 = jnp.cumsum(x1[:, None], axis=0) * x1[None, :]\n"
    "  v4 = jnp.exp(jnp.clip(-v3, -5, 5))\n  v5 = jnp.cumsum((x1 * x1)[:, None] * v4, axis=0)\n"
    "  v6 = jnp.clip(v5, -10000, 10000)\n  return (v6,)\n",
    (InputSpec((1,), "float32"), InputSpec((16,), "float32"), InputSpec((1,), "float32")), 3,
    2e-4, 300.0, ("clip", "cumsum", "unary"))


@pytest.mark.parametrize("workarounds", ["0", "1"])
def test_a_triton_scan_failure_is_named_by_its_assertion_or_worked_around(
    monkeypatch, tmp_path, workarounds):
  """Compiled as a GPU run compiles it: with pallas-prof's workarounds off, the
  stage failure's signature (one per bug) is Triton's assertion, and its fault
  Triton's; on, the kernel compiles, and the summary learns which workaround it took."""
  import triton
  from pallas_prof.backend.compiling.failures import workarounds as pallas_workarounds
  monkeypatch.setenv("PALLAS_PROF_WORKAROUNDS", workarounds)
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))     # no plan remembered
  pallas_workarounds.forget_all()
  sm90.forget(SCAN_STEP)
  assert check(SCAN_STEP).status == "ok"              # right under the interpreter
  outcome = sm90.compile_sm90(SCAN_STEP)
  sm90.forget(SCAN_STEP)
  pallas_workarounds.forget_all()
  if not triton.__version__.startswith("3.6"):
    pytest.skip(f"Triton {triton.__version__}: the scan bug is 3.6's ({outcome.status})")
  if workarounds == "0":
    assert outcome.status == "stage_failure" and outcome.fault == "triton", outcome
    assert outcome.signature.startswith("llir: ScanOpToLLVM.cpp:158"), outcome.signature
  else:
    assert outcome.status == "compiled" and outcome.workarounds == ["scan squeeze"], outcome
    assert outcome.to_dict()["workarounds"] == ["scan squeeze"]
  never_run = Program("values", "", (), 6, 0.0)
  sm90.forget(never_run)           # another test in this process may have run a seed 6
  assert sm90.compile_sm90(never_run).status == "no_kernel"


def test_a_signature_is_the_assertion_else_the_pass_else_the_summary():
  assert sm90.signature({"stage": "llir", "assertion": "ScanOpToLLVM.cpp:158 in F: `c`",
                         "failing_pass": "P"}) == "llir: ScanOpToLLVM.cpp:158 in F: `c`"
  assert sm90.signature({"stage": "llir", "failing_pass": "P"}) == "llir: P failed"
  assert sm90.signature({"stage": "ptx", "summary": "ptxas: line 1234 of 0x1f"}) == \
      "ptx: ptxas: line N of N"


def test_a_reproducer_compiles_for_sm90_when_asked(tmp_path):
  program = Program("values", "def fn(x0):\n  v1 = lax.cummax(x0, axis=0, reverse=True)\n"
                    "  return (v1,)\n", (InputSpec((7, 3), "int32", -9, 9),), 11, 0.0,
                    num_warps=2)
  path = save_reproducer(program, "a test", str(tmp_path))
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
  done = subprocess.run([sys.executable, path, "sm90"], capture_output=True, text=True,
                        cwd=ROOT, env=env, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "Outcome(status='ok'" in done.stdout
  assert "Sm90Outcome(status='compiled', kernels=1" in done.stdout, done.stdout[-2000:]


# A user's select on a window of lanes [s, s + 3) (two comparisons joined by &), its
# else-value v3 still live: the shape of seed 18680 with no dynamic_update_slice, which
# e05b0f8's window_test cannot reach. On the CPU machine (Triton 3.6's ptxas, sm_90) its
# SASS has the strong lead (@P0 SEL R3, R6, R3, !P3 read by HMUL2 and HFMA2.MMA), in
# float16 and bfloat16 alike: whether the GPU computes it right is this test's question.
USER_WINDOW_SELECT = (
    "def fn(x0, x1, x2):\n"
    "  v3 = jnp.min(x2, axis=0)\n"
    "  v4 = v3 * v3\n"
    "  v5 = v3 * v4\n"
    "  s = jnp.min(x0).astype(jnp.int32) % 21\n"
    "  lanes = lax.broadcasted_iota(jnp.int32, (19,), 0)\n"
    "  v6 = jnp.where((lanes >= s) & (lanes < s + 3), v3 * 2, v3)\n"
    "  return (v5, x1 * v6, jnp.broadcast_to(v4, (1, 19)))\n")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_users_window_select_with_its_else_value_live_is_right_on_the_gpu(dtype):
  import dataclasses
  import jax
  gpu = jax.devices("gpu")[0]
  program = Program("values", USER_WINDOW_SELECT, tuple(InputSpec((10, 19), dtype)
                                                        for _ in range(3)), 0, 6e-2, 300.0,
                    ("compound select", "reduce", "binary"))
  for seed in range(12):      # starts 0 .. 20 from the data: inside, at the edge, past it
    assert check(dataclasses.replace(program, seed=seed), gpu).status == "ok"
