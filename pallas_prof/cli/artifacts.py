"""A run's output directory: report.json, traces, and each kernel's artifacts.

    <out>/report.json                   everything `pallas-prof report` re-renders
    <out>/trace.otlp.jsonl              OTLP-JSON lines (the Collector's otlpjsonfile format;
                                        trace.otlp.json in runs before the rename)
    <out>/trace.perfetto.json           Chrome/Perfetto trace events (ui.perfetto.dev)
    <out>/kernels/<label>/kernel.json   generated-kernel metadata: line map, equations, params,
                                        the call's input/output aliases
    <out>/kernels/<label>/source.py     the generated Triton source
    <out>/kernels/<label>/compiled.json and kernel.{ttir,ttgir,ll,ptx,cubin}
                                        the CompiledKernel (CompiledKernel.save)

`load_kernel` rebuilds the GeneratedKernel / CompiledKernel pair from those
files, so `pallas-prof show` works on a saved run without re-running it; runs
saved before compiled.json existed keep their compile in kernel.json.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from typing import Any

from ..backend.artifacts import STAGE_FILES, STAGES, CompiledKernel
from ..backend.codegen import EqnInfo
from ..backend.lowering import GeneratedKernel, KernelParam

REPORT = "report.json"    # written and read by cli/report.py's RunReport


def default_out_dir(root: str = "pallas-prof-out") -> str:
  return os.path.join(root, time.strftime("%Y%m%d-%H%M%S"))


def kernel_dir_name(label: str) -> str:
  return re.sub(r"[^0-9A-Za-z_.-]", "_", label.replace("#", "-"))


def save_kernel(out_dir: str, label: str, gk: GeneratedKernel, ck: CompiledKernel | None,
                aliases=()) -> dict:
  """Writes one kernel's source, artifacts and metadata; returns {what: relative path}.

  aliases: the call's input_output_aliases, (input index, output index) pairs."""
  rel = os.path.join("kernels", kernel_dir_name(label))
  d = os.path.join(out_dir, rel)
  os.makedirs(d, exist_ok=True)
  files = {"source": os.path.join(rel, "source.py")}
  with open(os.path.join(out_dir, files["source"]), "w") as f:
    f.write(gk.source)
  meta = {
      "label": label, "name": gk.name, "source_path": gk.path, "line_map": gk.line_map,
      "eqns": [e.to_dict() for e in gk.eqns], "params": [dataclasses.asdict(p) for p in gk.params],
      "grid": list(gk.grid), "launch_grid": list(gk.launch_grid), "num_warps": gk.num_warps,
      "num_stages": gk.num_stages, "jaxpr_text": gk.jaxpr_text, "source_info": gk.source_info,
      "lowering_seconds": gk.lowering_seconds, "gc_seconds": gk.gc_seconds, "key": gk.key,
      "atomic_params": list(getattr(gk, "atomic_params", ())),
      "input_output_aliases": [list(a) for a in aliases],
  }
  if ck is not None:
    ck.save(d)
    files.update({stage: os.path.join(rel, STAGE_FILES[stage]) for stage in ck.asm})
    files["compiled"] = os.path.join(rel, "compiled.json")
  files["kernel"] = os.path.join(rel, "kernel.json")
  with open(os.path.join(out_dir, files["kernel"]), "w") as f:
    json.dump(meta, f, indent=1, default=str)
  return files


def load_kernel(kernel_dir: str) -> tuple[GeneratedKernel, CompiledKernel | None]:
  with open(os.path.join(kernel_dir, "kernel.json")) as f:
    meta = json.load(f)
  with open(os.path.join(kernel_dir, "source.py")) as f:
    source = f.read()
  gk = GeneratedKernel(
      name=meta["name"], source=source, path=meta["source_path"],
      line_map={int(k): v for k, v in meta["line_map"].items()},
      eqns=[EqnInfo.from_dict(e) for e in meta["eqns"]],
      params=[KernelParam(**{**p, "shape": tuple(p["shape"])}) for p in meta["params"]],
      grid=tuple(meta["grid"]), launch_grid=tuple(meta["launch_grid"]),
      num_warps=meta["num_warps"], num_stages=meta["num_stages"], jaxpr_text=meta["jaxpr_text"],
      source_info=meta["source_info"], lowering_seconds=meta["lowering_seconds"], key=meta["key"],
      atomic_params=tuple(meta.get("atomic_params", ())), gc_seconds=meta.get("gc_seconds", 0.0))
  if os.path.exists(os.path.join(kernel_dir, "compiled.json")):
    return gk, CompiledKernel.load(kernel_dir, generated=gk)
  c = meta.get("compiled")      # a run saved before compiled.json
  if c is None:
    return gk, None
  asm = {}
  for stage in STAGES:
    path = os.path.join(kernel_dir, STAGE_FILES[stage])
    if os.path.exists(path):
      with open(path, "rb" if stage == "cubin" else "r") as f:
        asm[stage] = f.read()
  ck = CompiledKernel(name=gk.name, key=c["key"], target=tuple(c["target"]), asm=asm,
                      metadata=c["metadata"], stage_seconds=c["stage_seconds"],
                      compile_seconds=c["compile_seconds"], registers=c["registers"],
                      spill_stores=c["spill_stores"], spill_loads=c["spill_loads"],
                      stack_bytes=c["stack_bytes"], ptxas_log=c["ptxas_log"], generated=gk,
                      cache=c.get("cache", "disk"))
  return gk, ck


def load_aliases(kernel_dir: str) -> tuple[tuple[int, int], ...]:
  """The saved kernel's input_output_aliases (none in runs saved before they were kept)."""
  with open(os.path.join(kernel_dir, "kernel.json")) as f:
    meta = json.load(f)
  return tuple((int(i), int(o)) for i, o in meta.get("input_output_aliases", ()))


def read_report(run_dir: str) -> dict:
  """report.json as a dict, read through the typed report (cli/report.py: the one reader
  and writer of report.json, which also says what an unreadable one is)."""
  from .report import RunReport
  return RunReport.load(run_dir).to_dict()


def latest_run(root: str = "pallas-prof-out") -> str | None:
  if not os.path.isdir(root):
    return None
  runs = sorted(d for d in os.listdir(root) if os.path.exists(os.path.join(root, d, REPORT)))
  return os.path.join(root, runs[-1]) if runs else None


def find_kernel(run_dir: str, name: str) -> str:
  """The kernel directory in a run whose label or name matches `name`."""
  report = read_report(run_dir)
  kernels = report.get("kernels", [])
  for pick in (lambda k: k["label"] == name, lambda k: k["name"] == name,
               lambda k: k["label"].startswith(name) or k["name"].startswith(name)):
    hits = [k for k in kernels if pick(k)]
    if len(hits) == 1:
      return os.path.join(run_dir, os.path.dirname(hits[0]["files"]["kernel"]))
    if len(hits) > 1:
      raise SystemExit(f"pallas-prof: {name!r} matches several kernels: "
                       + ", ".join(k["label"] for k in hits) + "; give a full label")
  known = ", ".join(k["label"] for k in kernels) or "none"
  raise SystemExit(f"pallas-prof: no kernel {name!r} in {run_dir} (kernels: {known})")


def json_ready(x: Any) -> Any:
  return json.loads(json.dumps(x, default=str))
