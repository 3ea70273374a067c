"""Where each op's first call goes, pallas-prof against the built-in backend, on a GPU.

    python bench/probes/first_call_parts.py [--processes 2] [--ops matmul,mha,rms_norm]
        [--out record.json]

bench/first_call/first_call.py gives the totals (ours 1.62x the built-in's on the matmul);
the compiler-side comparison on the CPU (bench/probes/ttir_vs_builtin.py) found
the two kernels cost the wheel's Triton the same. What is left is on the GPU
machine: jaxlib's PTX-to-cubin step, XLA's own Triton and LLVM, the worker hop.
Each fresh process (after bench/ops_vs_builtin.warm_up_process) takes each op's
first call through both backends, the order alternating between processes, and
records:
  - the phases (lower, XLA compile, first run) as first_call.py does;
  - a jax.profiler trace of lower + compile (C++ TraceMe events only, no Python
    tracer, so pallas-prof's Python-heavy lowering is not slowed more than the
    built-in's): XLA's compiler passes, its Triton pipeline, ptxas, by name;
  - for pallas-prof, the same call again after jax.clear_caches() with
    pallas-prof's compile kept: XLA's compile when jaxlib has already
    assembled this PTX (jaxlib keeps its module images by PTX text);
  - ptxas alone on the PTX jaxlib was handed (Triton's ptxas, jaxlib's usual
    flags), three times, and the worker's own Triton stages.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _events(trace_dir: str, min_ms: float = 1.0) -> dict:
  """Total milliseconds and count per event name of a jax.profiler trace's host
  planes (events under min_ms in total left out)."""
  from jax.profiler import ProfileData
  paths = glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True)
  if not paths:
    return {}
  totals: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
  for plane in ProfileData.from_file(paths[-1]).planes:
    if not plane.name.startswith("/host"):
      continue
    for line in plane.lines:
      for e in line.events:
        t = totals[f"{line.name.split('/')[0]}: {e.name[:120]}"]
        t[0] += e.duration_ns / 1e6
        t[1] += 1
  return {k: {"ms": round(v[0], 3), "n": v[1]}
          for k, v in sorted(totals.items(), key=lambda kv: -kv[1][0]) if v[0] >= min_ms}


def _traced_first_call(make_fn, args) -> tuple[float, dict, dict]:
  import jax
  from bench.suite import ops_vs_builtin as b
  opts = jax.profiler.ProfileOptions()
  opts.python_tracer_level = 0
  opts.host_tracer_level = 2
  d = tempfile.mkdtemp(prefix="fcparts_")
  jax.clear_caches()
  jax.profiler.start_trace(d, profiler_options=opts)
  try:
    total, phases, _ = b.first_call_seconds(make_fn, args)
  finally:
    jax.profiler.stop_trace()
  return total, phases, _events(d)


def _ptxas_seconds(ptx: str, arch: str, repeats: int = 3) -> list[float]:
  from triton.backends.nvidia.compiler import get_ptxas
  ptxas = get_ptxas(int(arch.removeprefix("sm_").rstrip("a"))).path
  out = []
  with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "k.ptx")
    with open(src, "w") as f:
      f.write(ptx)
    for _ in range(repeats):
      t0 = time.perf_counter()
      subprocess.run([ptxas, f"--gpu-name={arch}", src, "-o", src + ".o"], check=True,
                     capture_output=True)
      out.append(time.perf_counter() - t0)
  return out


def child(ops: list[str], builtin_first: bool) -> dict:
  sys.path.insert(0, ROOT)
  import jax

  import pallas_prof
  from bench.suite import ops_vs_builtin as b
  from pallas_prof.backend import kernel_registry
  from pallas_prof.backend.running.launch import jaxlib_ptx
  pallas_prof.install()
  order = ("builtin", "pallas_prof") if builtin_first else ("pallas_prof", "builtin")
  out = {"process_warm_up": b.warm_up_process(), "order": list(order), "ops": {}}
  cc = getattr(jax.devices()[0], "compute_capability", "").replace(".", "")
  arch = (f"sm_{cc}a" if cc == "90" else f"sm_{cc}") if cc else None
  for name in ops:
    spec = b.OPS_BY_NAME[name]()
    row = {}
    for backend in order:
      b._use_backend(backend)
      kernel_registry.clear()
      total, phases, events = _traced_first_call(spec["pallas"], spec["args"])
      row[backend] = {"first_call_s": total, **phases, "events": events}
      if backend == "pallas_prof":
        row[backend]["kernels"] = b.kernel_records()
        jax.clear_caches()          # pallas-prof's compile stays; XLA's and JAX's go
        total2, phases2, _ = b.first_call_seconds(spec["pallas"], spec["args"])
        row[backend]["again_kernel_kept"] = {"first_call_s": total2, **phases2}
        row[backend]["ptxas_alone_s"] = [
            _ptxas_seconds(jaxlib_ptx(r.compiled.ptx), arch) for r in kernel_registry.kernels()
        ] if arch else []
    b._use_backend("pallas_prof")
    out["ops"][spec["name"]] = row
    jax.clear_caches()
  return out


def _summary(runs: list[dict]) -> dict:
  names = runs[0]["ops"].keys()
  summary = {}
  for name in names:
    rows = [r["ops"][name] for r in runs]
    s = {}
    for backend in ("pallas_prof", "builtin"):
      for key in ("first_call_s", "lower_s", "compile_s", "first_run_s"):
        s[f"{backend}.{key}"] = statistics.median(x[backend][key] for x in rows)
    s["pallas_prof.again_kernel_kept.compile_s"] = statistics.median(
        x["pallas_prof"]["again_kernel_kept"]["compile_s"] for x in rows)
    s["ptxas_alone_s"] = statistics.median(
        sum(min(t) for t in x["pallas_prof"]["ptxas_alone_s"]) or 0.0 for x in rows)
    stages = collections.defaultdict(list)
    for x in rows:
      for k in x["pallas_prof"]["kernels"]:
        for st, v in k["stages_s"].items():
          stages[st].append(v)
        stages["worker_wait"].append(k["worker_wait_s"] or 0.0)
    s["worker_stages_s"] = {k: statistics.median(v) for k, v in stages.items()}
    summary[name] = s
  return summary


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--processes", type=int, default=2)
  ap.add_argument("--ops", default="matmul,mha,rms_norm,softmax")
  ap.add_argument("--out", default="first_call_parts.json")
  ap.add_argument("--child", help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  ops = args.ops.split(",")
  if args.child is not None:
    print(json.dumps(child(ops, args.child == "builtin")))
    return 0
  runs = []
  for i in range(args.processes):
    first = "builtin" if i % 2 else "pallas_prof"
    # a cache of its own per process, as first_call.py does: a kernel compiled by an
    # earlier process (or run) must not make this one's "first call" a disk hit
    env = {**os.environ, "PALLAS_PROF_CACHE_DIR": tempfile.mkdtemp(prefix="fcparts-cache-")}
    p = subprocess.run([sys.executable, __file__, "--ops", args.ops, "--child", first],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    if p.returncode:
      print(p.stderr[-3000:], file=sys.stderr)
      return 1
    runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    print(f"process {i + 1}/{args.processes} done", flush=True)
  summary = _summary(runs)
  with open(args.out, "w") as f:
    json.dump({"command": " ".join(sys.argv), "summary": summary, "runs": runs}, f, indent=1)
  for name, s in summary.items():
    print(f"\n{name}")
    for k, v in s.items():
      print(f"  {k:45s} {v if isinstance(v, dict) else round(v, 4)}")
    ev = {b: runs[0]["ops"][name][b]["events"] for b in ("pallas_prof", "builtin")}
    for b, e in ev.items():
      print(f"  {b} top events (process 1):")
      for k, v in list((k, v) for k, v in e.items() if not k.split(": ", 1)[1].startswith("$"))[:14]:
        print(f"    {v['ms']:9.1f} ms x{v['n']:<4d} {k[:110]}")
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
