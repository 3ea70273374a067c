#!/bin/bash
# The tune slot of the final GPU call (issue #17), at most ~195 s, from the repo root:
#     bash bench/cost/final_tune.sh
# (wheels installed in /tmp/site, PYTHONPATH=$PWD:/tmp/site exported by the caller).
# Steps, each time-boxed; everything lands in ONE file, $OUT/tune.tgz; the lines that
# matter go to stdout:
#   1. suite   bench/suite/suite.py --quick (budget 85 s), matmul and vector_add first (112 s)
#   2. order   bench/cost/launch_order.py: matmul 8192^3 bf16 plain vs launch groups 4, 8 (16 s)
#   3. tuning  bench/cost/tune_cost.py --device gpu: tuning seconds per kernel, the cached
#              path's ms in a new process, first calls with and without the cache (40 s)
#   4. ptx     GPU backend tests with the PTX jaxlib gets (line info stripped): control
#              flow (debug_print's stack frame), elementwise (libdevice, sin/cos), the
#              payload test, launch order (25 s)
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/final_tune_out}
WORK=$(mktemp -d /tmp/final_tune.XXXXXX)
mkdir -p "$OUT"
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export PALLAS_PROF_CACHE_DIR=$WORK/cache
echo "== tune final: commit $COMMIT, $(date -u +%H:%M:%S)"

echo "== 1. suite (--quick, budget 85 s)"
timeout 112 python3 bench/suite/suite.py --quick --first matmul,vector_add --budget-s 85 \
  --commit "$COMMIT" --out-dir "$WORK/suite" > "$WORK/suite.log" 2>&1
echo "rc=$?"
grep -E "^(H[0-9]|NVIDIA|[0-9]+ cases|geomean|worst|tuned_slower|matmul_tflops|record:|  )" \
  "$WORK/suite.log" | tail -25
grep -E "^[a-z_]+ .*ours/built-in" "$WORK/suite.log" | sed -E 's/ replay .*//' | cut -c1-150

echo "== 2. launch order (matmul 8192^3 bf16)"
timeout 16 python3 bench/cost/launch_order.py --sizes 8192 --out "$WORK/launch_order.json" \
  > "$WORK/launch_order.log" 2>&1
echo "rc=$?"; tail -3 "$WORK/launch_order.log"

echo "== 3. tuning cost"
timeout 40 python3 bench/cost/tune_cost.py --device gpu --out "$WORK/tune_cost_gpu.json" \
  > "$WORK/tune_cost.log" 2>&1
echo "rc=$?"; grep -E "^(softmax|matmul) |error" "$WORK/tune_cost.log" | cut -c1-400

echo "== 4. GPU tests with the stripped PTX"
timeout 25 python3 -m pytest -q -n 14 -p no:cacheprovider -rf \
  tests/backend/running/test_jaxlib_payload.py tests/backend/lowering/rules/test_control_flow.py \
  tests/backend/lowering/rules/test_elementwise.py tests/backend/lowering/test_launch_order.py \
  > "$WORK/ptx_tests.log" 2>&1
echo "rc=$?"; grep -E "passed|failed|^FAILED|ptxas" "$WORK/ptx_tests.log" | tail -12

rm -rf "$WORK/cache"
tar czf "$OUT/tune.tgz" -C "$WORK" .
echo "== tune final done $(date -u +%H:%M:%S): $OUT/tune.tgz"
