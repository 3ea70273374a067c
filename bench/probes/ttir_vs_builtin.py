"""Is pallas-prof's generated kernel slower to compile than JAX's built-in
backend's? Both through the same pipeline: the `triton` package, for sm_90.

    python bench/probes/ttir_vs_builtin.py [--ops rms_norm,mha,matmul] [--repeats 4]
        [--out record.json] [--keep DIR]

Runs on a machine without a GPU. The built-in backend's TTIR is taken from
the StableHLO JAX lowers for CUDA (the `__gpu$xla.gpu.triton` custom call
carries it as MLIR bytecode), printed as text and compiled with
triton.compile, make_ttir's passes included (XLA's Triton pipeline runs them;
triton.compile skips them for an IR file); pallas-prof's kernel is compiled as
the compile worker does (prepared libdevice included), and its TTIR once more
the built-in's way ("ours IR": the kernels alone, without the Python front end
or the prepared link). Every stage through ptxas (Triton's flags), the three
compiles taking turns; medians after a first, discarded round; the sizes
(TTIR operations, LLVM IR, PTX and SASS lines) of the last. On the GPU the
built-in backend compiles its TTIR inside XLA instead, with XLA's own copy of
Triton and LLVM: this compares the kernels, not the two compilers.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import jax  # noqa: E402


def _function(op: str):
  """(jitted function, abstract arguments) of a benchmark op, as ops_vs_builtin.py runs it."""
  from bench.suite.ops_vs_builtin import OPS_BY_NAME, abstract_args
  spec = OPS_BY_NAME[op]()
  return spec["pallas"](), abstract_args(spec)


def builtin_ttir(op: str) -> tuple[str, int, int]:
  """The built-in backend's TTIR as text, with its num_warps and num_stages."""
  from jax._src.interpreters import mlir as jax_mlir
  from jax._src.lib.mlir import ir
  from jax._src.lib.triton import dialect as tt_dialect
  from pallas_prof.backend import pallas_call_rule
  pallas_call_rule.route_to_builtin(True)
  try:
    fn, args = _function(op)
    module = fn.trace(*args).lower(lowering_platforms=("cuda",)).compiler_ir("stablehlo")
  finally:
    pallas_call_rule.route_to_builtin(False)
  calls = []

  def walk(operation):
    for region in operation.regions:
      for block in region.blocks:
        for child in block.operations:
          if child.operation.name == "stablehlo.custom_call":
            calls.append(child)
          walk(child.operation)

  walk(module.operation)
  config = calls[0].attributes["mhlo.backend_config"]
  bytecode = bytes(ir.StringAttr(config["ir"]).value_bytes)
  context = jax_mlir.make_ir_context()
  tt_dialect.register_dialect(context)
  with context:
    text = ir.Module.parse(bytecode).operation.get_asm(enable_debug_info=True)
  number = lambda attr: int(str(config[attr]).split(":")[0])
  return text, number("num_warps"), number("num_stages")


def ours_request(op: str) -> dict:
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.backend import kernel_registry
  kernel_registry.clear()
  jax.clear_caches()
  fn, args = _function(op)
  fn.lower(*args)
  (record,) = kernel_registry.kernels()
  return pcompile.compile_request(record.generated, ("cuda", 90), need_cubin=False)


class _Split:
  """Times the parts of a compile both kernels share, process-wide while it runs:
  make_ttir's passes, the libdevice link (Triton's or the prepared one) and LLVM's O3."""

  def __init__(self):
    self.times: dict[str, float] = {}
    self.texts: dict[str, str] = {}

  @contextlib.contextmanager
  def installed(self):
    from triton._C.libtriton import llvm
    from triton.backends.nvidia.compiler import CUDABackend
    from pallas_prof.backend.compiling import libdevice_link
    saved = (CUDABackend.__dict__["make_ttir"], llvm.link_extern_libs, llvm.optimize_module,
             libdevice_link.link)
    make_ttir, link_extern, optimize, prepared = (saved[0].__func__, *saved[1:])

    outer = []

    def timer(name, fn, after=None):
      def timed(*a, **k):
        if outer and outer[-1] == name:     # the prepared link's own link of its library
          return fn(*a, **k)
        outer.append(name)
        t0 = time.perf_counter()
        try:
          out = fn(*a, **k)
        finally:
          outer.pop()
        self.times[name] = self.times.get(name, 0.0) + (time.perf_counter() - t0) * 1e3
        if after:
          after(out)
        return out
      return timed

    CUDABackend.make_ttir = staticmethod(timer(
        "ttir passes", make_ttir, lambda mod: self.texts.__setitem__("ttir", str(mod))))
    llvm.link_extern_libs = timer("link", link_extern)
    llvm.optimize_module = timer("O3", optimize)
    libdevice_link.link = timer("link", prepared)
    try:
      yield self
    finally:
      (CUDABackend.make_ttir, llvm.link_extern_libs, llvm.optimize_module,
       libdevice_link.link) = (staticmethod(saved[0].__func__), *saved[1:])


