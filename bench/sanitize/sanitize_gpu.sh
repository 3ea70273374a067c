#!/usr/bin/env bash
# compute-sanitizer over pallas-prof on a GPU: memcheck, racecheck, initcheck
# and synccheck over the examples (bench/sanitize/sanitize_examples.py, one process;
# flash attention in one of its own), JAX's Pallas GPU ops forward and backward
# (bench/sanitize/sanitize_ops.py: the norms, and attention apart) and a fixed corpus of
# fuzzer programs (bench/fuzz/fuzz.py --device gpu --seed 1, in process).
# One log per tool and program, and a summary of each log's "ERROR SUMMARY"
# line, under $OUT/sanitizer (copy it to bench/results/sanitizer_<commit>/).
#
# The tool x program runs go PARALLEL at a time (the machine has 16 cores and
# the sanitized programs spend most of their time on the CPU: JAX's start,
# compiling, the sanitizer's patching), each time-boxed by STEP_TIMEOUT; the
# whole step by BUDGET seconds (a run gets at most what is left of it; runs
# not started are reported as such).
#
# From the repository root on the device machine, after the wheels are set up
# (as in bench/gpu_session.sh):
#   bash bench/sanitize/sanitize_gpu.sh                            # 4 tools x 5 programs
#   TOOLS="memcheck" PROGRAMS="examples" bash bench/sanitize/sanitize_gpu.sh
# The process exits 0 when every log says "ERROR SUMMARY: 0 errors" and
# every program itself succeeded.
set -u
OUT_DIR=${OUT:-/tmp/out}/sanitizer
mkdir -p "$OUT_DIR"
# PYTHONFAULTHANDLER: a process that dies of a signal prints its Python stack
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false \
  PYTHONFAULTHANDLER=1
# XLA's own work kept simple under the sanitizer: no autotuning (it launches and times
# many candidate kernels of XLA's, not ours) and no command buffers (CUDA graphs). The
# runs of 2026-12-02 with XLA's defaults ended with compute-sanitizer dying of signal 11,
# once while XLA compiled a reference (jit__reduce_max); SANITIZE_XLA_FLAGS="" restores them.
export XLA_FLAGS="${SANITIZE_XLA_FLAGS---xla_gpu_autotune_level=0 --xla_gpu_enable_command_buffer=}"
# whose kernels are checked: the application's process only (the compile worker, a child,
# compiles and launches nothing); FOLLOW=all follows children too
FOLLOW=${FOLLOW:-application-only}
TOOLS=${TOOLS:-"memcheck racecheck initcheck synccheck"}
# ejected: the same examples' and ops' kernels ejected and launched without JAX
# (bench/sanitize/sanitize_ejected.py), the route to a verdict if JAX under the sanitizer dies again
PROGRAMS=${PROGRAMS:-"examples flash_attention jax_ops_norms jax_ops_mha fuzz_corpus ejected"}
PARALLEL=${PARALLEL:-6}
STEP_TIMEOUT=${STEP_TIMEOUT:-200}
BUDGET=${BUDGET:-280}
# each sanitized kernel launch is synchronous and slow: keep the programs small
# (EXAMPLES: which examples, default all but multi_gpu)
FUZZ_EXAMPLES=${FUZZ_EXAMPLES:-40}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)}
if [ -z "$SANITIZER" ]; then echo "compute-sanitizer not found"; exit 2; fi
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
SUMMARY="$OUT_DIR/summary.txt"
echo "compute-sanitizer over pallas-prof $COMMIT, $(date -u +%FT%TZ), $("$SANITIZER" --version | tail -1)" > "$SUMMARY"
echo "XLA_FLAGS=$XLA_FLAGS, --target-processes $FOLLOW, $PARALLEL at a time" >> "$SUMMARY"
nvidia-smi -L >> "$SUMMARY" 2>&1

