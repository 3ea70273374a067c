"""Issue 32's packed int16 adds, as the fuzzer's sm_90 mode sees them in a reproducer of the
corpus (read with bench/probes/fuzz_repro_gpu.py's loader); the rewrite itself is tested in
tests/backend/compiling/test_packed_int16_adds.py."""
from __future__ import annotations

import os

from pallas_prof.backend.compiling import ptx_rewrites

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_fuzzers_sm90_mode_counts_a_lost_constant(monkeypatch):
  """bench/fuzz/fuzz.py --compile-sm90 records each dropped constant (testkit/fuzz/sm90.py):
  seed 1250's program has one with the PTX as Triton wrote it (Triton 3.6), none after."""
  import triton
  from bench.probes.fuzz_repro_gpu import load_program
  from testkit.fuzz import sm90
  from testkit.fuzz.check import check
  program = load_program(os.path.join(
      ROOT,
      "bench/corpus/fuzz_gpu_h200_12c95b8_seed20261203_repro/"
      "unshrunk/repro_values_1250_0a2a75a5.py"))
  counts, records = {}, {}
  for flag in ("0", "1"):
    monkeypatch.setenv(ptx_rewrites.ENV, flag)
    sm90.forget(program)
    assert check(program).status == "ok"        # right under the interpreter either way
    outcome = sm90.compile_sm90(program)
    assert outcome.status == "compiled", outcome
    counts[flag], records[flag] = len(outcome.lost_constants), outcome.to_dict()
  sm90.forget(program)
  assert counts["1"] == 0 and "lost_constants" not in records["1"]
  if triton.__version__.startswith("3.6"):
    assert counts["0"] == 1
    assert records["0"]["lost_constants"][0].startswith("VIADD.16x2"), records["0"]
