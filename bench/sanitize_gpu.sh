#!/usr/bin/env bash
# compute-sanitizer over pallas-prof on a GPU: memcheck, racecheck, initcheck
# and synccheck over the examples, JAX's Pallas GPU ops forward and backward
# (bench/sanitize_ops.py) and a fixed corpus of fuzzer programs
# (bench/fuzz.py --device gpu --seed 1). One log per tool and program, and a
# summary of each log's "ERROR SUMMARY" line, under $OUT/sanitizer (copy it to
# bench/results/sanitizer_<commit>/).
#
# From the repository root on the device machine, after the wheels are set up
# (as in bench/gpu_session.sh):
#   bash bench/sanitize_gpu.sh                  # all four tools (~8-12 min)
#   TOOLS="memcheck" bash bench/sanitize_gpu.sh  # one tool
# The process exits 0 when every log says "ERROR SUMMARY: 0 errors" and
# every program itself succeeded.
set -u
OUT_DIR=${OUT:-/tmp/out}/sanitizer
mkdir -p "$OUT_DIR"
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
# each sanitized kernel launch is synchronous and slow: keep the programs small
TOOLS=${TOOLS:-"memcheck racecheck initcheck synccheck"}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
FUZZ_EXAMPLES=${FUZZ_EXAMPLES:-40}
SANITIZER=${SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)}
if [ -z "$SANITIZER" ]; then echo "compute-sanitizer not found"; exit 2; fi
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
SUMMARY="$OUT_DIR/summary.txt"
echo "compute-sanitizer over pallas-prof $COMMIT, $(date -u +%FT%TZ), $("$SANITIZER" --version | tail -1)" > "$SUMMARY"
nvidia-smi -L >> "$SUMMARY" 2>&1

programs=(
  "vector_add:python3 examples/vector_add.py"
  "softmax:python3 examples/softmax.py"
  "layer_norm:python3 examples/layer_norm.py"
  "matmul:python3 examples/matmul.py"
  "flash_attention:python3 examples/flash_attention.py"
  "pipeline:python3 examples/pipeline.py"
  "jax_gpu_ops_fwd_bwd:python3 bench/sanitize_ops.py"
  "fuzz_corpus:python3 bench/fuzz.py --device gpu --examples $FUZZ_EXAMPLES --seed 1 --no-isolate --no-shrink --out $OUT_DIR/fuzz_corpus_TOOL.json --corpus $OUT_DIR/fuzz_corpus_TOOL_repro"
)

failed=0
for tool in $TOOLS; do
  extra=""
  [ "$tool" = "racecheck" ] && extra="--racecheck-report all"
  for entry in "${programs[@]}"; do
    name=${entry%%:*}
    cmd=${entry#*:}
    cmd=${cmd//TOOL/$tool}
    log="$OUT_DIR/${tool}_${name}.log"
    start=$(date +%s)
    # --target-processes all: the compile worker is a child process (it launches
    # nothing, but the profiler's children would)
    timeout "$STEP_TIMEOUT" "$SANITIZER" --tool "$tool" $extra --target-processes all \
      --print-limit 50 $cmd > "$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    errors=$(grep -h "ERROR SUMMARY" "$log" | tail -1)
    [ -z "$errors" ] && errors="(no ERROR SUMMARY line)"
    echo "$tool $name: exit $rc, ${secs}s, $errors" | tee -a "$SUMMARY"
    if [ "$rc" -ne 0 ] || ! grep -q "ERROR SUMMARY: 0 errors" "$log"; then failed=1; fi
  done
done
echo "all clean: $([ $failed -eq 0 ] && echo yes || echo NO)" | tee -a "$SUMMARY"
exit $failed
