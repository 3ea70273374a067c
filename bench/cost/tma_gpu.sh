#!/bin/bash
# bench/cost/tma.py on the GPU, time-boxed (~150 s): TMA loads against plain loads.
# Run from the repository root (or a staged copy of it): bash bench/cost/tma_gpu.sh
OUT=${OUT:-/tmp}/tma
mkdir -p "$OUT"
python3 -c "import jax, jaxlib, triton; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'triton', triton.__version__, jax.devices())" 2>&1 | tail -1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
export PALLAS_PROF_CACHE_DIR=${PALLAS_PROF_CACHE_DIR:-/tmp/ppcache-tma-gpu}
echo "== exact: plain vs tma vs tma g8, bit for bit (8192^3 bf16, 3000x3136x5000 bf16, 2000x1984x3000 f32)"
timeout 60 python3 bench/cost/tma.py --steps exact --out "$OUT/exact.json" > "$OUT/exact.log" 2>&1
echo "rc $?"; grep -v '^{' "$OUT/exact.log" | tail -15
python3 - "$OUT/exact.log" <<'PY'
import json, sys
for line in open(sys.argv[1]):
  if line.startswith("{"):
    r = json.loads(line)
    print(f"{r['dtype']:>8} {str(r['shape']):<20} {r['variant']:<7} tma_used={r['tma_used']!s:<5} "
          f"equal={r['equal_to_plain']!s:<5} maxdiff={r['max_abs_diff']:.3g} rel_vs_xla={r['plain_rel_err_vs_f32_xla']:.2e} notes={r['tma_notes']}")
PY
echo "== speed (wall, median of 30x10 calls, twice), cold replay, tuner at 8192^3 bf16"
timeout 85 python3 bench/cost/tma.py --steps speed,replay,tune --out "$OUT/speed.json" > "$OUT/speed.log" 2>&1
echo "rc $?"; grep -v "^{\"check\": \"exact" "$OUT/speed.log" | tail -32
