"""What tracing costs: lowering + compile of the examples with tracing off vs on.

    PYTHONPATH=. python bench/cost/tracing_overhead.py [--rounds N]

In one process: each pass lowers every example afresh (jax.jit(...).lower:
JAX's tracing plus pallas-prof's lowering) and compiles it afresh for sm_90
(no cache, ptxas included); passes alternate off / on so that drifts in the
machine's load hit both alike. "On" is `pallas_prof.tracing(otlp_json=...)`:
spans for every equation and compile stage, written to an OTLP-JSON file by
the batch exporter; its set-up and the flush on exit are counted.

Three measurements:
  differential  median wall and CPU time (this process + ptxas) of the on and
                off passes, and the median ratio of back-to-back pairs. On a
                machine where other processes compete for the CPUs these
                numbers swing by several percent from pass to pass.
  attributed    CPU time spent inside the tracing code during extra "on"
                passes (span scopes, equation texts, compile spans, set-up,
                flush, and the exporter thread), over the CPU time of an off
                pass: the cost itself, insensitive to other processes.
  off           what the backend's hooks cost per equation with tracing off.
Exits 1 if the attributed cost exceeds 5%, or if the differential CPU ratio
does while the machine is quiet (load average below its CPU count).
CPU only is fine: compiling for sm_90 needs no GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import os
import resource
import statistics
import sys
import tempfile
import threading
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import pallas_prof  # noqa: E402
from pallas_prof.backend.compiling import compile as backend_compile  # noqa: E402
from pallas_prof.backend import hooks, kernel_registry  # noqa: E402
from pallas_prof.instrument import lossless_batch, observer, read_otlp_json, tracer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIMIT = 1.05


def _example(name):
  spec = importlib.util.spec_from_file_location(f"bench_{name}",
                                                os.path.join(ROOT, "examples", f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def cases():
  rng = np.random.default_rng(0)

  def arr(shape, dtype=jnp.float32):
    return jnp.asarray(rng.standard_normal(shape), dtype)

  m = {name: _example(name) for name in ("vector_add", "softmax", "layer_norm", "matmul",
                                         "flash_attention")}
  return {
      "vector_add": (m["vector_add"].add, (arr((100_003,)), arr((100_003,)))),
      "softmax": (m["softmax"].softmax, (arr((64, 1000)),)),
      "layer_norm": (m["layer_norm"].layer_norm, (arr((48, 768)), arr((768,)), arr((768,)))),
      "matmul": (jax.jit(functools.partial(m["matmul"].matmul, bm=64, bn=64, bk=32)),
                 (arr((256, 256), jnp.bfloat16), arr((256, 256), jnp.bfloat16))),
      "flash_attention": (jax.jit(functools.partial(m["flash_attention"].flash_attention,
                                                    causal=True)),
                          tuple(arr((1, 256, 2, 64), jnp.float16) for _ in range(3))),
  }


def cpu_seconds() -> float:
  """CPU time of this process (all its threads) and its finished children (ptxas)."""
  me = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  return (me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime
          + compile_worker_cpu_seconds())


def compile_worker_cpu_seconds() -> float:
  """CPU of pallas-prof's compile worker process and the ptxas runs it waited
  for (Triton compiles there, so its time is part of every compile)."""
  from pallas_prof.backend.compiling import compile_worker
  proc = compile_worker._worker.proc
  if proc is None or proc.poll() is not None:
    return 0.0
  try:
    with open(f"/proc/{proc.pid}/stat") as f:
      fields = f.read().rsplit(")", 1)[1].split()
  except OSError:
    return 0.0
  utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
  return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def lower_and_compile(fn, args) -> dict[str, float]:
  """Lowers and compiles one example afresh; wall seconds of each phase."""
  jax.clear_caches()
  kernel_registry.clear()
  w0 = time.perf_counter()
  fn.lower(*args)
  w1 = time.perf_counter()
  (record,) = kernel_registry.kernels()
  backend_compile.clear_memory_cache()
  backend_compile.compile_kernel(record.generated, ("cuda", 90), use_disk_cache=False)
  return {"lower": w1 - w0, "compile": time.perf_counter() - w1}


def one_pass(mode: str, all_cases, trace_file: str) -> dict:
  """Every example lowered and compiled once, with tracing `mode` ("off"/"on")."""
  w0, c0 = time.perf_counter(), cpu_seconds()
  if mode == "on":
    with pallas_prof.tracing(otlp_json=trace_file):
      phases = {name: lower_and_compile(fn, args) for name, (fn, args) in all_cases.items()}
  else:
    phases = {name: lower_and_compile(fn, args) for name, (fn, args) in all_cases.items()}
  return {"examples": phases, "wall": time.perf_counter() - w0, "cpu": cpu_seconds() - c0}


# --- attributed cost ----------------------------------------------------------------------------

# the tracing code's entry points; they do not call one another, so their
# thread CPU times add up without double counting
_ENTRY_POINTS = [
    (observer._KernelScope, "__enter__"), (observer._KernelScope, "__exit__"),
    (observer._KernelScope, "set"),
    (observer._EquationScope, "__enter__"), (observer._EquationScope, "__exit__"),
    (observer._Scope, "set"), (observer._Scope, "set_many"), (observer.SpanObserver, "compiled"),
    (tracer.Tracing, "start"), (tracer.Tracing, "stop"),
    (lossless_batch.LosslessBatchSpanProcessor, "_export_now"),
]


@contextlib.contextmanager
def attributing():
  """Counts the thread CPU time spent in the tracing code's entry points."""
  spent = {"seconds": 0.0}
  lock = threading.Lock()
  depth = threading.local()
  saved = []
  for owner, name in _ENTRY_POINTS:
    original = owner.__dict__[name]
    saved.append((owner, name, original))

    def timed(*args, _original=original, **kwargs):
      if getattr(depth, "level", 0):
        return _original(*args, **kwargs)     # already counted by the outer entry point
      depth.level = 1
      t0 = time.thread_time()
      try:
        return _original(*args, **kwargs)
      finally:
        depth.level = 0
        with lock:
          spent["seconds"] += time.thread_time() - t0
    setattr(owner, name, timed)
  try:
    yield spent
  finally:
    for owner, name, original in saved:
      setattr(owner, name, original)


