"""A kernel's figures as the gate keeps them, read from the profiler's report.

The figures are those `pallas-prof run` computes: on a CPU the static profile (the
kernel compiled for sm_90: registers, spills, shared memory, each equation's
instructions) and the work model; on a GPU also the replay's time (timing.py).
Nothing here measures anything of its own.
"""
from __future__ import annotations

import dataclasses
import linecache
import os
import sys

from .. import units
from ..serial import Record

SCHEMA = "pallas-prof/baseline/1"


@dataclasses.dataclass
class EquationFigures(Record):
  """One equation of a kernel: where in the user's code, and what it compiled to."""
  key: str                      # what matches it across versions: primitive and the user's line
  index: int                    # its `[i]` in the generated source
  primitive: str
  where: str | None             # the user's file:line
  source: str | None            # that line's text
  instructions: int             # SASS (else PTX) instructions attributed to it
  time_share: float | None = None   # measured share of the kernel's time (GPU only)


@dataclasses.dataclass
class Runtime(Record):
  """Replay time over several repeats: the median of their medians and the noise."""
  repeats: int
  launches: int                 # timed launches in each repeat
  median_us: float
  noise_us: float               # see timing.noise_us
  medians_us: list[float]


@dataclasses.dataclass
class KernelFigures(Record):
  REQUIRED = ("name",)
  name: str
  label: str | None             # name and content hash: it changes with the kernel
  signature: str | None         # the shapes it ran on
  where: str | None             # the user's pallas_call (source_info)
  target: str | None            # what the counts were compiled for: "cuda:90"
  grid: list[int]
  instruction_basis: str | None     # "sass" or "ptx"
  instructions: int | None
  registers: int | None
  spills: int | None
  shared_bytes: int | None
  program_bytes: float | None   # the bytes one program moves (work model)
  work_bytes: int | None        # the bytes the kernel must move (work model)
  flops: int | None
  equations: list[EquationFigures]
  runtime: Runtime | None = None


@dataclasses.dataclass
class Baseline(Record):
  """One test's kernels, as a baseline file holds them."""
  REQUIRED = ("schema", "test")
  schema: str
  test: str                     # the pytest node id
  toolchain: dict[str, str]     # jax, triton, target: counts compare within one toolchain
  kernels: dict[str, KernelFigures]


def kernel_key(figures: KernelFigures) -> str:
  """What a kernel is known by in a baseline: its name and the shapes it ran on (the
  label's hash changes whenever the kernel does, which is what the gate compares)."""
  return f"{figures.name}{figures.signature or ''}"


def source_line(where: str | None) -> str | None:
  file, _, line = (where or "").rpartition(":")
  if not file or not line.isdigit():
    return None
  text = linecache.getline(file, int(line)).strip()
  return text or None


def _where(file: str | None, line: int | None) -> str | None:
  if not file or not line:
    return None
  return f"{_relative(file)}:{line}"


def _relative(file: str) -> str:
  """A file under the directory the tests run in, relative to it: a baseline committed
  with the project reads the same on every machine."""
  here = os.getcwd() + os.sep
  return os.path.relpath(file) if os.path.isabs(file) and file.startswith(here) else file


def equation_figures(static, attribution) -> list[EquationFigures]:
  """Each equation with instructions, keyed by its primitive and the user's line (so that
  an edit that moves lines or adds equations elsewhere still matches it)."""
  if static is None:
    return []
  sass = static.weight_basis == "sass"
  measured = attribution is not None and attribution.basis != "static"
  seen: dict[str, int] = {}
  out = []
  for e in static.equations:
    count = e.sass_instructions if sass else e.ptx_instructions
    if not count:
      continue
    where = _where(e.user_file, e.user_line)
    source = source_line(where)
    key = f"{e.primitive} `{source}`" if source else f"{e.primitive} at {where or e.path}"
    seen[key] = seen.get(key, 0) + 1
    if seen[key] > 1:
      key = f"{key} #{seen[key]}"
    share = None
    if measured:
      weighed = attribution.equation(e.index)
      share = weighed.weight if weighed is not None else 0.0
    out.append(EquationFigures(key, e.index, e.primitive, where, source, int(count), share))
  return out


def kernel_figures(profile, record, runtime: Runtime | None = None) -> KernelFigures:
  """A KernelProfile (pallas_prof.profile's) and its registry record, as the gate keeps them."""
  static, work = profile.static, profile.work
  resources = static.resources if static is not None else {}
  count, basis = None, None
  if static is not None:
    count, basis = ((static.sass_instructions, "sass") if static.sass_instructions
                    else (static.ptx_instructions, "ptx"))
  moved = (work.block_bytes or work.bytes) if work is not None else None
  per_program = moved / work.programs if moved and work.programs else None
  gk = record.generated
  return KernelFigures(
      name=record.name, label=record.label,
      signature="(" + ", ".join(str(a) for a in record.in_avals) + ")",
      where=_call_site(gk.source_info), target=static.target if static is not None else None,
      grid=list(gk.grid), instruction_basis=basis,
      instructions=count, registers=resources.get("registers"),
      spills=units.spills(resources), shared_bytes=resources.get("shared_bytes"),
      program_bytes=per_program, work_bytes=work.bytes if work is not None else None,
      flops=work.flops if work is not None else None,
      equations=equation_figures(static, profile.attribution), runtime=runtime)


def _call_site(source_info: str | None) -> str | None:
  """'softmax_kernel at /x/softmax.py:18' -> its file:line, relative to here when inside."""
  if not source_info:
    return None
  where = source_info.rsplit(" at ", 1)[-1]
  file, _, line = where.rpartition(":")
  return f"{_relative(file)}:{line}" if file else where


def toolchain(target: str) -> dict[str, str]:
  """The versions the counts depend on: another triton compiles other code."""
  out = {"target": target}
  for package in ("jax", "triton"):
    version = getattr(sys.modules.get(package), "__version__", None)
    out[package] = str(version) if version is not None else "unknown"
  return out