command_of() {   # the program's command line for one tool
  case "$1" in
    # flash attention apart: under compute-sanitizer 2025.3 it ended with a segfault (exit 139)
    examples) echo "python3 bench/sanitize/sanitize_examples.py ${EXAMPLES:-vector_add softmax layer_norm matmul pipeline}" ;;
    flash_attention|flash_attention_apponly) echo "python3 bench/sanitize/sanitize_examples.py flash_attention" ;;
    jax_ops_norms) echo "python3 bench/sanitize/sanitize_ops.py norms" ;;
    jax_ops_mha) echo "python3 bench/sanitize/sanitize_ops.py mha" ;;
    ejected) echo "python3 bench/sanitize/sanitize_ejected.py run $OUT_DIR/ejected_kernels" ;;
    fuzz_corpus) echo "python3 bench/fuzz/fuzz.py --device gpu --examples $FUZZ_EXAMPLES --seconds $FUZZ_SECONDS --seed 1 --no-isolate --no-shrink --out $OUT_DIR/fuzz_corpus_$2.json --corpus $OUT_DIR/fuzz_corpus_$2_repro" ;;
    *) echo "false unknown program $1" ;;
  esac
}

run_one() {   # tool program seconds: one sanitized run; its result line goes to a file of its own
  local tool=$1 name=$2 limit=$3 extra="" log="$OUT_DIR/$1_$2.log" start rc secs errors
  [ "$tool" = "racecheck" ] && extra="--racecheck-report all"
  local follow=$FOLLOW
  case "$name" in *_apponly) follow=application-only ;; ejected) follow=all ;; esac
  start=$(date +%s)
  # --target-processes all: the compile worker is a child process (it launches
  # nothing, but the profiler's children would)
  timeout "$limit" "$SANITIZER" --tool "$tool" $extra --target-processes $follow \
    --print-limit 50 $(command_of "$name" "$tool") > "$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  # racecheck sums up as "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"
  errors=$(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$log" | tail -1)
  [ -z "$errors" ] && errors="(no summary line)"
  [ "$rc" -eq 124 ] && errors="$errors (cut off after ${limit}s)"
  if [ "$rc" -gt 128 ]; then   # where it died: the innermost Python frames (PYTHONFAULTHANDLER), else the last lines
    where=$(grep -A4 "^Current thread" "$log" | tail -4)
    [ -z "$where" ] && where=$(grep -v '^=========' "$log" | tail -3)
    errors="$errors (the program died of signal $((rc - 128)) in: $(echo "$where" | sed 's/^ *//' | tr '\n' '|' | cut -c1-400))"
  fi
  echo "$tool $name: exit $rc, ${secs}s, $errors" > "$OUT_DIR/.result_${tool}_${name}"
  cat "$OUT_DIR/.result_${tool}_${name}"
}

started=$(date +%s)
end=$(( started + BUDGET ))
case " $PROGRAMS " in *" ejected "*)   # not under the sanitizer: lower, compile and eject
  timeout "${EJECT_TIMEOUT:-150}" python3 bench/sanitize/sanitize_ejected.py prepare "$OUT_DIR/ejected_kernels" \
    > "$OUT_DIR/ejected_prepare.log" 2>&1
  echo "ejected kernels prepared: exit $?, $(tail -1 "$OUT_DIR/ejected_prepare.log")" >> "$SUMMARY" ;;
esac
pairs=()
# tool by tool (memcheck over every program first, then the next tool): a budget that
# runs out drops the last tools' runs, and memcheck, the one that finds bad addresses,
# always runs
for tool in $TOOLS; do for name in $PROGRAMS; do
  case "$name:$tool" in *_apponly:memcheck|*_apponly:*memcheck*) ;; *_apponly:*) continue ;; esac
  pairs+=("$tool $name")
done; done
for pair in "${pairs[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
  left=$(( end - $(date +%s) ))
  [ "$left" -lt 30 ] && break      # too little time left for a sanitized JAX process
  run_one $pair $(( left < STEP_TIMEOUT ? left : STEP_TIMEOUT )) &
done
wait

failed=0
for pair in "${pairs[@]}"; do
  set -- $pair
  result="$OUT_DIR/.result_$1_$2"
  if [ -f "$result" ]; then
    line=$(cat "$result"); rm -f "$result"
  else
    line="$1 $2: not run (the step's budget of ${BUDGET}s was spent)"
  fi
  echo "$line" >> "$SUMMARY"
  case "$2" in *_apponly) continue ;; esac      # a clue, not part of the verdict
  case "$line" in
    *"exit 0,"*"ERROR SUMMARY: 0 errors"*|*"exit 0,"*"RACECHECK SUMMARY: 0 hazards"*"(0 errors, 0 warnings)"*) ;;
    *) failed=1 ;;
  esac
done
echo "all clean: $([ $failed -eq 0 ] && echo yes || echo NO) ($(( $(date +%s) - started ))s)" >> "$SUMMARY"
cat "$SUMMARY"
exit $failed
