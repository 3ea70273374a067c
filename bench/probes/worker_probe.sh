python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=$PWD:/tmp/site
for i in 1 2; do /usr/bin/time -f "import triton: %e s" python3 -c "import triton"; done
python3 -X importtime -c "import triton" 2>&1 | sort -t'|' -k2 -n | tail -8
python3 - <<'PY'
import time, sys
t0 = time.perf_counter()
from pallas_prof.backend.compiling import warmup
t1 = time.perf_counter()
warmup.warm_up(90)
t2 = time.perf_counter()
warmup.warm_up(90)
t3 = time.perf_counter()
print(f"import {t1-t0:.3f} first warm-up (worker start + compile) {t2-t1:.3f} second {t3-t2:.3f}")
PY
