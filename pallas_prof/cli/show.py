"""`pallas-prof show KERNEL`: a compile stage, every line annotated with its
equation, your source line and (when profiled) its weight; `--eject FILE`
writes the kernel as a standalone Triton program."""
from __future__ import annotations

import linecache
import os

from rich.text import Text

from . import artifacts
from .render import console

STAGES = ("source", "ttir", "ttgir", "llir", "ptx", "sass")


def annotated(gk, ck, stage: str):
  """AnnotatedLine objects for a stage (source works without a compile)."""
  from ..profiler import annotated_listing
  if ck is None and stage != "source":
    raise SystemExit(f"pallas-prof: the kernel was not compiled, so there is no {stage}")
  if ck is None:
    from ..profiler.schema import AnnotatedLine
    lines = []
    for n, text in enumerate(gk.source.splitlines(), start=1):
      i = gk.line_map.get(n)
      e = gk.eqns[i] if i is not None else None
      lines.append(AnnotatedLine(number=n, text=text, generated_line=n, eqn=i,
                                 primitive=e.primitive if e else None,
                                 user_location=f"{e.file}:{e.line}" if e and e.file else None,
                                 weight=None))
    return lines
  return annotated_listing(ck, stage)


def show(args) -> int:
  run_dir = args.dir or artifacts.latest_run()
  if run_dir is None:
    raise SystemExit("pallas-prof: no saved run found; run `pallas-prof run script.py` first "
                     "or pass --dir")
  kdir = artifacts.find_kernel(run_dir, args.kernel)
  gk, ck = artifacts.load_kernel(kdir)
  if args.eject:
    from .eject import eject
    path = eject(gk, args.eject)
    print(f"wrote {path}: python {path} --interpret (CPU) or python {path} (GPU)")
    return 0
  stage = next((s for s in STAGES if getattr(args, s, False)), "source")
  lines = annotated(gk, ck, stage)
  weights = _weights_by_dir(run_dir, kdir)
  con = console()
  con.print(f"{stage} of {gk.name} ({gk.source_info}) from {run_dir}")
  current = object()
  for ln in lines:
    if ln.eqn != current and ln.eqn is not None:
      current = ln.eqn
      e = gk.eqns[ln.eqn]
      user = ""
      if e.file and e.line:
        user = linecache.getline(e.file, e.line).strip()
      w = weights.get(ln.eqn, ln.weight)
      header = Text(f"── [{e.index}] {e.primitive} @ {e.location}: {user}", style="bold cyan")
      if w is not None:
        header.append(f"   ({100 * w:.1f}% of instructions)", style="yellow")
      con.print(header, soft_wrap=True)
    elif ln.eqn is None and current is not None and ln.is_instruction:
      current = None
      con.print(Text("── (no equation: kernel prologue, program ids, block offsets)", style="dim"))
    con.print(Text(f"{ln.number:5d}  {ln.text}"), soft_wrap=True)
  return 0


def _weights_by_dir(run_dir: str, kdir: str) -> dict[int, float]:
  report = artifacts.read_report(run_dir)
  for k in report.get("kernels", []):
    if os.path.dirname(k["files"]["kernel"]) == os.path.relpath(kdir, run_dir):
      return _weights_for_label(report, k["label"])
  return {}


def _weights_for_label(report: dict, label: str) -> dict[int, float]:
  for k in (report.get("profile") or {}).get("kernels", []):
    if k["label"] == label and k.get("static"):
      return {e["index"]: e["weight"] for e in k["static"]["equations"]}
  return {}
