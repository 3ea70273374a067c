"""bench/fuzz/fuzz.py --compile-sm90 (tests/fuzz/sm90.py): each program's kernels compiled
for sm_90 on the CPU; a stage failure is a finding, shrunk, with a reproducer; the
SASS is read for the ptxas hazard of issue 32, whose strong leads come with theirs."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from bench.fuzz import fuzz
from tests.fuzz import sm90
from tests.fuzz.check import check, save_reproducer
from tests.fuzz.programs import InputSpec, Program
from tests.fuzz.sass_hazards import HazardLead

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# seed 18680's program (issue 32), as the fuzzer found it
FUZZ_18680 = Program(
    "values",
    "def fn(x0, x1, x2):\n"
    "  v3 = jnp.min(x2, axis=0, keepdims=False)\n"
    "  v4 = v3 * v3\n"
    "  v5 = v3 * v4\n"
    "  v6 = lax.dynamic_update_slice_in_dim(v3, v3[0:3] * 2, jnp.min(x0).astype(jnp.int32) % 21,"
    " axis=0)\n"
    "  v7 = x1 * v6\n"
    "  v8 = jnp.broadcast_to(v4, (1, 19))\n"
    "  return (v5, v7, v8,)\n",
    tuple(InputSpec((10, 19), "float16") for _ in range(3)), 18680, 1e-2, 300.0,
    ("dynamic_update_slice", "binary", "reduce", "broadcast"))


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


def _fake_compiles(monkeypatch, outcome):
  monkeypatch.setattr(sm90, "compile_sm90", lambda program: outcome)


def _worker_args(tmp_path, **more):
  return argparse.Namespace(device="cpu", kind="scans", log=str(tmp_path / "fuzz.jsonl"), seed=3,
                            batch=4, examples=100, seconds=None, shrink=True, once=True,
                            corpus=str(tmp_path / "repro"), compile_sm90=True, **more)


def test_a_stage_failure_is_kept_unshrunk_then_shrunk_and_summarized(tmp_path, monkeypatch):
  _fake_compiles(monkeypatch, sm90.Sm90Outcome("stage_failure", 1, "LoweringError: made up",
                                               "llir: made up"))
  args = _worker_args(tmp_path)
  fuzz.worker(args)
  records = [json.loads(line) for line in open(args.log)]
  first = [r for r in records if r["status"] == "sm90_candidate" and "reproducer" in r]
  assert len(first) == 1 and "/unshrunk/" in first[0]["reproducer"], records[:3]
  [final] = [r for r in records if r["status"] == "sm90_failure"]
  assert "/sm90/" in final["reproducer"] and final["signature"] == "llir: made up"
  assert "made up" in open(final["reproducer"]).read()
  summary = fuzz.summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu", seed=3),
                           0.0, [fuzz.Job(0, args.log, [3])], final=True)
  assert summary["sm90"]["stage_failures_found"] == 1
  assert summary["sm90"]["stage_failure_signatures"] == {"llir: made up": 1}
  assert summary["examples"] == 1 and summary["outcomes"]["sm90_failure"] == 1, summary


def test_a_strong_hazard_lead_comes_with_its_reproducer_and_program(tmp_path, monkeypatch):
  lead = HazardLead("@P0 SEL R3, R14, R3, !P3 ;", ("HMUL2 R5, R3.H0_H0, R6 ;",))
  _fake_compiles(monkeypatch, sm90.Sm90Outcome("compiled", 1, leads=[lead]))
  args = _worker_args(tmp_path)
  args.batch = 3
  fuzz.worker(args)
  records = [json.loads(line) for line in open(args.log)]
  assert len(records) == 3 and all(r["sm90"]["strong"] == 1 for r in records), records
  summary = fuzz.summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu", seed=3),
                           0.0, [fuzz.Job(0, args.log, [3])], final=True)
  part = summary["sm90"]
  assert part["hazard_selects"] == part["strong_hazard_selects"] == 3
  assert summary["differences_found"] == 0 and part["stage_failures_found"] == 0
  found = part["strong_hazard_leads"][0]
  assert "/hazard_leads/" in found["reproducer"] and found["leads"][0]["readers"]
  program = Program(**dict(found["program"], inputs=tuple(
      InputSpec(**dict(i, shape=tuple(i["shape"]))) for i in found["program"]["inputs"])))
  assert json.dumps(program.source) in open(found["reproducer"]).read()


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


def test_the_replay_runs_each_lead_on_several_inputs(tmp_path, monkeypatch):
  """bench/fuzz/fuzz_replay.py, here on the CPU (on the H200 with --device gpu): each strong
  lead a summary kept, rebuilt from its program and checked on --inputs input seeds."""
  from bench.fuzz import fuzz_replay
  from bench.fuzz.fuzz_summary import write_json
  program = dataclasses_asdict(FUZZ_18680)
  write_json(str(tmp_path / "s.json"), {"sm90": {"strong_hazard_leads": [
      {"reproducer": "r", "program": program}, {"reproducer": "no program kept"}]}})
  out = tmp_path / "replay.json"
  monkeypatch.setattr(sys, "argv", ["fuzz_replay.py", str(tmp_path / "s.json"), "--device",
                                    "cpu", "--inputs", "2", "--out", str(out)])
  fuzz_replay.main()
  result = json.loads(out.read_text())
  assert result["programs"] == 1 and result["runs"] == 2 and result["outcomes"] == {"ok": 2}
  assert [r["input_seed"] for r in result["each"]] == [18680, 18680 + 7919]


def dataclasses_asdict(program):
  import dataclasses
  return json.loads(json.dumps(dataclasses.asdict(program)))


def test_a_second_failure_met_while_shrinking_the_first_is_kept_too(tmp_path, monkeypatch):
  """Programs fail in two ways (by their source's length): the first met is shrunk; the
  other, met while the first shrinks (so not raised), still comes with its reproducer."""
  def two_ways(program):
    sig = ("llir: one", "ptx: two")[len(program.source) % 2]
    return sm90.Sm90Outcome("stage_failure", 1, f"LoweringError: {sig}", sig)

  monkeypatch.setattr(sm90, "compile_sm90", two_ways)
  args = _worker_args(tmp_path)
  fuzz.worker(args)
  summary = fuzz.summarize(argparse.Namespace(out=str(tmp_path / "s.json"), device="cpu", seed=3),
                           0.0, [fuzz.Job(0, args.log, [3])], final=True)["sm90"]
  assert set(summary["stage_failure_signatures"]) == {"llir: one", "ptx: two"}, summary
  kept = {f["signature"]: f["reproducer"] for f in summary["stage_failures_unshrunk"]}
  assert set(kept) == {"llir: one", "ptx: two"} and all(os.path.exists(p) for p in kept.values())
  assert len(summary["stage_failures"]) == 1, summary     # the first, shrunk
