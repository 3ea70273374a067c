#!/usr/bin/env bash
# Issue #18's proof on one H200 within SLOT seconds (default 480):
#   bash bench/sanitize/final_reliability.sh
# from the repository root, wheels installed in /tmp/site, PYTHONPATH=$PWD:/tmp/site.
#  1. compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over the examples,
#     flash attention, JAX's GPU ops (norms fwd+bwd, attention fwd+bwd) and 20 fuzz
#     programs: bench/sanitize/sanitize_gpu.sh, in the background, 3 runs at a time;
#  2. the GPU tests of #18 (an illegal read is a BoundsError naming the line and the
#     process computes afterwards; every access path; poisoned outputs; valid fuzz
#     kernels in check mode; coverage; scan over arrays; float64 -> 16-bit rounding);
#  3. the rounding probe and check mode's cost on the examples' kernels;
#  4. the differential fuzzer on the GPU, 14 jobs (2 in check mode), for the time left.
# Everything goes into ONE archive, $OUT/reliability.tgz; the lines that matter are
# printed (the console's tail is what always comes back from the device).
set -u
FINAL_OUT=${OUT:-/tmp/out}
W=/tmp/reliability-final
rm -rf "$W"; mkdir -p "$W" "$FINAL_OUT"
export PYTHONPATH=${PYTHONPATH:-$PWD:/tmp/site} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PALLAS_PROF_CACHE_DIR=/tmp/ppcache-final-reliability
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
SLOT=${SLOT:-480}                       # seconds this script may take in all
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
log() { echo "== reliability $(elapsed)s: $*"; }
pack() { tar czf "$FINAL_OUT/reliability.tgz" -C "$W" . 2>/dev/null; }
trap pack EXIT
echo "commit $COMMIT" > "$W/commit.txt"

log "compute-sanitizer, 4 tools x 5 programs, ${SANITIZE_PARALLEL:-3} at a time, in the background"
(OUT=$W COMMIT=$COMMIT PARALLEL=${SANITIZE_PARALLEL:-3} BUDGET=${SANITIZE_BUDGET:-400} \
   STEP_TIMEOUT=${SANITIZE_STEP_TIMEOUT:-200} FUZZ_EXAMPLES=20 FUZZ_SECONDS=40 \
   timeout $(( ${SANITIZE_BUDGET:-400} + 15 )) bash bench/sanitize/sanitize_gpu.sh > "$W/sanitizer_console.txt" 2>&1) &
sanitizer=$!

log "pytest (GPU): bounds, access paths, poisoning, coverage, scan, rounding"
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 -rfE --durations=5 \
  tests/backend/running/test_bounds_gpu.py tests/backend/lowering/test_bounds.py tests/backend/lowering/test_bounds_paths.py \
  tests/backend/lowering/test_coverage.py tests/backend/lowering/rules/test_scan_arrays.py \
  tests/backend/lowering/rules/test_elementwise.py::test_convert_float64 \
  tests/backend/lowering/rules/test_elementwise.py::test_float64_to_16bit_rounding_follows_the_xla_of_the_platform_lowered_for \
  tests/cli/test_eject.py \
  tests/fuzz/test_fuzz.py::test_where_xla_cpu_and_gpu_disagree_pallas_prof_follows_its_device \
  --junitxml="$W/pytest.xml" > "$W/pytest.txt" 2>&1
echo "pytest exit $?"; grep -E "^(FAILED|ERROR)|passed|failed|s (call|setup) " "$W/pytest.txt" | cut -c1-160 | tail -16

log "rounding probe (XLA CPU / XLA GPU / pallas-prof on ties)"
timeout 20 python3 bench/probes/convert_rounding.py --out "$W/convert_rounding.json" \
  > "$W/convert_rounding.txt" 2>&1
grep -E "^(jax|float64|int32)" "$W/convert_rounding.txt" | cut -c1-110

if [ "${BOUNDS_COST:-1}" = 1 ]; then   # BOUNDS_COST=0 where the sanitizer shares the GPU
  log "check mode's cost"
  timeout 25 python3 bench/cost/bounds_cost.py --reps 15 --out "$W/bounds_cost_h200.json" 2>&1 \
    | grep "same results" | tail -4
fi

wait "$sanitizer"
log "sanitizer done"
grep -v "^GPU\|^compute-sanitizer" "$W/sanitizer/summary.txt" 2>/dev/null | cut -c1-330

left=$(( SLOT - $(elapsed) - 14 ))
if [ "${FUZZ:-1}" = 0 ]; then log "fuzzer skipped (FUZZ=0)"; exit 0; fi
[ "$left" -lt 30 ] && left=30
log "fuzzer on the GPU for ${left}s: ${FUZZ_JOBS:-14} jobs, 2 of them in check mode"
timeout $(( left + 12 )) python3 bench/fuzz/fuzz.py --device ${FUZZ_DEVICE:-gpu} --jobs ${FUZZ_JOBS:-14} --check-jobs 2 \
  --seconds "$left" --examples 100000 --seed ${FUZZ_SEED:-20261202} --out "$W/fuzz_gpu.json" \
  --corpus "$W/fuzz_gpu_repro" > "$W/fuzz_console.txt" 2>&1
python3 - "$W/fuzz_gpu.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"fuzz: {s['examples']} examples in {s['seconds']} s ({s['examples_in_check_mode']} in check "
      f"mode), outcomes {s['outcomes']}, differences {s['differences_found']}, "
      f"crashes {len(s['crashes'])} (and {len(s['reference_crashes'])} of the reference), "
      f"XLA disagreeing with itself {len(s['xla_disagrees_with_itself'])}")
for d in (s["differences"] or s["differences_unshrunk"])[:3]:
  print("DIFFERENCE:", d["message"][:300].replace("\n", " | "))
  print("  ", d["source"][:600].replace("\n", " | "))
for d in s["xla_disagrees_with_itself"][:2]:
  print(d["status"], d["detail"][:200].replace("\n", " | "))
for c in s["crashes"][:3]:
  print("CRASH:", c)
EOF
log "done (archive: \$OUT/reliability.tgz)"
