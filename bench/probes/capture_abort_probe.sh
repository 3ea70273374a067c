#!/usr/bin/env bash
# The in-situ capture pattern that ended the process under triton 3.9's Proton, run
# with each capture source on whatever Triton is first on PYTHONPATH, each in a child
# process whose exit status is recorded (an abort is exit 134, SIGABRT).
#   bash bench/probes/capture_abort_probe.sh [SOURCES...]     (default: cupti proton)
# Writes $OUT/capture_probe_triton<version>.jsonl: one line per run.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
version=$(python3 -c "import triton; print(triton.__version__)")
log="$OUT/capture_probe_triton$version.jsonl"
for source in ${@:-cupti proton}; do
  for mode in capture tuner; do
    extra=""; [ $mode = tuner ] && extra="--via-tuner"
    [ $source = proton ] && [ $mode = tuner ] && continue   # the tuner picks its own source
    start=$SECONDS
    out=$(timeout 300 python3 -m tests.profiler.timing.capture_pattern --source $source \
          --functions ${FUNCTIONS:-10} --captures ${CAPTURES:-50} $extra 2>/tmp/capture_err)
    rc=$?
    tail_err=$(grep -v Deprecat /tmp/capture_err | tail -4 | tr '\n' ' ' | tr '"' "'" | cut -c1-600)
    summary=$(echo "$out" | tail -1)
    [ -z "$summary" ] && summary=null
    echo "{\"triton\": \"$version\", \"source\": \"$source\", \"mode\": \"$mode\", \"exit\": $rc, \"seconds\": $((SECONDS - start)), \"summary\": $summary, \"stderr_tail\": \"$tail_err\"}" | tee -a "$log"
  done
done
