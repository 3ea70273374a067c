#!/usr/bin/env bash
# GPU runs whose report.html pages are screenshot back on a CPU machine (Chromium is not
# on the device). Run on the device machine from the repository root with PYTHONPATH set
# (see the session protocol); everything lands in $OUT/html_runs.tar.gz. Then, here:
#   mkdir -p /tmp/gpu_html && tar xzf html_runs.tar.gz -C /tmp/gpu_html
#   python3 -m pallas_prof.cli.html.browser /tmp/gpu_html/softmax /tmp/gpu_html/matmul \
#       /tmp/gpu_html/distributed --png bench/results/html/gpu_h200_<commit>.png
set -u
OUT=${OUT:-/tmp/out}
RUNS=/tmp/html_runs
rm -rf "$RUNS" && mkdir -p "$RUNS" "$OUT"
export PALLAS_PROF_CACHE_DIR=${PALLAS_PROF_CACHE_DIR:-/tmp/pallas-prof-cache}
for ex in softmax matmul; do
  echo "== $ex"
  timeout 300 python3 -m pallas_prof run --out "$RUNS/$ex" "examples/$ex.py" 2>&1 | tail -n 25
done
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$gpus" -ge 2 ]; then
  echo "== two processes under jax.distributed, one GPU each"
  port=$((20000 + RANDOM % 20000))
  for i in 0 1; do
    CUDA_VISIBLE_DEVICES=$i timeout 300 python3 -m pallas_prof run --out "$RUNS/distributed/p$i" \
      tools/distributed_two_processes.py "localhost:$port" "$i" > "$RUNS/distributed_p$i.log" 2>&1 &
  done
  wait
  tail -n 5 "$RUNS"/distributed_p*.log
  python3 -m pallas_prof report "$RUNS/distributed"
  python3 -m pallas_prof report "$RUNS/distributed" --html
else
  echo "== one GPU: the two-process run needs nvidia-h200-x2 (skipped here)"
fi
ls "$RUNS"/*/report.html "$RUNS"/distributed/report.html 2>/dev/null
tar czf "$OUT/html_runs.tar.gz" -C "$RUNS" .
ls -la "$OUT/html_runs.tar.gz"
