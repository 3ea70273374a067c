"""The process's first lowering of a kernel answered by the disk cache, right
after install() (as ops_vs_builtin's cached-recompile figure takes it), and
after a pause: where the difference goes.

    PALLAS_PROF_CACHE_DIR=/tmp/ppc python bench/probes/first_lowering_probe.py [pause_s]

Run it twice with the same cache folder (the first run fills the cache).
Prints jit's lower() and pallas-prof's lowering in ms, the garbage
collections that ran meanwhile (a full one stops every thread: its time lands
on whatever function was running), then a cProfile of the lowering (Python
3.12's cProfile sees every thread, the warm-up's too).
"""
import cProfile
import gc
import io
import os
import pstats
import sys
import threading
import time

collections = []   # (generation, ms, thread, end time)
_started = {}


def _on_gc(phase, info):
  me = threading.get_ident()
  if phase == "start":
    _started[me] = time.perf_counter()
  elif me in _started:
    t = time.perf_counter()
    collections.append((info["generation"], (t - _started.pop(me)) * 1e3,
                        threading.current_thread().name, t))


gc.callbacks.append(_on_gc)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402

from bench.suite import ops_vs_builtin as b  # noqa: E402
from pallas_prof.backend import kernel_registry  # noqa: E402

spec = b.OPS_BY_NAME["softmax"]()
kernel_registry.clear()
jax.clear_caches()
b._use_backend("pallas_prof")                 # install(): the background warm-up starts
if len(sys.argv) > 1:
  time.sleep(float(sys.argv[1]))
profile = cProfile.Profile()
profile.enable()
t0 = time.perf_counter()
spec["pallas"]().lower(*b.abstract_args(spec))
t1 = time.perf_counter()
profile.disable()
print("lower %.1f ms lowering %s ms" % ((t1 - t0) * 1e3, [round(r.generated.lowering_seconds * 1e3, 1)
                                                         for r in kernel_registry.kernels()]))
during = [(g, round(ms, 1), name) for g, ms, name, end in collections if t0 <= end <= t1 + 1e-3]
print("collections during lower() (generation, ms, thread):", during)
print("full collections in the process so far (ms):",
      [round(ms, 1) for g, ms, name, end in collections if g == 2])
for key, restriction in (("cumulative", ("pallas_prof|threading|subprocess|lock", 25)),
                         ("tottime", (12,))):
  out = io.StringIO()
  pstats.Stats(profile, stream=out).sort_stats(key).print_stats(*restriction)
  print(out.getvalue()[:6000])
