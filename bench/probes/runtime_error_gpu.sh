#!/usr/bin/env bash
# What a user sees on the GPU when a kernel reads past its ref (issue 30, item 3):
# `pallas-prof run` on the newcomer test's script (testkit/scripts.py), in the bounds-checked
# mode and in the default mode (an illegal address there), stderr and report.json's errors kept.
#   bash bench/probes/runtime_error_gpu.sh OUTDIR
out=${1:?an output folder}; mkdir -p "$out"
python3 - "$out/reads_past.py" <<'PY'
import sys, textwrap
from testkit.scripts import READS_PAST
open(sys.argv[1], "w").write(READS_PAST)
PY
for mode in bounds default; do
  check=; [ $mode = bounds ] && check=bounds
  PALLAS_PROF_CHECK=$check timeout 120 python3 -m pallas_prof run --out "$out/run_$mode" \
    "$out/reads_past.py" > "$out/$mode.stdout" 2> "$out/$mode.stderr"
  echo "== $mode: exit $? ; stderr $(wc -l < "$out/$mode.stderr") lines"
  cat "$out/$mode.stderr" | head -60
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('report.json errors:', json.dumps(r.get('errors'))[:600])" \
    "$out/run_$mode/report.json" 2>&1 | tail -2
done
