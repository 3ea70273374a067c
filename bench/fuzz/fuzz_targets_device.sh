#!/usr/bin/env bash
# Issue 40's fuzz run with second-target compiles, on the device machine's host: a CPU run
# (JAX_PLATFORMS=cpu, so pallas-prof runs each kernel in Triton's interpreter on the host's
# cores, as on a CPU-only machine) and a GPU run beside it. By default both compile each
# program's kernels for sm_90 and for a second target, sm_80 and gfx942 in turns
# (testkit/fuzz/second_target.py).
# A run too long for one call is made of parts with consecutive seeds, merged here afterwards
# with `python3 bench/fuzz/fuzz_summary.py --merge ...`, as the GPU runs are.
#
#   PALLAS_PROF_COMMIT=<sha> CPU_SEED=<s> GPU_SEED=<g> bash bench/fuzz/fuzz_targets_device.sh
#
# CPU_JOBS (11) and GPU_JOBS (4) share the host's 16 cores (compiling is CPU-bound: a job a
# core); GPU_JOBS=0 or CPU_JOBS=0 leaves that run out. FUZZ_SECONDS (default 500) of wall clock
# each. CPU_ARGS and GPU_ARGS are each run's options, --second-target by default
# (CPU_ARGS="--second-target --no-sm90": the second target alone; a Triton carried without its
# AMD code generator compiles no gfx942, so GPU_ARGS="--check-jobs 2" fuzzes the GPU alone).
# The summaries are written every 15 s and on the timeout's SIGTERM, so a cut-off call still
# returns what ran. Everything lands in $OUT: fuzz_cpu.json, fuzz_gpu.json, their logs (gzip),
# the reproducers tarred.
set -uo pipefail
cd "$(dirname "$0")/../.."   # the repository root (this script is in bench/fuzz/)
out=${OUT:-/tmp/fuzz_targets_out}
mkdir -p "$out" /tmp/fzt
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
seconds=${FUZZ_SECONDS:-500}
cpu_jobs=${CPU_JOBS:-11}
gpu_jobs=${GPU_JOBS:-4}

run_part() {   # device jobs seed [options]: one fuzz run in the background, its output in $out
  local device=$1 jobs=$2 seed=$3; shift 3
  # shellcheck disable=SC2086 # the options are words on purpose
  timeout -s TERM $((seconds + 25)) python3 bench/fuzz/fuzz.py --device "$device" \
    --jobs "$jobs" "$@" --seconds "$seconds" --examples 1000000 --seed "$seed" \
    --out "$out/fuzz_$device.json" --log "/tmp/fzt/$device.jsonl" \
    --log-gz "$out/fuzz_$device.jsonl.gz" --corpus "/tmp/fzt/repro_$device" \
    > "$out/fuzz_$device.txt" 2>&1
}

pids=()
if [ "$cpu_jobs" -gt 0 ]; then
  # shellcheck disable=SC2086
  JAX_PLATFORMS=cpu run_part cpu "$cpu_jobs" "${CPU_SEED:?set CPU_SEED}" ${CPU_ARGS---second-target} &
  pids+=($!)
fi
if [ "$gpu_jobs" -gt 0 ]; then
  # shellcheck disable=SC2086
  run_part gpu "$gpu_jobs" "${GPU_SEED:?set GPU_SEED}" ${GPU_ARGS---second-target} & pids+=($!)
fi
rc=0
for pid in ${pids[@]+"${pids[@]}"}; do wait "$pid" || rc=$?; done
for device in cpu gpu; do
  [ -f "$out/fuzz_$device.txt" ] && { echo "== $device"; tail -30 "$out/fuzz_$device.txt"; }
  # the findings' reproducers (their inputs), tarred: a copy of the folder loses its deep files
  [ -d "/tmp/fzt/repro_$device" ] && tar czf "$out/repro_$device.tgz" -C /tmp/fzt "repro_$device"
done
exit $rc
