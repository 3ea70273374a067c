#!/usr/bin/env bash
# The GPU work of a session, each step time-boxed, everything under $OUT.
# Run on the device machine from the repository root, with .whl (and
# .conformance for the conformance step) carried along:
#   bash bench/gpu_session.sh suite                          (one H200: the canonical benchmark)
#   bash bench/gpu_session.sh advised                        (one H200: issue 49's advised column)
#   bash bench/gpu_session.sh pytest conformance bench      (one H200)
#   bash bench/gpu_session.sh profiler cli multi cli_multi   (two H200s)
set -u
# $OUT comes back to the workstation but only as a few files: work in a
# folder of our own and hand back one archive of it at the end.
FINAL_OUT=${OUT:-/tmp/out}
OUT=/tmp/session
mkdir -p "$OUT" "$FINAL_OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
# Byte-compile pallas-prof and the carried wheels, as `pip install` does: this
# image sets PYTHONDONTWRITEBYTECODE, so without it every process would compile
# their sources at import. (Doing the same for Triton, JAX and jaxlib under
# PYTHONPYCACHEPREFIX left `import triton` at 0.37 s on this machine, against
# 0.27-0.52 s without: the image's Triton import is slow for other reasons.)
python3 -m compileall -q -j 0 pallas_prof bench /tmp/site >/dev/null 2>&1
# TRITON_PREFIX: a Triton carried to the machine (bench/triton_carry/carry.py unpack), first on the path
export PYTHONPATH=${TRITON_PREFIX:+$TRITON_PREFIX:}$PWD:/tmp/site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PALLAS_PROF_CACHE_DIR=${PALLAS_PROF_CACHE_DIR:-/tmp/pallas-prof-cache}
# the commit records name (the device copy's .git HEAD can lag its files): .pallas-prof-commit,
# which the caller writes, unless PALLAS_PROF_COMMIT is set
export PALLAS_PROF_COMMIT=${PALLAS_PROF_COMMIT:-$(cat .pallas-prof-commit 2>/dev/null)}
log() { echo "== $(date +%H:%M:%S) $*"; }

step_env() {
  nvidia-smi -L
  python3 -c "import jax, jaxlib, triton, numpy; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, jax.devices())"
  for i in 1 2; do
    python3 -c "import time; t = time.perf_counter(); import triton; print(f'import triton: {time.perf_counter() - t:.3f} s')"
  done
  # the suite's GPU clock: cupti-python with its libcupti (.whl: cupti-python 13 and
  # nvidia-cuda-cupti 13; without them every figure is wall clock per call)
  python3 -c "from pallas_prof.profiler.timing import cupti_activity as c; m = c.load(); print('cupti-python: usable', getattr(m, '__file__', ''))" 2>&1 | tail -1
}

