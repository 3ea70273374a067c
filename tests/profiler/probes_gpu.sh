#!/usr/bin/env bash
# Probes on a GPU (issue #16), from the repository root of the device machine with .whl
# carried (or WHL=DIR):   bash tests/profiler/probes_gpu.sh [steps]
# steps: ka softmax examples pytest (default: all; about 120 s on the H200; each step's
# timeout from T_KA, T_SOFTMAX, T_EXAMPLES, T_PYTEST). Logs, probes.json and
# trace.perfetto.json of each step under $OUT/probes/.
set -u
WHL=${WHL:-.whl}
[ -d "$WHL" ] && python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site $WHL/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PALLAS_PROF_CACHE_DIR=${PALLAS_PROF_CACHE_DIR:-/tmp/pallas-prof-cache}
O=${OUT:-/tmp/out}/probes; mkdir -p $O
F="^(WARNING|I0000|W0000|E0000)"
LARGE=${LARGE---large}     # LARGE= for the small shapes (a CPU dry run of the steps)
log() { echo "== $(date +%H:%M:%S) $*"; }
(cat COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo "unknown (no .git, no COMMIT)") | tee $O/commit
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
for step in ${*:-ka softmax examples pytest}; do
  log "$step"
  case $step in
    ka)         # the known answers of #15 from the probes, and a grid of ~8 waves
      timeout ${T_KA:-70} python3 tests/profiler/probes_gpu.py $LARGE --out $O/ka ka waves > $O/ka.log 2>&1
      echo "rc $?"; grep -vE "$F" $O/ka.log | tail -75 ;;
    softmax)    # the command line: report table, SM tracks in the run's trace
      timeout ${T_SOFTMAX:-45} python3 -m pallas_prof.cli.main run --probes --out $O/softmax examples/softmax.py $LARGE > $O/softmax.log 2>&1
      echo "rc $?"; grep -vE "$F" $O/softmax.log | tail -32
      python3 -c "import json; e=json.load(open('$O/softmax/trace.perfetto.json'))['traceEvents']; c=[x for x in e if x.get('cat')=='cta']; print('trace: CTA slices', len(c), 'SM tracks', len({(x['pid'],x['tid']) for x in c}), 'region slices', sum(x.get('cat')=='probe' for x in e))" 2>&1 | tail -2
      rm -rf $O/softmax/kernels $O/softmax/samples ;;
    examples)   # distortion of matmul and flash attention (large)
      timeout ${T_EXAMPLES:-50} python3 tests/profiler/probes_gpu.py $LARGE --out $O/ex matmul flash_attention > $O/ex.log 2>&1
      echo "rc $?"; grep -vE "$F" $O/ex.log | tail -40 ;;
    pytest)
      timeout ${T_PYTEST:-40} python3 -m pytest -q -p no:cacheprovider tests/profiler/probes/test_probes_gpu.py > $O/pytest.log 2>&1
      echo "rc $?"; tail -5 $O/pytest.log ;;
  esac
done
log done
gzip -f $O/*/*.json 2>/dev/null; true