def null_observer_cost(n: int = 200_000) -> float:
  """Seconds per equation that the backend's hooks cost with tracing off: the
  dispatcher's `with observer().equation(info) as span: span.set(...)`."""
  assert not getattr(hooks.observer(), "enabled", False)
  t0 = time.perf_counter()
  for _ in range(n):
    with hooks.observer().equation(None) as span:
      span.set("pallas.generated_lines", "1-2")
  return (time.perf_counter() - t0) / n


# --- the report -----------------------------------------------------------------------------------

def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=15)
  args = parser.parse_args(argv)
  all_cases = cases()
  workdir = tempfile.mkdtemp(prefix="pallas-prof-bench-")
  trace_file = os.path.join(workdir, "spans.jsonl")
  one_pass("off", all_cases, trace_file)             # warm up imports, JAX and Triton
  one_pass("on", all_cases, os.path.join(workdir, "warmup.jsonl"))
  passes = {"off": [], "on": []}
  for r in range(args.rounds):
    for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
      passes[mode].append(one_pass(mode, all_cases, trace_file))
  attributed = []
  for _ in range(max(3, args.rounds // 3)):
    with attributing() as spent:
      one_pass("on", all_cases, os.path.join(workdir, "attributed.jsonl"))
    attributed.append(spent["seconds"])

  def med(mode, *keys):
    values = []
    for p in passes[mode]:
      for key in keys:
        p = p[key]
      values.append(p)
    return statistics.median(values)

  load = os.getloadavg()[0]
  cpus = os.cpu_count() or 1
  spans = len(read_otlp_json(trace_file))
  print(f"pallas-prof tracing overhead: lowering + compile (sm_90) of the 5 examples; "
        f"{args.rounds} passes each way; {cpus} CPUs, load average {load:.1f}; "
        f"{spans} spans exported")
  print(f"{'example':<16}{'lower off':>10}{'on':>9}{'compile off':>13}{'on':>9}{'ratio':>7}")
  for name in all_cases:
    lo, ln = med("off", "examples", name, "lower"), med("on", "examples", name, "lower")
    co, cn = med("off", "examples", name, "compile"), med("on", "examples", name, "compile")
    print(f"{name:<16}{lo * 1e3:>8.1f}ms{ln * 1e3:>7.1f}ms{co * 1e3:>11.1f}ms{cn * 1e3:>7.1f}ms"
          f"{(ln + cn) / (lo + co):>7.3f}")
  pairs = list(zip(passes["on"], passes["off"]))
  wall = statistics.median(on["wall"] / off["wall"] for on, off in pairs)
  cpu = statistics.median(on["cpu"] / off["cpu"] for on, off in pairs)
  print(f"differential: pass wall {med('off', 'wall') * 1e3:.0f}ms off / "
        f"{med('on', 'wall') * 1e3:.0f}ms on, CPU {med('off', 'cpu') * 1e3:.0f}ms off / "
        f"{med('on', 'cpu') * 1e3:.0f}ms on; ratio of medians: wall "
        f"{med('on', 'wall') / med('off', 'wall'):.3f}, CPU {med('on', 'cpu') / med('off', 'cpu'):.3f}"
        f"; median of paired ratios: wall {wall:.3f}, CPU {cpu:.3f}")
  cost = statistics.median(attributed)
  attributed_ratio = 1 + cost / med("off", "cpu")
  print(f"attributed: {cost * 1e3:.1f}ms of CPU per pass in the tracing code, "
        f"ratio {attributed_ratio:.3f}")
  equations = sum(1 for span in read_otlp_json(os.path.join(workdir, "warmup.jsonl"))
                  if span["name"].startswith("lower "))
  per_eqn = null_observer_cost()
  lowering = sum(med("off", "examples", name, "lower") for name in all_cases)
  print(f"off: the null observer costs {per_eqn * 1e9:.0f} ns per equation, "
        f"{per_eqn * equations * 1e6:.1f} us for the {equations} equations of a pass "
        f"({per_eqn * equations / lowering * 100:.3f}% of its lowering)")
  quiet = load < cpus
  ok = attributed_ratio <= LIMIT and (cpu <= LIMIT or not quiet)
  note = "" if quiet else " (machine loaded: the differential ratios measure the load too)"
  print(f"tracing on / off: attributed {attributed_ratio:.3f}, differential CPU {cpu:.3f}, "
        f"wall {wall:.3f}; limit {LIMIT}: {'ok' if ok else 'OVER THE LIMIT'}{note}")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