step_pytest() {   # the whole test suite, on the GPU (the CPU suite's kernels then run on the
  # H200: a run of it there found a missing barrier and tests that assumed the interpreter).
  # Left out: the exporters' schema test (jsonschema is not on the device) and the OTLP
  # receiver (it installs one from the network).
  timeout ${PYTEST_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -n 12 tests bench/tests \
    -m "not otlp_receiver" --ignore=tests/instrument/test_exporters.py -rfE \
    --junitxml="$OUT/pytest-gpu.xml" 2>&1 | tail -25
}

step_conformance() {   # JAX's own Pallas tests against pallas-prof (as .conformance/run.sh runs
  # them, keeping the whole log and the junit xml)
  local backend=${CONFORMANCE_BACKEND:-pallas_prof}
  # CONFORMANCE_DUMP=1: every kernel pallas-prof lowered is saved under $OUT/conformance_kernels
  # (bench/targets/dump_kernels.py), for `bench/targets/matrix.py --saved` to compile elsewhere
  local dump=()
  [ "${CONFORMANCE_DUMP:-0}" = 1 ] && dump=(-p bench.targets.dump_kernels) \
    && export PALLAS_PROF_DUMP_KERNELS="$OUT/conformance_kernels"
  (cd .conformance && CONFORMANCE_BACKEND=$backend timeout ${CONFORMANCE_TIMEOUT:-280} \
     python3 -m pytest -q -p no:cacheprovider --timeout=120 -n ${CONFORMANCE_WORKERS:-14} "${dump[@]}" \
     -rfE --junitxml="$OUT/conformance-$backend.xml" ./*_test.py > "$OUT/conformance-$backend.log" 2>&1)
  tail -5 "$OUT/conformance-$backend.log"
  python3 .conformance/summary.py "$OUT/conformance-$backend.xml"
}

step_suite() {   # the canonical benchmark: every op, three shapes, four columns, within a time
  # budget (cases the budget cannot reach are recorded as skipped); the record is
  # suite_<gpu>_<commit>.json (SUITE_COMMIT names the commit: this copy has no .git)
  timeout ${SUITE_TIMEOUT:-555} python3 bench/suite/suite.py --budget-s ${SUITE_BUDGET:-480} \
    --out-dir "$OUT" --commit "${SUITE_COMMIT:-${PALLAS_PROF_COMMIT:-unknown}}" ${SUITE_ARGS:-} 2>&1 \
    | grep -v Deprecation | tail -70
}

step_advised() {   # issue 49, item 3: the suite's "advised" column on issue 49's four cases:
  # `pallas-prof advise` on each (a copy of its op's module), what it kept applied (a tuning
  # file, a split-reduction diff), timed beside the other columns with its ratio to XLA
  # (goal: within 1.25x): suite_<gpu>_<commit>.json, its summary table at the end
  # (ADVISED_ONLY: other cases, comma-separated, for a short call)
  timeout ${ADVISED_TIMEOUT:-400} python3 bench/suite/suite.py --advised --budget-s \
    ${ADVISED_BUDGET:-330} --advise-budget-s ${ADVISED_ADVISE_BUDGET:-40} --out-dir "$OUT" \
    --commit "${SUITE_COMMIT:-${PALLAS_PROF_COMMIT:-unknown}}" --only "${ADVISED_ONLY:-rms_norm fwd+bwd 8x2048x3136,layer_norm fwd+bwd 1x8192x8192,matmul 5120x3136x4096,mha fwd full 2x5120x8x128}" \
    2>&1 | grep -v Deprecation | tail -90
}

step_bench() {   # the previous benchmark (six forward ops, one shape each): pallas-prof vs built-in vs XLA
  timeout ${BENCH_TIMEOUT:-220} python3 bench/suite/ops_vs_builtin.py --out "$OUT/ops_vs_builtin.json" 2>&1 \
    | grep -v Deprecation | tail -25
}

step_first_call() {   # first-call latency, median of fresh processes
  timeout ${FIRST_CALL_TIMEOUT:-400} python3 bench/first_call/first_call.py --processes ${FIRST_CALL_PROCESSES:-5} \
    --profile ${FIRST_CALL_PROFILE:-rms_norm,mha} --out "$OUT/first_call.json" 2>&1 \
    | grep -v Deprecation | tail -12
}

step_process_first() {   # the process's first pallas_call, by its delay after install()
  timeout ${PROCESS_FIRST_TIMEOUT:-240} python3 bench/first_call/process_first_call.py \
    --out "$OUT/process_first_call.json" 2>&1 | grep -v Deprecation | tail -8
}

step_gap() {   # wall clock vs GPU time of a jitted call (rms_norm, every backend)
  timeout ${GAP_TIMEOUT:-200} python3 bench/suite/dispatch_gap.py --ops ${GAP_OPS:-rms_norm} --out "$OUT/dispatch_gap.json" 2>&1 \
    | grep -v Deprecation | tail -8
}

step_capture() {   # issue 38: in-situ capture over CUDA graphs made before it, each source in a
  # child process whose exit status is kept (Proton on triton 3.9 aborted the process)
  OUT="$OUT" timeout ${CAPTURE_TIMEOUT:-400} bash bench/probes/capture_abort_probe.sh ${CAPTURE_SOURCES:-cupti proton}
}

step_profiler() {   # replay timing, ncu, NVML, CUPTI in-situ, device index checks
  timeout ${PROFILER_TIMEOUT:-200} python3 bench/profiler/profiler_gpu_check.py "$OUT" 2>&1 | tail -30
}

step_cli() {   # the front door, on a script with four kernels, on every GPU
  timeout ${CLI_TIMEOUT:-150} python3 -m pallas_prof run --device all --out "$OUT/cli_run" \
    examples/pipeline.py 2>&1 | tee "$OUT/cli_run.txt" | tail -40
}

step_probe() {   # which elementwise functions match XLA bit for bit, and why
  timeout ${PROBE_TIMEOUT:-120} python3 bench/probes/bitwise_probe.py --out "$OUT/bitwise_probe.json" 2>&1 \
    | grep -v Deprecation | grep -v "^ " | tail -20
}

step_norms() {   # variants of the norm kernels' generated source, timed side by side
  timeout ${NORMS_TIMEOUT:-150} python3 bench/probes/norm_variants.py --out "$OUT/norm_variants.json" 2>&1 \
    | grep -v Deprecation | tail -20
}

step_cli_multi() {   # the CLI on the multi-GPU example: in-situ launches per device
  timeout ${CLI_TIMEOUT:-150} python3 -m pallas_prof run --device all --out "$OUT/cli_multi" \
    examples/multi_gpu.py 2>&1 | tee "$OUT/cli_multi.txt" | tail -40
}

step_multi() {   # a pallas-prof kernel on every GPU (shard_map and device_put)
  timeout ${MULTI_TIMEOUT:-120} python3 examples/multi_gpu.py 2>&1 | tail -10
}

step_attribution() {   # measured attribution (#15): known-answer kernels, softmax, ncu cross-check
  OUT="$OUT" TIMING_ROUNDS=${TIMING_ROUNDS:-1} timeout ${ATTRIB_TIMEOUT:-300} bash tests/profiler/attribution_gpu.sh ka softmax timing ncu pytest \
    2>&1 | tail -60
}

step_reliability() {   # issue #18: the bounds-checked mode on the GPU (an illegal read is a
  # BoundsError, the process alive; every access path; valid fuzz kernels in check mode),
  # float64 -> 16-bit rounding as XLA's, check mode's cost, and the fuzzer on the GPU
  # (--jobs: compiling is CPU-bound; FUZZ_CHECK_JOBS of them in check mode)
  timeout ${RELIABILITY_TEST_TIMEOUT:-120} python3 -m pytest -q -p no:cacheprovider -n 8 -rfE \
    tests/backend/running/test_bounds_gpu.py tests/backend/lowering/test_bounds.py tests/backend/lowering/test_bounds_paths.py \
    tests/backend/lowering/test_coverage.py tests/backend/lowering/rules/test_scan_arrays.py \
    tests/backend/lowering/rules/test_elementwise.py::test_convert_float64 \
    --junitxml="$OUT/reliability-pytest.xml" 2>&1 | tail -15
  timeout ${CONVERT_PROBE_TIMEOUT:-60} python3 bench/probes/convert_rounding.py \
    --out "$OUT/convert_rounding.json" 2>&1 | grep -v Warning | tail -24
  timeout ${BOUNDS_COST_TIMEOUT:-90} python3 bench/cost/bounds_cost.py --out "$OUT/bounds_cost_h200.json" \
    2>&1 | grep -v Warning | tail -6
  timeout $(( ${FUZZ_SECONDS:-240} + 40 )) python3 bench/fuzz/fuzz.py --device gpu --seconds ${FUZZ_SECONDS:-240} \
    --examples ${FUZZ_EXAMPLES:-4000} --jobs ${FUZZ_JOBS:-14} --check-jobs ${FUZZ_CHECK_JOBS:-2} \
    --seed ${FUZZ_SEED:-18} --out "$OUT/fuzz_gpu.json" --corpus "$OUT/fuzz_gpu_repro" 2>&1 | tail -14
}

step_hazard() {   # issue #32: the fuzzer's wrong answer (a ptxas miscompile) on the GPU, at
  # this commit and with the window test put back in its old two-comparison form
  # (which must fail: the GPU test catches the miscompile)
  timeout ${HAZARD_TIMEOUT:-150} python3 -m pytest -q -p no:cacheprovider -rfE \
    tests/backend/compiling/test_ptxas_hazards.py 2>&1 | tail -8
  cp pallas_prof/backend/lowering/rules/shape.py /tmp/shape.py.keep
  python3 - <<'PY'
import re
p = "pallas_prof/backend/lowering/rules/shape.py"
s = open(p).read()
s = re.sub(r'  shifted = lanes if start == 0 else f"\(\{lanes\} - \{start\}\)"\n  return f"\(\{shifted\}.to\(tl.uint32\) < \{size\}\)"',
           '  return f"(({lanes} >= {start}) & ({lanes} < {start} + {size}))"', s)
assert "({lanes} >= {start})" in s, "old form not put back"
open(p, "w").write(s)
PY
  log "with the old window form (expected: the GPU test fails)"
  timeout ${HAZARD_TIMEOUT:-150} python3 -m pytest -q -p no:cacheprovider -rfE \
    tests/backend/compiling/test_ptxas_hazards.py -k gpu 2>&1 | tail -8
  cp /tmp/shape.py.keep pallas_prof/backend/lowering/rules/shape.py
}

step_fuzz() {   # the differential fuzzer on the GPU: FUZZ_SECONDS of FUZZ_JOBS children,
  # FUZZ_CHECK_JOBS of them in the bounds-checked mode, fresh seeds (FUZZ_SEED)
  timeout $(( ${FUZZ_SECONDS:-300} + 60 )) python3 bench/fuzz/fuzz.py --device gpu --seconds ${FUZZ_SECONDS:-300} \
    --examples ${FUZZ_EXAMPLES:-100000} --jobs ${FUZZ_JOBS:-14} --check-jobs ${FUZZ_CHECK_JOBS:-2} \
    --kind ${FUZZ_KIND:-all} \
    --seed ${FUZZ_SEED:-1} ${FUZZ_ARGS:-} --out "$OUT/fuzz_gpu_${FUZZ_SEED:-1}.json" \
    --corpus "$OUT/fuzz_gpu_repro_${FUZZ_SEED:-1}" 2>&1 | tail -14
}

step_repro() {   # REPRO (a fuzz reproducer): many runs on the GPU (a race moves, a miscompile
  # stays), then one under compute-sanitizer's racecheck and synccheck
  timeout ${REPRO_TIMEOUT:-60} python3 bench/probes/fuzz_repro_gpu.py "$REPRO" --runs ${REPRO_RUNS:-20} \
    --seeds ${REPRO_SEEDS:-3} --out "$OUT/repro_runs.json" 2>&1 | grep -v Warning | tail -8
  for tool in racecheck synccheck; do
    timeout ${SANITIZER_TIMEOUT:-75} compute-sanitizer --tool $tool --print-limit 20 \
      python3 bench/probes/fuzz_repro_gpu.py "$REPRO" --runs 1 --seeds 0 2>&1 | grep -v Warning | tail -12
  done
}

step_replay() {   # the strong ptxas-hazard leads the CPU's sm_90 fuzz mode found (REPLAY: its
  # summaries), each run on the GPU on several inputs
  timeout ${REPLAY_TIMEOUT:-120} python3 bench/fuzz/fuzz_replay.py $REPLAY --device gpu --inputs ${REPLAY_INPUTS:-8} \
    --out "$OUT/replay.json" 2>&1 | grep -v Warning | tail -12
}

step_scan() {   # issue #28: the selective scan (Triton 3.6's ScanOpToLLVM bug worked around)
  # against its float64 reference on the GPU, and what the workaround costs
  timeout ${SCAN_TEST_TIMEOUT:-120} python3 -m pytest -q -p no:cacheprovider -rfE -n 4 \
    tests/backend/test_selective_scan.py tests/backend/compiling/test_triton_bugs.py 2>&1 | tail -6
  timeout ${SCAN_COST_TIMEOUT:-150} python3 bench/cost/workaround_cost.py --reps ${SCAN_REPS:-30} \
    --commit "$(cat .pallas-prof-commit 2>/dev/null || echo unknown)" \
    --out "$OUT/workaround_cost.json" 2>&1 | grep -v Warning | tail -14
}

step_fresh() {   # REPRO_DIR's fuzz reproducers, each in a fresh process on the GPU
  timeout ${FRESH_TIMEOUT:-240} bash bench/probes/repros_fresh.sh "$REPRO_DIR" ${FRESH_JOBS:-8} 2>&1 | tail -40
}

step_scansweep() {   # which compiled scans come out wrong: a process per num_warps
  for w in ${SWEEP_WARPS:-1 4 8}; do
    timeout ${SWEEP_TIMEOUT:-150} python3 bench/probes/scan_gpu_sweep.py --warps $w \
      --workarounds ${SWEEP_MODE:-on} --out "$OUT/scan_sweep_w$w.json" > "$OUT/scan_sweep_w$w.txt" 2>&1 &
  done
  wait
  for w in ${SWEEP_WARPS:-1 4 8}; do grep -v Warning "$OUT/scan_sweep_w$w.txt" | tail -12; done
}

step_sanitize() {   # compute-sanitizer (4 tools) over the examples, JAX's GPU ops fwd+bwd and
  # fuzzer programs, PARALLEL runs at a time, the whole step within SANITIZE_BUDGET seconds
  OUT="$OUT" BUDGET=${SANITIZE_BUDGET:-240} timeout $(( ${SANITIZE_BUDGET:-240} + 30 )) \
    bash bench/sanitize/sanitize_gpu.sh 2>&1 | tail -20
}

step_rowmax() {   # issue 32: the fuzz's smallest wrong kernels (a row max of a negation, a cumsum
  # of a broadcast column), pallas-prof against the built-in, on several inputs
  timeout ${ROWMAX_TIMEOUT:-120} python3 bench/probes/rowmax_gpu.py 2>&1 | grep -v Warning | tail -30
}

step_gputests() {   # the tests of this quarter's fixes (ptxas rewrites, scan faults and
  # workarounds, run-time errors and bounds, the removal shim, the sm_90 fuzz leads), on the
  # GPU, where their gpu-marked halves run
  timeout ${GPUTESTS_TIMEOUT:-240} python3 -m pytest -q -p no:cacheprovider -n ${GPUTESTS_JOBS:-12} -rfE \
    tests/backend/compiling/test_ptxas_hazards.py tests/backend/compiling/test_ptx_rewrites.py \
    tests/backend/compiling/test_silent_faults.py tests/backend/test_selective_scan.py \
    tests/backend/compiling/test_triton_bugs.py tests/fuzz/test_fuzz_sm90.py \
    tests/backend/running/test_bounds_gpu.py tests/backend/running/test_runtime_errors.py \
    tests/backend/lowering/test_bounds.py tests/backend/lowering/test_bounds_paths.py tests/cli/test_newcomer.py \
    tests/backend/test_triton_shim.py tests/backend/test_own_path.py tests/test_import_errors.py \
    tests/backend/lowering/test_launch_order.py tests/backend/compiling/test_packed_int16_adds.py \
    tests/profiler/timing/test_cold_timing.py ${GPUTESTS_EXTRA:-} \
    --junitxml="$OUT/gputests.xml" 2>&1 | tail -40
}

step_runtime_error() {   # issue 30: a read past a ref through `pallas-prof run` on the GPU
  timeout ${RUNTIME_ERROR_TIMEOUT:-260} bash bench/probes/runtime_error_gpu.sh "$OUT/runtime_error" 2>&1 | tail -150
}

step_int16() {   # issue 32: seed 1250's int16 wrong answer (a packed add's constant dropped by
  # ptxas), rewrites off and on, and the pattern alone in raw PTX
  timeout ${INT16_TIMEOUT:-150} python3 bench/probes/int16_probe.py 2>&1 | grep -v Warn | tail -40
}

step_advice() {   # issue 29's Proof: the known-answer kernels (one planted defect each, one at
  # its roof) and JAX's norm ops against XLA, the advice checked against the fixes applied by
  # hand: $OUT/advice/known_answers.json and .txt (ADVICE_COMMIT names the commit;
  # ADVICE_ONLY: some cases, comma-separated, for a short call)
  timeout ${ADVICE_TIMEOUT:-500} python3 bench/advice/advice_known_answers.py --budget-s \
    ${ADVICE_BUDGET:-420} --deadline-s ${ADVICE_DEADLINE:-465} --out "$OUT/advice" \
    ${ADVICE_COMMIT:+--commit $ADVICE_COMMIT} ${ADVICE_ONLY:+--only $ADVICE_ONLY} \
    2>&1 | grep -v Deprecation | tail -120
}

step_split() {   # issue 49, item 1: the split reduction advise builds for the norms' dw/db
  # kernel (rms_norm 8x2048x3136, layer_norm 1x8192x8192, bf16): original vs each variant vs
  # XLA, alone and in the fwd+bwd, with ratios: $OUT/split_reduction.json
  timeout ${SPLIT_TIMEOUT:-130} python3 bench/advice/split_reduction_gpu.py --budget-s \
    ${SPLIT_BUDGET:-100} --out "$OUT/split_reduction.json" 2>&1 | grep -v Deprecation | tail -30
}

step_dots() {   # issue 49, item 1: advise on the suite's f32 matmul 5120x3136x4096 (TF32, and
  # the same kernel at precision=HIGHEST): the block shapes with their warps and stages and the
  # precision edits it tried, what it kept, before/after times and errors: $OUT/dots.json
  timeout ${DOTS_TIMEOUT:-300} python3 bench/advice/dots_gpu.py --budget-s ${DOTS_BUDGET:-100} \
    --out "$OUT/dots.json" 2>&1 | grep -v Deprecation | tail -40
}

step_dw() {   # issue 49, the norms' dw/db: the split kernel's per-iteration row sums (shared memory,
  # barriers) against sums deferred to after the loop, at the suite's rms_norm shape: $OUT/dw_deferred.json
  timeout ${DW_TIMEOUT:-170} python3 bench/probes/dw_deferred.py --budget-s ${DW_BUDGET:-130} \
    --out "$OUT/dw_deferred.json" 2>&1 | grep -v Deprecation | tail -40
}

step_tf32() {   # issue 49, f32 dots: does B's layout (K-major or not) decide wgmma or mma.sync for
  # a TF32 dot on sm_90? plain vs K-major B, several tiles, against XLA: $OUT/tf32_layout.json
  timeout ${TF32_TIMEOUT:-200} python3 bench/probes/tf32_layout.py --budget-s ${TF32_BUDGET:-150} \
    --out "$OUT/tf32_layout.json" 2>&1 | grep -v Deprecation | tail -30
}

step_tiles() {   # issue 49, f32 dots past the layout: stages, launch groups, TMA and tiles for the
  # K-major B that advise keeps, against XLA: $OUT/tf32_tiles.json
  timeout ${TILES_TIMEOUT:-200} python3 bench/probes/tf32_tiles.py --budget-s ${TILES_BUDGET:-150} \
    --out "$OUT/tf32_tiles.json" 2>&1 | grep -v Deprecation | tail -30
}

step_tma() {   # TMA block loads against plain ones: bit-equal outputs, then speed (bench/cost/tma_gpu.sh)
  OUT="$OUT" timeout ${TMA_TIMEOUT:-170} bash bench/cost/tma_gpu.sh 2>&1 | tail -60
}

step_persistent() {   # issue 49: persistent programs against the plain and grouped launch orders
  # (bf16 matmul 8192^3 and 4096^3), bit-equal outputs: $OUT/launch_order.json
  timeout ${PERSISTENT_TIMEOUT:-120} python3 bench/cost/launch_order.py --out "$OUT/launch_order.json" \
    2>&1 | grep -v Deprecation | tail -12
}

step_ground_truth() {   # issue 47: the known-answer corpus measured (PC sampling, ncu for the
  # sin kernel) and judged, every line's weight printed: $OUT/ground_truth_$GT_TAG.tar.gz
  OUT="$OUT" TAG=${GT_TAG:-run} timeout ${GT_STEP_TIMEOUT:-420} bash bench/profiler/ground_truth_gpu.sh 2>&1 \
    | grep -v Deprecation | tail -200
}

step_gate() {   # issue 41: the pytest gate on the GPU: a baseline, GATE_RUNS unchanged runs
  # (each must pass), then num_stages 3 -> 1 on a matmul (must fail): $OUT/gate/
  OUT="$OUT" timeout ${GATE_TIMEOUT:-480} bash bench/gate/gpu_proof.sh 2>&1 | tail -50
}

step_xprof() {   # issue 41: flash attention fwd+bwd profiled the JAX way ($OUT/xprof_jax), and
  # through `pallas-prof run --xprof` with probes ($OUT/xprof_run): read back by
  # bench/xprof/read_profile.py on a machine with the xprof package
  # the JAX way, with XLA's command buffers off (inside one, a kernel's launch carries the
  # buffer's op, not its own: docs/xprof.md)
  XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=" timeout ${XPROF_TIMEOUT:-150} \
    python3 bench/xprof/flash_attention_gpu.py --trace "$OUT/xprof_jax" 2>&1 \
    | grep -v Deprecation | tail -5
  timeout ${XPROF_RUN_TIMEOUT:-240} python3 -m pallas_prof run --probes --xprof "$OUT/xprof_run" \
    --out "$OUT/xprof_cli" bench/xprof/flash_attention_gpu.py 2>&1 | tee "$OUT/xprof_cli.txt" | tail -40
}

for s in "${@:-env}"; do
  log "step $s"
  "step_$s" 2>&1 | tee "$OUT/step_$s.log"
  tar czf "$FINAL_OUT/session.tgz" -C /tmp session   # after every step: a cut-off run keeps its results
done
log done
