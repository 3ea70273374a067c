#!/usr/bin/env bash
# Issue 41's proof of the pytest gate on a GPU (run from the repository root on the
# device machine, after bench/gpu_session.sh's set-up, with $OUT set):
#   1. the baseline is written with num_stages=3 (--pallas-prof-update);
#   2. the unchanged kernel is gated RUNS times in a row, each a fresh pytest process:
#      every run must pass (no flakes);
#   3. num_stages 3 -> 1 (the planted regression) must fail, naming the kernel and its time.
# Each run's exit code, duration and last lines go to $OUT/gate/.
set -u
RUNS=${GATE_RUNS:-20}
WORK=/tmp/gate_proof; rm -rf "$WORK"; mkdir -p "$WORK" "$OUT/gate"
cp bench/gate/test_matmul_gate.py "$WORK/"
gate() {   # gate NAME STAGES FLAGS...
  local name=$1 stages=$2; shift 2
  local t0=$(date +%s%N)
  (cd "$WORK" && GATE_NUM_STAGES=$stages timeout 240 python3 -m pytest -q -p no:cacheprovider \
     -p pallas_prof.pytest_plugin "$@" test_matmul_gate.py > "$OUT/gate/$name.log" 2>&1)
  local rc=$?
  echo "$name stages=$stages rc=$rc ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$OUT/gate/runs.txt"
}
gate update 3 --pallas-prof-update
cp -r "$WORK/.pallas-prof" "$OUT/gate/baseline"
for i in $(seq 1 "$RUNS"); do gate "same_$i" 3 --pallas-prof; done
gate regression 1 --pallas-prof
echo "unchanged runs passed: $(grep -c '^same_.* rc=0 ' "$OUT/gate/runs.txt") of $RUNS"
echo "--- the regression run:"; tail -30 "$OUT/gate/regression.log"
echo "--- the last unchanged run:"; tail -8 "$OUT/gate/same_$RUNS.log"
