#!/bin/bash
# Issue #17 part 5's first-call targets on one GPU, at most ~150 s, from the repo root
# (wheels in /tmp/site and PYTHONPATH=$PWD:/tmp/site exported by the caller):
#     bash bench/first_call/first_call_gpu.sh
# Targets: (a) a process's first pallas_call right after install() at most 0.3 s;
# (b) each op's first call at most 1.3x the built-in backend's. Steps, each time-boxed;
# the files go into one archive, $OUT/firstcall/firstcall.tgz (the device hands back a few
# files only), the lines that matter to stdout:
#   1. start    what the compile worker's start-up costs on this host, phase by phase
#               (bench/probes/worker_start_phases.py), whether Triton has .pyc files (20 s)
#   2. process  a process's first pallas_call by its delay after install() (0 and 1 s),
#               ours and the built-in's, 4 fresh processes each (bench/first_call/process_first_call.py, 55 s)
#   3. ops      each op's first call, ours vs built-in, $PROCESSES (4) fresh processes
#               alternating which backend goes first, medians (bench/first_call/first_call.py, ~18 s each)
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
FINAL=${OUT:-/tmp/first_call_gpu_out}/firstcall
OUT=$(mktemp -d /tmp/firstcall.XXXXXX)/firstcall
mkdir -p "$OUT" "$FINAL"
# this image sets PYTHONDONTWRITEBYTECODE: without .pyc files every process (and
# every compile worker) would compile pallas-prof's sources at import
python3 -m compileall -q -j 0 pallas_prof bench >/dev/null 2>&1
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
echo "== first calls: commit $COMMIT, $(date -u +%H:%M:%S), $(nvidia-smi -L 2>/dev/null | head -1)"

echo "== 1. the compile worker's start-up on this host"
python3 - <<'EOF' 2>&1 | tee "$OUT/pyc.txt"
import importlib.util, os, sys, triton
init = triton.__file__
pyc = importlib.util.cache_from_source(init)
print(sys.version.split()[0], "triton", triton.__version__, "pyc for triton/__init__:",
      os.path.exists(pyc), "writable:", os.access(os.path.dirname(init), os.W_OK),
      "PYTHONDONTWRITEBYTECODE:", os.environ.get("PYTHONDONTWRITEBYTECODE"))
EOF
timeout 20 python3 bench/probes/worker_start_phases.py --processes 3 \
  --out "$OUT/worker_start_phases.json" > "$OUT/worker_start_phases.log" 2>&1
echo "rc=$?"; tail -2 "$OUT/worker_start_phases.log"

echo "== 2. a process's first pallas_call after install()"
timeout 55 python3 bench/first_call/process_first_call.py --delays 0,1 --processes 4 \
  --out "$OUT/process_first_call.json" > "$OUT/process_first_call.log" 2>&1
echo "rc=$?"; grep -v Deprecation "$OUT/process_first_call.log" | tail -4

echo "== 3. each op's first call, ours vs built-in"
timeout $(( 20 + 18 * ${PROCESSES:-4} )) python3 bench/first_call/first_call.py --processes ${PROCESSES:-4} --out "$OUT/first_call.json" \
  > "$OUT/first_call.log" 2>&1
echo "rc=$?"; grep -v Deprecation "$OUT/first_call.log" | tail -9
python3 - "$OUT" <<'EOF' 2>/dev/null
import json, os, sys
out = sys.argv[1]
try:
  rec = json.load(open(os.path.join(out, "process_first_call.json")))
  r = rec["by_delay"]["0.0"]
  print(f"(a) first pallas_call right after install(): ours {r['ours_median_s']:.3f} s "
        f"(target 0.3), built-in {r['builtin_median_s']:.3f} s")
except Exception as e:  # noqa: BLE001
  print("(a) no record:", e)
try:
  rec = json.load(open(os.path.join(out, "first_call.json")))
  worst = max(rec["summary"].items(), key=lambda kv: kv[1]["ratio_of_medians"])
  print(f"(b) worst op first call ours/built-in: {worst[1]['ratio_of_medians']:.2f} "
        f"({worst[0]}; target 1.3)")
except Exception as e:  # noqa: BLE001
  print("(b) no record:", e)
EOF
tar -czf "$FINAL/firstcall.tgz" -C "$OUT/.." firstcall 2>/dev/null
echo "== done $(date -u +%H:%M:%S)"
