#!/usr/bin/env bash
# What only a GPU can show about a jax / Triton release, for the day the device
# image has jax 0.12 and Triton 3.9 (today it has jax 0.11.2 and Triton 3.6,
# and a device call cannot carry those wheels: jaxlib 0.12 is 87 MB and Triton
# 3.9 285 MB against 64 MiB a call). Runs on any version; on the current image
# it is the same checks against 0.11.2 / 3.6.
#
#   bash bench/gpu_versions.sh                 # everything, results under $OUT (or /tmp/out)
#   bash bench/gpu_versions.sh ptx examples    # some steps
#
# Steps:
#   env        versions, the driver's CUDA release, the PTX ISA Triton writes and the cap
#              pallas-prof applies (Triton 3.9 writes PTX 9.4; a 13.0 driver loads 9.0)
#   ptx        a kernel compiled for this GPU: the PTX jaxlib gets declares no newer ISA
#              than the driver loads, and it runs and matches XLA
#   tests      the GPU-marked tests and the version-sensitive ones, on the GPU
#   examples   every example through `pallas-prof run` (run, show, report, eject, diff)
#   correlate  measured attribution on known-answer kernels (each load charged to its own
#              equation, as on Triton 3.6)
#   hazard     issue #32's program (a ptxas miscompile steered around) with this ptxas
#   fuzz       the GPU fuzzer for FUZZ_SECONDS
set -u
FINAL_OUT=${OUT:-/tmp/out}
OUT=/tmp/versions
mkdir -p "$OUT" "$FINAL_OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
fi
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PALLAS_PROF_CACHE_DIR=${PALLAS_PROF_CACHE_DIR:-/tmp/pallas-prof-cache}
log() { echo "== $(date +%H:%M:%S) $*"; }

step_env() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 - <<'PY'
import jax, jaxlib, triton
from pallas_prof.backend.compiling import compile_cache, triton_compat
driver = triton_compat.cuda_driver_version()
print("jax", jax.__version__, "jaxlib", jaxlib.__version__, "triton", triton.__version__)
print("driver", driver, "->", triton_compat.cuda_version_of_driver(driver) if driver else None)
print("ptxas for sm_90:", triton_compat.ptxas_path(90), compile_cache._ptxas_version(90))
print("Triton's PTX ISA:", triton_compat.default_ptx_isa(90),
      "cap for this driver:", compile_cache.launch_ptx_version(90))
PY
}

step_ptx() {
  python3 - <<'PY'
import jax, jax.numpy as jnp, numpy as np
import pallas_prof
from jax.experimental import pallas as pl
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling import triton_compat
from pallas_prof.backend.compiling.compile import compile_kernel

def kernel(x_ref, o_ref):
  o_ref[...] = jnp.exp(x_ref[...]) * 2.0 + 1.0

x = jnp.linspace(-3, 3, 1000, dtype=jnp.float32)
out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                     compiler_params=pallas_prof.CompilerParams())(x)
np.testing.assert_allclose(np.asarray(out), np.exp(np.asarray(x)) * 2 + 1, rtol=1e-6)
cc = jax.devices()[0].compute_capability.replace(".", "")
ck = compile_kernel(kernel_registry.kernels()[-1].generated, ("cuda", int(cc)))
driver = triton_compat.cuda_driver_version()
limit = triton_compat.ptx_isa_for_cuda(triton_compat.cuda_version_of_driver(driver))
isa = triton_compat.ptx_isa_of(ck.ptx)
print(f"PTX ISA handed to jaxlib: {isa}, the driver loads up to {limit}: "
      + ("OK" if isa <= limit else "TOO NEW"))
assert isa <= limit
print("the kernel ran through jaxlib and matched numpy")
PY
}

step_tests() {
  timeout ${TESTS_TIMEOUT:-400} python3 -m pytest -q -p no:cacheprovider -n 12 -rfE \
    -m "gpu or not no_gpu" tests/backend tests/profiler tests/test_versions.py \
    tests/profiler/static/test_correlation_versions.py tests/backend/compiling/test_ptxas_hazards.py \
    --ignore=tests/instrument/test_exporters.py --junitxml="$OUT/tests.xml" 2>&1 | tail -20
}

step_examples() {
  for e in vector_add softmax layer_norm matmul flash_attention pipeline; do
    timeout 240 python3 -m pallas_prof run --out "$OUT/run_$e" "examples/$e.py" > "$OUT/run_$e.txt" 2>&1
    echo "$e: exit $? ($(grep -c . "$OUT/run_$e.txt") lines)"
  done
  python3 -m pallas_prof show softmax --dir "$OUT/run_softmax" --sass | head -30
  python3 -m pallas_prof report "$OUT/run_softmax" | head -20
  python3 -m pallas_prof show softmax --dir "$OUT/run_softmax" --eject "$OUT/ejected_softmax.py" | tail -3
  python3 "$OUT/ejected_softmax.py" | tail -3
  python3 -m pallas_prof diff "$OUT/run_softmax" "$OUT/run_layer_norm" | tail -10
}

step_correlate() {
  OUT="$OUT" timeout ${CORRELATE_TIMEOUT:-300} bash tests/profiler/attribution_gpu.sh ka softmax pytest 2>&1 | tail -40
}

step_hazard() {
  timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/backend/compiling/test_ptxas_hazards.py 2>&1 | tail -6
}

step_fuzz() {
  timeout $(( ${FUZZ_SECONDS:-240} + 60 )) python3 bench/fuzz/fuzz.py --device gpu --seconds ${FUZZ_SECONDS:-240} \
    --examples 100000 --jobs ${FUZZ_JOBS:-14} --check-jobs ${FUZZ_CHECK_JOBS:-2} --seed ${FUZZ_SEED:-1} \
    --out "$OUT/fuzz_gpu.json" --corpus "$OUT/fuzz_repro" 2>&1 | tail -14
}

for s in "${@:-env ptx tests examples correlate hazard}"; do
  for t in $s; do
    log "step $t"
    "step_$t" 2>&1 | tee "$OUT/step_$t.log"
    tar czf "$FINAL_OUT/versions.tgz" -C /tmp versions
  done
done
log done
