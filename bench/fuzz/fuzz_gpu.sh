#!/usr/bin/env bash
# The GPU fuzz run of issue 32 (50,000 programs or more), in two calls of under nine
# minutes each on one H200 (16 cores; 14 jobs ran about 60 programs a second):
#
#   PALLAS_PROF_COMMIT=<sha> bash bench/fuzz/fuzz_gpu.sh a      # call 1, seed 20261213
#   PALLAS_PROF_COMMIT=<sha> bash bench/fuzz/fuzz_gpu.sh b      # call 2, seed 20261214
#   PALLAS_PROF_COMMIT=<sha> bash bench/fuzz/fuzz_gpu.sh leads  # the CPU's hazard leads, ~2 min
#
# then, here: python3 bench/fuzz/fuzz_summary.py --merge fuzz_gpu_a.json fuzz_gpu_b.json --out ...
#
# Each fuzz call: 14 jobs (job k of kind k mod 7 of values,kernels,hazards,values,hazards,
# kernels,scans: 4 values, 4 grid-kernel, 4 hazard and 2 scan jobs), jobs 0 and 1 bounds-checked
# (PALLAS_PROF_CHECK=bounds), FUZZ_SECONDS (default 430: two calls at 60 programs a second
# make 51,600) of wall clock; at most 500 keeps a call under nine minutes. The summary is
# written to $OUT every 15 s and at the end (also on the timeout's SIGTERM), the programs'
# log as one gzip beside it, the reproducers as repro_<part>.tgz (a finding's inputs are
# only in its reproducer; a summary carries its source). The scan jobs' kernels that
# Triton 3.6 cannot compile (issue 28) run in the forms pallas-prof's workarounds pick:
# the GPU checks those forms' numbers.
set -uo pipefail
cd "$(dirname "$0")/../.."   # the repository root (this script is in bench/fuzz/)
part=${1:?"a, b or leads"}
out=${OUT:-/tmp/fuzz_gpu_out}
mkdir -p "$out" /tmp/fz
# 14 JAX processes share the GPU: none may take most of its memory up front
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false

if [ "$part" = leads ]; then
  # the strong hazard leads the CPU's --compile-sm90 runs recorded, each on 8 inputs, and
  # the GPU tests of the hazard (seed 18680 and a user's window select)
  timeout 200 python3 bench/fuzz/fuzz_replay.py bench/results/fuzz_cpu_*_sm90.json --device gpu \
    --inputs 8 --out "$out/replay_gpu.json" 2>&1 | tee "$out/replay_gpu.txt" | tail -20
  timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/fuzz/test_fuzz_sm90.py \
    tests/backend/compiling/test_ptxas_hazards.py 2>&1 | tee "$out/hazards_pytest_gpu.txt" | tail -20
  exit 0
fi

# FUZZ_SEED: a fresh seed for each session's run (the defaults are the first run's);
# part b takes the next one, so that a and b never run the same programs
case "$part" in
  a) seed=${FUZZ_SEED:-20261213} ;;
  b) seed=$(( ${FUZZ_SEED:-20261213} + 1 )) ;;
  *) echo "bench/fuzz/fuzz_gpu.sh: a, b or leads, not '$part'" >&2; exit 2 ;;
esac
seconds=${FUZZ_SECONDS:-430}
# FUZZ_DEVICE=cpu FUZZ_JOBS=2: the same run on a machine without a GPU (a smoke test)
timeout -s TERM $((seconds + 25)) python3 bench/fuzz/fuzz.py --device "${FUZZ_DEVICE:-gpu}" \
  --jobs "${FUZZ_JOBS:-14}" --check-jobs 2 \
  --job-kinds values,kernels,hazards,values,hazards,kernels,scans \
  --seconds "$seconds" --examples 1000000 --seed "$seed" \
  --out "$out/fuzz_gpu_$part.json" --log "/tmp/fz/$part.jsonl" \
  --log-gz "$out/fuzz_gpu_$part.jsonl.gz" --corpus "/tmp/fz/repro_$part" 2>&1 | tail -40
rc=$?
# the findings' reproducers (their inputs), tarred: a copy of the folder loses its deep files
if [ -d "/tmp/fz/repro_$part" ]; then tar czf "$out/repro_$part.tgz" -C /tmp/fz "repro_$part"; fi
exit $rc
