#!/usr/bin/env bash
# Issue 47: the ground-truth corpus (tests/profiler/ground_truth.py) measured on a GPU, by
# PC sampling (and ncu's source counters for the sin kernel), with the Triton on PYTHONPATH.
# From the repository root of the device machine, .whl carried:
#   OUT=... TAG=triton39 bash bench/profiler/ground_truth_gpu.sh
# Everything lands in $OUT/ground_truth_$TAG.tar.gz (run directories with report.json), and
# the judged table is printed (tests/profiler/ground_truth_checks.py).
set -u
FINAL_OUT=${OUT:-/tmp/out}
TAG=${TAG:-run}
W=/tmp/gt_$TAG
mkdir -p "$W" "$FINAL_OUT"
PP="python3 -m pallas_prof.cli.main"
echo "$PALLAS_PROF_COMMIT" > "$W/commit"
python3 -c "import triton, jax; print('triton', triton.__version__, 'jax', jax.__version__)" | tee "$W/versions"
timeout ${GT_TIMEOUT:-300} $PP run --out "$W/sampled" tests/profiler/ground_truth.py --large > "$W/sampled.log" 2>&1
echo "run exit $?"; grep -E "max relative|DIFFER" "$W/sampled.log" | head -30
NCU_REPORT=""
if [ "${GT_NCU:-1}" = 1 ]; then
  timeout ${GT_NCU_TIMEOUT:-150} $PP run --out "$W/ncu" --ncu --kernel gt_sin_large_kernel \
    tests/profiler/ground_truth.py --large > "$W/ncu.log" 2>&1
  echo "ncu run exit $?"
  [ -f "$W/ncu/report.json" ] && NCU_REPORT="$W/ncu/report.json"
fi
python3 tests/profiler/ground_truth_checks.py --lines "$W/sampled/report.json" $NCU_REPORT 2>&1 | tee "$W/table.txt"
python3 tests/profiler/ground_truth_checks.py --table "$W/sampled/report.json" $NCU_REPORT 2>&1 | tee "$W/closing_table.md"
tar czf "$FINAL_OUT/ground_truth_$TAG.tar.gz" -C /tmp "gt_$TAG"
