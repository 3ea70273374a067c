"""What tracing costs: lowering + compile of the examples with tracing off vs on.

    PYTHONPATH=. python bench/tracing_overhead.py [--rounds N]

In one process, alternating off and on for each example (so drift and load
hit both alike), each round lowers every example afresh (jax.jit(...).lower: JAX's tracing
plus pallas-prof's lowering) and compiles it afresh for sm_90 (no cache).
"On" is `pallas_prof.tracing(otlp_json=...)`: spans for every equation and
compile stage, written to an OTLP-JSON file by the batch exporter, and the
flush at the end of the `with` block counted too. Reports, per example, the
median wall time of each phase and the on/off ratios of wall time and of CPU
time (this process plus ptxas; unlike wall time it is not inflated by other
processes competing for the CPUs); exits 1 if tracing costs more than 5%.
CPU only is fine: compiling for sm_90 needs no GPU.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import resource
import statistics
import sys
import tempfile
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import pallas_prof  # noqa: E402
from pallas_prof.backend import compile as backend_compile  # noqa: E402
from pallas_prof.backend import registry  # noqa: E402
from pallas_prof.instrument import read_otlp_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
  """CPU time of this process (all its threads) and its finished children
  (ptxas): the work done, which other processes competing for the CPUs do not
  inflate the way they inflate wall time."""
  me = resource.getrusage(resource.RUSAGE_SELF)
  children = resource.getrusage(resource.RUSAGE_CHILDREN)
  return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def self_cpu_seconds() -> float:
  return time.process_time()


def lower_and_compile(fn, args) -> dict[str, float]:
  """Lowers and compiles one example afresh; wall and CPU seconds of each phase."""
  jax.clear_caches()
  registry.clear()
  w0, c0 = time.perf_counter(), cpu_seconds()
  fn.lower(*args)
  w1, c1 = time.perf_counter(), cpu_seconds()
  (record,) = registry.kernels()
  backend_compile.clear_memory_cache()
  backend_compile.compile_kernel(record.generated, ("cuda", 90), use_disk_cache=False)
  w2, c2 = time.perf_counter(), cpu_seconds()
  return {"lower": w1 - w0, "compile": w2 - w1, "lower_cpu": c1 - c0, "compile_cpu": c2 - c1}


def one_pass(mode: str, all_cases, trace_file: str) -> dict:
  """Every example lowered and compiled once, with tracing `mode` ("off"/"on")."""
  w0, c0, s0 = time.perf_counter(), cpu_seconds(), self_cpu_seconds()
  if mode == "on":
    # set-up, spans, export and the flush on exit are all counted
    with pallas_prof.tracing(otlp_json=trace_file):
      phases = {name: lower_and_compile(fn, args) for name, (fn, args) in all_cases.items()}
  else:
    phases = {name: lower_and_compile(fn, args) for name, (fn, args) in all_cases.items()}
  return {"examples": phases, "wall": time.perf_counter() - w0, "cpu": cpu_seconds() - c0,
          "self_cpu": self_cpu_seconds() - s0}


def null_observer_cost(n: int = 200_000) -> float:
  """Seconds per equation that the backend's hooks cost with tracing off: the
  dispatcher's `with observer().equation(info) as span: span.set(...)`."""
  from pallas_prof.backend import hooks
  assert not getattr(hooks.observer(), "enabled", False)
  t0 = time.perf_counter()
  for _ in range(n):
    with hooks.observer().equation(None) as span:
      span.set("pallas.generated_lines", "1-2")
  return (time.perf_counter() - t0) / n


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=15)
  args = parser.parse_args(argv)
  all_cases = cases()
  trace_file = os.path.join(tempfile.mkdtemp(prefix="pallas-prof-bench-"), "spans.jsonl")
  one_pass("off", all_cases, trace_file)             # warm up imports, JAX and Triton
  one_pass("on", all_cases, trace_file + ".warmup")
  passes = {"off": [], "on": []}
  for r in range(args.rounds):
    for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
      passes[mode].append(one_pass(mode, all_cases, trace_file))

  def med(mode, *keys):
    values = []
    for p in passes[mode]:
      v = p
      for k in keys:
        v = v[k]
      values.append(v)
    return statistics.median(values)

  spans = len(read_otlp_json(trace_file))
  print(f"pallas-prof tracing overhead: lowering + compile (sm_90) of the examples, "
        f"{args.rounds} passes each way, medians; {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; {spans} spans exported to OTLP-JSON")
  print(f"{'example':<16}{'lower off':>10}{'on':>9}{'compile off':>13}{'on':>9}{'ratio':>7}")
  for name in all_cases:
    lo, ln = med("off", "examples", name, "lower"), med("on", "examples", name, "lower")
    co, cn = med("off", "examples", name, "compile"), med("on", "examples", name, "compile")
    print(f"{name:<16}{lo * 1e3:>8.1f}ms{ln * 1e3:>7.1f}ms{co * 1e3:>11.1f}ms{cn * 1e3:>7.1f}ms"
          f"{(ln + cn) / (lo + co):>7.3f}")
  # each round's on/off pair ran back to back: the median of the paired ratios
  # cancels slow drifts in the machine's load
  wall = statistics.median(on["wall"] / off["wall"] for on, off in zip(passes["on"], passes["off"]))
  cpu = statistics.median(on["cpu"] / off["cpu"] for on, off in zip(passes["on"], passes["off"]))
  self_cpu = statistics.median(on["self_cpu"] / off["self_cpu"]
                               for on, off in zip(passes["on"], passes["off"]))
  print(f"whole pass (medians): wall {med('off', 'wall') * 1e3:.0f}ms off, "
        f"{med('on', 'wall') * 1e3:.0f}ms on; CPU {med('off', 'cpu') * 1e3:.0f}ms off, "
        f"{med('on', 'cpu') * 1e3:.0f}ms on (of which pallas-prof's process "
        f"{med('off', 'self_cpu') * 1e3:.0f}ms off, {med('on', 'self_cpu') * 1e3:.0f}ms on, "
        f"the rest ptxas)")
  equations = sum(1 for span in read_otlp_json(trace_file + ".warmup")   # one pass
                  if span["name"].startswith("lower "))
  per_eqn = null_observer_cost()
  lowering = sum(med("off", "examples", name, "lower") for name in all_cases)
  print(f"tracing off: the null observer costs {per_eqn * 1e9:.0f} ns per equation, "
        f"{per_eqn * equations * 1e6:.1f} us for the {equations} equations of a pass "
        f"({per_eqn * equations / lowering * 100:.3f}% of its lowering)")
  ok = wall <= LIMIT and cpu <= LIMIT
  print(f"tracing on / off, median of paired passes: wall {wall:.3f}, CPU {cpu:.3f} "
        f"(process alone {self_cpu:.3f}) (limit {LIMIT}):",
        "ok" if ok else "OVER THE LIMIT")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