def _timed_compile(src, options) -> tuple[dict[str, float], dict[str, str]]:
  """The built-in's TTIR through triton.compile, make_ttir's passes included (an
  IR file skips its own stage's passes; XLA's Triton pipeline runs them)."""
  import triton
  from triton.backends.compiler import GPUTarget
  times = {}
  texts = {}

  def hook(backend, stages, options_, language, capability):
    original_ttgir = stages["ttgir"]

    def ttir_then_ttgir(module, metadata):
      t0 = time.perf_counter()
      module = backend.make_ttir(module, metadata, options_, capability)
      times["ttir"] = (time.perf_counter() - t0) * 1e3
      return original_ttgir(module, metadata)
    stages["ttgir"] = ttir_then_ttgir
    for name in list(stages):
      original = stages[name]

      def timed(module, metadata, _name=name, _original=original):
        t0 = time.perf_counter()
        out = _original(module, metadata)
        times[_name] = (time.perf_counter() - t0) * 1e3
        return out
      stages[name] = timed

  saved = (triton.knobs.runtime.add_stages_inspection_hook, triton.knobs.nvidia.dump_ptxas_log)
  triton.knobs.runtime.add_stages_inspection_hook = hook
  triton.knobs.compilation.always_compile = True
  triton.knobs.nvidia.dump_ptxas_log = False
  try:
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
  finally:
    (triton.knobs.runtime.add_stages_inspection_hook, triton.knobs.nvidia.dump_ptxas_log) = saved
  times["ttgir"] -= times["ttir"]
  texts.update({k: compiled.asm[k] for k in ("llir", "ptx", "cubin")})
  return times, texts


_OP = re.compile(r'^\s*(?:%[^=]*= )?"?([a-z_]+\.[a-z_.]+)', re.M)


def ttir_ops(text: str) -> collections.Counter:
  """Operations of a TTIR module by name (from its text; locations ignored)."""
  body = "\n".join(line for line in text.splitlines() if not line.startswith("#loc"))
  return collections.Counter(m.group(1) for m in _OP.finditer(body)
                             if not m.group(1).startswith(("tt.func", "module")))


def sass(cubin: bytes) -> list[str]:
  """The kernel's SASS instructions (cuobjdump -sass), addresses and comments dropped."""
  import triton
  tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
  with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
    f.write(cubin)
  try:
    out = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
  finally:
    os.unlink(f.name)
  return [re.sub(r"\s*/\*[^*]*\*/\s*", " ", line).strip().rstrip(" ;") for line in out.splitlines()
          if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]


def sizes(ttir: str, llir: str, ptx: str, cubin: bytes) -> dict:
  ops = ttir_ops(ttir)
  code = lambda text: sum(1 for line in text.splitlines()
                          if line.strip() and not line.lstrip().startswith(("//", "!", ".loc", "#")))
  instrs = sass(cubin)
  return {"ttir_ops": sum(ops.values()), "ttir_by_op": dict(ops), "llir_lines": len(llir.splitlines()),
          "llir_code_lines": code(llir), "ptx_lines": len(ptx.splitlines()), "ptx_code_lines": code(ptx),
          "ptx_loc_lines": sum(1 for line in ptx.splitlines() if line.lstrip().startswith(".loc")),
          "sass_instructions": len([i for i in instrs if not i.startswith("NOP")]),
          "sass_opcodes": collections.Counter(i.split()[0] if not i.startswith("@") else i.split()[1]
                                              for i in instrs)}


