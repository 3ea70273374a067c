#!/usr/bin/env bash
# The final GPU proof of #16 (probes), within 150 s, from the repository root with the
# wheels installed in /tmp/site:   bash bench/profiler/final_probes.sh
# Runs tests/profiler/probes_gpu.sh (known answers and a grid of ~8 waves; `pallas-prof
# run --probes` on softmax 8192^2: table and SM tracks; matmul 8192^3 and flash attention
# distortion; the GPU pytest), prints one line per kernel and the verdicts, and packs
# everything into $OUT/probes.tgz.
set -u
W=/tmp/final-probes
rm -rf $W && mkdir -p $W
export PYTHONPATH=${PYTHONPATH:-$PWD:/tmp/site} PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PALLAS_PROF_CACHE_DIR=${PALLAS_PROF_CACHE_DIR:-/tmp/pallas-prof-cache}
start=$(date +%s)
OUT=$W WHL=/nonexistent T_KA=60 T_SOFTMAX=30 T_EXAMPLES=35 T_PYTEST=20 \
  timeout 140 bash tests/profiler/probes_gpu.sh ka examples softmax pytest > $W/console.log 2>&1
echo "probes (#16): commit $(cat $W/probes/commit 2>/dev/null | head -c 12), steps took $(( $(date +%s) - start )) s"
grep -E "^== [0-9]{2}:|^rc " $W/console.log | paste -sd' ' | cut -c1-200
python3 tests/profiler/summarize_probes.py $W/probes 2>&1 | cut -c1-240
grep -E "^trace:" $W/console.log
tail -1 $W/probes/pytest.log 2>/dev/null
mkdir -p ${OUT:-/tmp} && tar czf ${OUT:-/tmp}/probes.tgz -C $W . && echo "wrote probes.tgz"
