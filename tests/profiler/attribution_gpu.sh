#!/usr/bin/env bash
# Measured attribution on a GPU (issue #15), from the repository root of the device
# machine with .whl carried:   bash tests/profiler/attribution_gpu.sh [steps]
# steps: probe ka softmax timing ncu pytest (default: all of them). Everything lands
# in $OUT/attrib.tar.gz (run directories with report.json and raw samples, logs).
set -u
FINAL_OUT=${OUT:-/tmp/out}
W=/tmp/attrib
mkdir -p "$W" "$FINAL_OUT"
[ -d .whl ] && python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
export PALLAS_PROF_CACHE_DIR=${PALLAS_PROF_CACHE_DIR:-/tmp/pallas-prof-cache}
PP="python3 -m pallas_prof.cli.main"
log() { echo "== $(date +%H:%M:%S) $*"; }
STEPS=${*:-probe ka softmax timing ncu pytest}
cp COMMIT "$W/commit" 2>/dev/null || git rev-parse HEAD > "$W/commit" 2>/dev/null

for step in $STEPS; do
  log "$step"
  case $step in
    probe)
      nvidia-smi -L
      python3 -c "from pallas_prof.profiler.sampling import pcsampling as p; print(p.library_candidates()); c = p.Cupti(); print(c.path, c.version)"
      ;;
    ka)
      timeout 300 $PP run --out $W/ka tests/profiler/known_answer.py --large > $W/ka.log 2>&1
      tail -80 $W/ka.log ;;
    softmax)
      timeout 200 $PP run --out $W/softmax examples/softmax.py --large > $W/softmax.log 2>&1
      tail -40 $W/softmax.log ;;
    timing)   # wall time of one kernel's run, with and without sampling, twice each
      for i in ${TIMING_ROUNDS:-1 2}; do
        for flag in "" --no-sampling; do
          s=$(date +%s.%N)
          timeout 200 $PP run --out $W/timing$i$flag --no-insitu $flag examples/softmax.py --large > $W/timing$i$flag.log 2>&1
          e=$(date +%s.%N)
          echo "run${flag:- (sampling)} $i: $(python3 -c "print(f'{$e - $s:.2f} s')")" | tee -a $W/timing.txt
        done
      done ;;
    ncu)
      timeout 150 $PP run --out $W/ncu --ncu examples/softmax.py --large > $W/ncu.log 2>&1
      tail -30 $W/ncu.log ;;
    pytest)
      PALLAS_PROF_ATTRIB_RUNS=$W timeout 300 python3 -m pytest -q -p no:cacheprovider \
        tests/profiler/sampling/test_attribution_gpu.py tests/profiler/sampling/test_attribution.py 2>&1 | tail -30 ;;
  esac
done
python3 tests/profiler/summarize_attribution.py $W > $W/summary.txt 2>&1; cat $W/summary.txt
tar czf "$FINAL_OUT/attrib.tar.gz" -C /tmp attrib