def main(argv=None):
  ap = argparse.ArgumentParser()
  ap.add_argument("--ops", default="rms_norm,mha,matmul")
  ap.add_argument("--repeats", type=int, default=4)
  ap.add_argument("--out", help="a JSON record of every compile's times and the sizes")
  ap.add_argument("--keep", help="a folder to write each kernel's last TTIR, LLVM IR, PTX and cubin to")
  args = ap.parse_args(argv)
  os.environ.setdefault("PALLAS_PROF_CACHE_DIR", tempfile.mkdtemp(prefix="pallas-prof-bench-"))
  import pallas_prof
  from pallas_prof.backend.compiling import triton_run
  pallas_prof.install()
  stages = ("ttir", "ttgir", "llir", "ptx", "cubin")
  print(f"load average {os.getloadavg()}")
  print("median ms per stage (TTIR->cubin, sm_90; cubin: ptxas, Triton's flags). ours: ttir "
        "includes Triton's Python front end, llir the prepared libdevice link; built-in: its TTIR "
        "through make_ttir's passes, Triton's own libdevice link; ours IR: our TTIR the built-in's "
        "way. link, O3: parts of llir")
  record = {"load_average_start": os.getloadavg(), "ops": {}}
  for op in args.ops.split(","):
    request = ours_request(op)
    request["need_cubin"] = True
    text, warps, num_stages = builtin_ttir(op)
    with tempfile.NamedTemporaryFile("w", suffix=".ttir", delete=False) as f:
      f.write(text)
    options = {k: v for k, v in request["options"].items() if k != "extern_libs"}
    options.update(num_warps=warps, num_stages=num_stages)
    ours, theirs, ours_as_ir, links = [], [], [], []
    ours_ttir = None
    for _ in range(args.repeats + 1):      # taking turns, so that load falls on both alike
      split = _Split()
      with split.installed():
        result = triton_run.run_triton(request)
      assert "error" not in result, result.get("error")
      ours.append({**{r[0]: (r[2] - r[1]) / 1e6 for r in result["records"]}, **split.times})
      links.append(result["libdevice_link"])
      ours_texts = {**result["asm"], "ttir": split.texts["ttir"]}
      split = _Split()
      with split.installed():
        times, texts = _timed_compile(f.name, options)
      theirs.append({**times, **{k: v for k, v in split.times.items() if k != "ttir passes"}})
      theirs_texts = {**texts, "ttir": split.texts["ttir"]}
      if ours_ttir is None:
        with tempfile.NamedTemporaryFile("w", suffix=".ttir", delete=False) as g:
          g.write(ours_texts["ttir"])
        ours_ttir = g.name
      # our TTIR (after make_ttir) exactly as the built-in's: same harness, same options,
      # Triton's own libdevice link; the kernels alone, without the front end or the prepared link
      split = _Split()
      with split.installed():
        times, _ = _timed_compile(ours_ttir, options)
      ours_as_ir.append({**times, **{k: v for k, v in split.times.items() if k != "ttir passes"}})
    os.unlink(f.name)
    os.unlink(ours_ttir)
    median = lambda runs, k: statistics.median(r.get(k, 0.0) for r in runs[1:])
    keys = stages + ("link", "O3")
    row = lambda runs: "  ".join(f"{k} {median(runs, k):6.1f}" for k in keys)
    total = lambda runs: statistics.median(sum(r[k] for k in stages) for r in runs[1:])
    print(f"{op:11s} ours     {row(ours)}  total {total(ours):6.1f}  "
          f"(ttir passes {median(ours, 'ttir passes'):.1f})")
    print(f"{'':11s} built-in {row(theirs)}  total {total(theirs):6.1f}")
    print(f"{'':11s} ours IR  {row(ours_as_ir)}  total {total(ours_as_ir):6.1f}  "
          "(our TTIR through the built-in's harness)")
    size = {"ours": sizes(ours_texts["ttir"], ours_texts["llir"], ours_texts["ptx"], ours_texts["cubin"]),
            "builtin": sizes(theirs_texts["ttir"], theirs_texts["llir"], theirs_texts["ptx"],
                             theirs_texts["cubin"])}
    if args.keep:
      os.makedirs(args.keep, exist_ok=True)
      for who, texts in (("ours", ours_texts), ("builtin", theirs_texts)):
        for ext in ("ttir", "llir", "ptx", "cubin"):
          data = texts[ext]
          with open(os.path.join(args.keep, f"{op}.{who}.{ext}"), "wb") as out:
            out.write(data if isinstance(data, bytes) else data.encode())
    for who, s in size.items():
      print(f"{'':11s} {who:8s} ttir ops {s['ttir_ops']}  llir lines {s['llir_lines']} "
            f"(code {s['llir_code_lines']})  ptx lines {s['ptx_lines']} (code {s['ptx_code_lines']}, "
            f".loc {s['ptx_loc_lines']})  sass instructions {s['sass_instructions']}")
    record["ops"][op] = {"num_warps": warps, "num_stages": num_stages, "options": options,
                         "ours_ms": ours, "ours_libdevice_link": links, "ours_ttir_as_builtin_ms": ours_as_ir, "builtin_ms": theirs, "sizes": size}
  record["load_average_end"] = os.getloadavg()
  print(f"load average {os.getloadavg()}")
  if args.out:
    with open(args.out, "w") as f:
      json.dump(record, f, indent=1, default=str)


if __name__ == "__main__":
  main()
