"""bench/fuzz/fuzz.py --second-target (testkit/fuzz/second_target.py): each program's kernels
compiled for sm_80 and gfx942 in turns besides sm_90; compiled, refused with its reason, or
a stage failure (a finding, kept as a reproducer). The runner's summary of each target's
answers is tested in bench/tests/test_fuzz_targets.py."""
from __future__ import annotations

import os
import subprocess
import sys

from testkit.fuzz import second_target, sm90
from testkit.fuzz.check import check, save_reproducer
from testkit.fuzz.programs import InputSpec, Program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CUMMAX = Program("values", "def fn(x0):\n  v1 = lax.cummax(x0, axis=0, reverse=True)\n"
                 "  return (v1,)\n", (InputSpec((7, 3), "int32", -9, 9),), 11, 0.0, num_warps=2)


def test_the_second_target_is_sm80_and_gfx942_in_turns():
  assert [second_target.second_target(i) for i in range(4)] == ["sm_80", "gfx942"] * 2


def test_a_programs_kernels_compile_for_both_second_targets():
  """The real compile (Triton's ptxas for sm_80, its LLVM for gfx942), on the CPU."""
  sm90.forget(CUMMAX)
  assert check(CUMMAX).status == "ok"
  answers = [second_target.compile_for_target(CUMMAX, t) for t in ("sm_80", "gfx942")]
  sm90.forget(CUMMAX)
  assert [(a.target, a.status, a.kernels) for a in answers] == \
      [("sm_80", "compiled", 1), ("gfx942", "compiled", 1)], answers
  assert second_target.compile_for_target(CUMMAX, "sm_80").status == "no_kernel"


def test_a_failure_is_classified_with_its_target_and_a_refusal_keeps_its_reason(monkeypatch):
  """A LoweringError out of the compile (a workaround's lowering failed) is a stage failure
  whose signature names the target; a refused TargetOutcome stays a refusal, not a failure."""
  from pallas_prof import LoweringError
  from pallas_prof.backend.compiling import for_targets
  from pallas_prof.backend.targets import parse_target
  sm90.forget(CUMMAX)
  assert check(CUMMAX).status == "ok"

  def failing(gk, target, **kw):
    raise LoweringError("made up: the relowered kernel failed")
  monkeypatch.setattr(for_targets, "compile_for", failing)
  failed = second_target.compile_for_target(CUMMAX, "gfx942")
  assert failed.status == "stage_failure" and failed.signature.startswith("gfx942 "), failed
  assert "made up" in failed.reason and failed.to_dict()["signature"] == failed.signature

  class Refused:
    status, reason = "refused", "sm_80 has no float8_e4m3fn (NVIDIA GPUs have it from sm_89)"
  monkeypatch.setattr(for_targets, "compile_for", lambda gk, target, **kw: Refused)
  refused = second_target.compile_for_target(CUMMAX, parse_target("sm_80").name)
  sm90.forget(CUMMAX)
  assert (refused.status, refused.reason) == ("refused", Refused.reason), refused


def test_a_reproducer_compiles_for_a_second_target_when_asked(tmp_path):
  path = save_reproducer(CUMMAX, "a test", str(tmp_path))
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
  done = subprocess.run([sys.executable, path, "gfx942"], capture_output=True, text=True,
                        cwd=ROOT, env=env, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  assert "TargetCompile(target='gfx942', status='compiled', kernels=1" in done.stdout, \
      done.stdout[-2000:]
