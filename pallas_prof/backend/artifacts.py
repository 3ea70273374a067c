"""The artifacts data flows through, one stage's output at a time, frozen.

    lowering:  GeneratedKernel  (Triton source in a real file, its line map,
                                 an EquationRecord per jaxpr equation, the
                                 KernelParams it takes)
    compile:   CompiledKernel   (every stage's text, Triton's metadata, ptxas's
                                 resource figures, stage times)
    launch:    LaunchSpec       (what a launch outside JAX needs: the cubin, grid,
                                 parameters, aliasing; the profiler's replay and
                                 its child processes load it, with no JAX)

Each stage makes its artifact once and never changes it; work on an artifact
(compiling, assembling a cubin) is a function that returns a new one.
CompiledKernel and LaunchSpec have one save(dir)/load(dir) each, with a schema
version, shared by the disk cache, the run directory and the profiler's child
processes (the run directory keeps the GeneratedKernel: cli/run_directory.py, which
reads it and the run's CompiledKernel back through cli/saved_runs/kernel.py).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import types
from typing import Any, Callable, ClassVar, Mapping, Union

from ..safe_files import write_atomic
from ..serial import from_fields, plain
from .options import LoweringOptions, ProbeLayout, option_property as _option
from .equation_text import Described, Description, without_line_comment
# DEFAULT_TARGET and target_text lived here before targets.py: still importable from here
from .targets import DEFAULT_TARGET, Target, as_target, target_text  # noqa: F401

# --- lowering: what the kernel takes ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class KernelParam:
  """One pointer parameter of the generated kernel: a pallas_call operand."""
  name: str                     # the parameter's name in the generated source
  label: str                    # the user's name for it (x_ref)
  dtype: str
  shape: tuple[int, ...]        # the whole array's, not the block's
  # "input" | "output" | "check" (bounds-checked mode's flags) | "initial" (bounds-checked
  # mode: the starting values of output `index`, aliased to it; the kernel never reads it)
  # | "probes" (the probed variant's timestamp buffer)
  role: str
  index: int                    # position among inputs or outputs

  @property
  def nbytes(self) -> int:
    """Bytes of the whole array as numpy holds it (the replay's buffers)."""
    return param_nbytes(self.dtype, self.shape)


# --- lowering: one record per jaxpr equation ----------------------------------------

@dataclasses.dataclass(frozen=True)
class DotFacts:
  """A dot_general as its rule emitted it: out[batch, m, n] = sum_k lhs * rhs."""
  batch: int
  m: int
  n: int
  k: int
  operand_dtype: str            # the left operand's dtype
  precision: str | None         # the input_precision passed to tl.dot (None: Triton's default)

  @property
  def flops(self) -> int:
    return 2 * self.batch * self.m * self.n * self.k


Trips = Union[int, str, None]   # a loop's iterations: a count, "dynamic", None (not a loop)


@dataclasses.dataclass(frozen=True)
class EquationRecord(Described):
  """One jaxpr equation as lowered: where it came from, what it generated,
  and what its rule knows about the work it does.

  The work facts are per execution of the equation by one program (one
  block): `bytes_read`/`bytes_written` the memory its loads and stores move,
  FLOPs by kind, transcendental function evaluations. A loop records its
  `trips`; when it was emitted straight-line (`unrolled`), each iteration's
  equations have records of their own, so the loop multiplies nothing.
  """
  index: int                    # preorder index over the kernel and nested jaxprs
  path: str                     # "4" or "4.body.2": position in the nesting
  primitive: str
  file: str | None              # the user's frame that made the equation
  line: int | None
  function: str | None
  parent: int | None            # index of the control-flow equation containing it
  region: str = "kernel"        # kernel | index_map x_ref | body | cond | branch 1 ...
  description: Description = dataclasses.field(default_factory=Description, repr=False,
                                                compare=False)
  lines: tuple[int, ...] = ()   # the generated source's lines it emitted (1-based)
  # what the rule knows
  bytes_read: int = 0
  bytes_written: int = 0
  dot_flops: int = 0
  elementwise_flops: int = 0    # float arithmetic and reductions, transcendentals apart
  transcendentals: int = 0
  trips: Trips = None
  unrolled: bool = False
  dot: DotFacts | None = None
  # a load or store: the operand it moves (x_ref) and the bytes of its longest run of
  # consecutive addresses (a block row; None where not known: a gather)
  operand: str | None = None
  contiguous_bytes: int | None = None
  # inside a loop: computes the same value every iteration (reads only what the loop
  # does not change), so it could run once before the loop
  invariant: bool = False

  _FACTS = ("bytes_read", "bytes_written", "dot_flops", "elementwise_flops",
            "transcendentals", "trips", "unrolled", "operand", "contiguous_bytes",
            "invariant")

  def to_dict(self) -> dict:
    out = {"index": self.index, "path": self.path, "primitive": self.primitive,
           "text": self.text, "in_avals": [str(a) for a in self.in_avals],
           "out_avals": [str(a) for a in self.out_avals], "file": self.file, "line": self.line,
           "function": self.function, "parent": self.parent, "region": self.region,
           "lines": list(self.lines), "jaxpr_line": self.jaxpr_line}
    out.update({name: getattr(self, name) for name in self._FACTS})
    out["dot"] = plain(self.dot)
    return out

  @classmethod
  def from_dict(cls, d: dict) -> "EquationRecord":
    """Also reads records saved before the work facts existed (they read as none)."""
    facts = {name: d[name] for name in cls._FACTS if name in d}
    dot = d.get("dot")
    return cls(index=d["index"], path=d["path"], primitive=d["primitive"], file=d["file"],
               line=d["line"], function=d["function"], parent=d["parent"],
               region=d.get("region", "kernel"),
               description=Description.fixed(d["text"], d["in_avals"], d["out_avals"],
                                             d.get("jaxpr_line")),
               lines=tuple(d.get("lines", ())), dot=DotFacts(**dot) if dot else None, **facts)

  def __repr__(self) -> str:
    return f"EquationRecord({self.index}, {self.primitive}, {self.location})"


# --- lowering: the kernel ------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GeneratedKernel:
  """A lowered kernel: Triton source in a real file plus everything about it."""
  name: str
  source: str
  path: str
  line_map: dict[int, int]           # generated line (1-based) -> equation index
  eqns: tuple[EquationRecord, ...]   # by index
  params: tuple[KernelParam, ...]
  grid: tuple[int, ...]
  launch_grid: tuple[int, int, int]
  jaxpr_text: str
  source_info: str
  lowering_seconds: float
  key: str                           # sha256 of `source` (hex): its file, compiles, tuning files
  # its options as they took effect (no tma where no access could use it, the workaround plan
  # the rules used): num_warps etc. below read them; from disk, LoweringOptions.SAVED's alone
  options: LoweringOptions = dataclasses.field(compare=False, repr=False)
  atomic_params: tuple[str, ...] = ()
  # of lowering_seconds, Python's garbage collections meanwhile (CollectionClock)
  gc_seconds: float = 0.0
  # bounds-checked mode: each checked access (check_sites.CheckSite); the kernel
  # then has one more parameter, the flag buffer (role "check")
  bounds_sites: tuple = ()
  # the profiler's probed variant (probes.py): what its probe buffer holds; the
  # kernel then has one more parameter, that buffer (role "probes")
  probe_layout: ProbeLayout | None = None
  tma_notes: tuple = ()              # TMA asked for: accesses that could not use it (TmaNote)
  # a note per change made as Triton failed on the plain lowering (workarounds.py)
  workarounds: tuple[str, ...] = ()
  # (the jaxpr's name, the kernel's name) of each variable that is one of the kernel's
  # operand refs (`b`, `x_ref`): errors name refs as the kernel does (with_ref_names)
  ref_names: tuple[tuple[str, str], ...] = ()

  num_warps = _option("num_warps")
  num_stages = _option("num_stages")
  enable_fp_fusion = _option("enable_fp_fusion")    # Triton may contract a*b+c into one FMA
  check_bounds = _option("check_bounds")
  launch_group = _option("launch_group")    # > 1: programs launched in groups (grid.py)
  tma = _option("tma")                      # some loads go through TMA descriptors (tma.py)
  workaround_plan = _option("workarounds")

  def __eq__(self, other) -> bool:
    # the saved options count as when they were fields; the plan and the target, unsaved, do not
    if type(other) is not type(self):
      return NotImplemented
    return self._compared() == other._compared()

  def _compared(self) -> tuple:
    return (*(getattr(self, f.name) for f in dataclasses.fields(self) if f.compare),
            self.options.saved())

  @property
  def inputs(self) -> list[KernelParam]:
    return [p for p in self.params if p.role == "input"]

  @property
  def outputs(self) -> list[KernelParam]:
    return [p for p in self.params if p.role == "output"]

  def zeroed_outputs(self, aliases=()) -> tuple[int, ...]:
    """The outputs that start from zero at each launch, by index: those updated with
    atomics (atomic_params), unless aliased to an input (`aliases`: the call's
    (input, output) pairs), whose buffer then holds that input."""
    aliased = {int(o) for _, o in aliases}
    return tuple(p.index for p in self.outputs
                 if p.name in self.atomic_params and p.index not in aliased)

  def eqn(self, index: int) -> EquationRecord:
    return self.eqns[index]

  def eqn_at_line(self, line: int) -> EquationRecord | None:
    i = self.line_map.get(line)
    return None if i is None else self.eqns[i]

  def code_lines(self) -> list[str]:
    """The source's lines as code: each equation's line without the comment the lowering
    wrote after it (its record's line_comment); the kernel's set-up and notes as they are."""
    lines = self.source.splitlines()
    for n, i in self.line_map.items():
      if 1 <= n <= len(lines) and 0 <= i < len(self.eqns):
        lines[n - 1] = without_line_comment(lines[n - 1], self.eqns[i].line_comment)
    return lines

  # kernel.json's layout; runs saved before it had a schema read as this one
  SCHEMA: ClassVar[str] = "pallas-prof/generated/1"
  _SCALARS: ClassVar[tuple] = ("name", "jaxpr_text", "source_info", "lowering_seconds",
                               "gc_seconds", "key")

  def save(self, directory: str, *, write: "Writer" = write_atomic, **extra) -> None:
    """Writes source.py and kernel.json (with `extra`, e.g. the run's label and aliases),
    the bounds-checked mode's sites with it (an ejected kernel names what it checks).
    `write(path, data)` writes each file (see Writer). A run directory reads them back,
    decoded by type (cli/saved_runs/kernel.py)."""
    os.makedirs(directory, exist_ok=True)
    write(os.path.join(directory, "source.py"), self.source)
    meta = {"schema": self.SCHEMA, **extra, **{k: getattr(self, k) for k in self._SCALARS},
            **self.options.saved(),
            "source_path": self.path, "line_map": self.line_map,
            "eqns": [e.to_dict() for e in self.eqns],
            "params": plain(self.params), "grid": list(self.grid),
            "launch_grid": list(self.launch_grid), "atomic_params": list(self.atomic_params),
            "bounds_sites": plain(self.bounds_sites),
            "tma_notes": [n.to_dict() for n in self.tma_notes],
            "workarounds": list(self.workarounds), "ref_names": plain(self.ref_names)}
    write(os.path.join(directory, "kernel.json"), json.dumps(meta, indent=1, default=str))


# --- compile: the compiled kernel ------------------------------------------------------

STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
# each stage's file in a saved CompiledKernel (a run directory's kernels/<label>/ too);
# amdgcn and hsaco: an AMD target's assembly and binary (targets.HIP_STAGES)
STAGE_FILES = {"ttir": "kernel.ttir", "ttgir": "kernel.ttgir", "llir": "kernel.ll",
               "ptx": "kernel.ptx", "cubin": "kernel.cubin", "amdgcn": "kernel.amdgcn",
               "hsaco": "kernel.hsaco"}
BINARY_STAGES = ("cubin", "hsaco")


class SchemaMismatch(ValueError):
  """A saved artifact of another layout (older or newer pallas-prof)."""


def _frozen(mapping: Mapping | None) -> Mapping:
  return types.MappingProxyType(dict(mapping or {}))


def _read_json(path: str, schema: str) -> dict:
  with open(path) as f:
    meta = json.load(f)
  if meta.get("schema") != schema:
    raise SchemaMismatch(f"{path} has schema {meta.get('schema')!r}; this pallas-prof reads "
                         f"{schema!r}")
  return meta


# writes one file whole: safe_files.write_atomic (temp, fsync, rename), raising on failure;
# a run folder's writer keeps each failure as a missing file and goes on (cli/run_writes.py)
Writer = Callable[[str, Union[bytes, str]], Any]


def _write_json(path: str, meta: dict, write: Writer = write_atomic) -> None:
  write(path, json.dumps(meta, indent=1))


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
  """A kernel compiled for one target.

  The GPU launch path stops at PTX (jaxlib assembles its own cubin): `asm`
  then has no "cubin" and registers/spills are None until
  compile.assemble_cubin returns the artifact that has them.
  """
  SCHEMA: ClassVar[str] = "pallas-prof/compiled/1"

  name: str
  key: str
  target: Target                   # ("cuda", 90), ("hip", "gfx942")
  asm: Mapping[str, str | bytes]   # stage -> text (cubin, hsaco: bytes)
  metadata: Mapping[str, Any]      # Triton's metadata (shared, num_warps, scratch sizes, ...)
  stage_seconds: Mapping[str, float]
  compile_seconds: float
  registers: int | None
  spill_stores: int | None
  spill_loads: int | None
  stack_bytes: int | None
  ptxas_log: str
  generated: GeneratedKernel | None = None   # the GeneratedKernel it was compiled from
  cache: str = "miss"              # "miss", "memory" or "disk"
  # seconds this compile waited for the compile worker before Triton started on it:
  # queued behind other compiles (the background warm-up's) plus the worker's
  # start-up (Python, `import triton`) when it was not ready yet
  worker_wait_seconds: float = 0.0
  # what an AMD target's assembly reports beside `registers` (its VGPRs): SGPRs, AGPRs,
  # registers spilled, LDS, scratch, LLVM's occupancy (compiling/amd_resources.py)
  target_resources: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    object.__setattr__(self, "target", as_target(self.target))
    for name in ("asm", "metadata", "stage_seconds", "target_resources"):
      object.__setattr__(self, name, _frozen(getattr(self, name)))

  @property
  def shared_bytes(self) -> int:
    return int(self.metadata.get("shared", 0))

  @property
  def num_warps(self) -> int:
    return int(self.metadata["num_warps"])

  @property
  def num_stages(self) -> int:
    return int(self.metadata["num_stages"])

  @property
  def ptx(self) -> str:
    self._need_nvidia("PTX")
    return self.asm["ptx"]

  def _need_nvidia(self, what: str) -> None:
    if self.target.backend != "cuda":
      raise ValueError(f"kernel {self.name} was compiled for {self.target.name}: it has no "
                       f"{what} (its stages: {', '.join(self.target.stages)})")

  @property
  def cubin_deferred(self) -> bool:
    """Whether the binary (an NVIDIA target's cubin, an AMD one's hsaco) is still to make."""
    return not self.asm.get(self.target.binary_stage)

  @property
  def cubin(self) -> bytes:
    self._need_nvidia("cubin")
    if self.cubin_deferred:
      raise ValueError(f"kernel {self.name}: the cubin was deferred (the GPU launch path "
                       "needs only PTX); compile.assemble_cubin(ck) returns one with it")
    return self.asm["cubin"]

  @property
  def spills(self) -> int | None:
    return None if self.spill_stores is None else self.spill_stores + (self.spill_loads or 0)

  def resources(self) -> dict[str, Any]:
    """Shared memory, registers, spills, stack, warps, stages, target (registers
    and spills are None while the cubin is deferred)."""
    return {"shared_bytes": self.shared_bytes, "registers": self.registers,
            "spill_stores": self.spill_stores, "spill_loads": self.spill_loads,
            "stack_bytes": self.stack_bytes, "num_warps": self.num_warps,
            "num_stages": self.num_stages, "target": target_text(self.target),
            **self.target_resources}

  # --- one layout on disk: compiled.json and a file per stage ---

  _FIELDS: ClassVar[tuple[str, ...]] = (
      "name", "key", "metadata", "stage_seconds", "compile_seconds", "registers",
      "spill_stores", "spill_loads", "stack_bytes", "ptxas_log", "cache", "worker_wait_seconds")
  # fields an entry saved before them lacks (read as their defaults)
  _LATER_FIELDS: ClassVar[tuple[str, ...]] = ("target_resources",)

  def save(self, directory: str, write: Writer = write_atomic) -> None:
    """Writes compiled.json and kernel.{ttir,ttgir,ll,ptx,cubin} into `directory`, each
    whole (`write`), compiled.json last: a reader that finds it finds the stages too."""
    os.makedirs(directory, exist_ok=True)
    for stage, text in self.asm.items():
      write(os.path.join(directory, STAGE_FILES[stage]), text)
    meta = {"schema": self.SCHEMA, "target": list(self.target), "stages": sorted(self.asm),
            **{k: plain(getattr(self, k)) for k in self._FIELDS}}
    if self.target_resources:
      meta["target_resources"] = plain(self.target_resources)
    _write_json(os.path.join(directory, "compiled.json"), meta, write)

  @classmethod
  def load(cls, directory: str, generated: GeneratedKernel | None = None) -> "CompiledKernel":
    """What save() wrote; SchemaMismatch for another layout, OSError if absent."""
    meta = _read_json(os.path.join(directory, "compiled.json"), cls.SCHEMA)
    asm = {}
    for stage in meta["stages"]:
      with open(os.path.join(directory, STAGE_FILES[stage]),
                "rb" if stage in BINARY_STAGES else "r") as f:
        asm[stage] = f.read()
    later = {k: meta[k] for k in cls._LATER_FIELDS if k in meta}
    return cls(target=tuple(meta["target"]), asm=asm, generated=generated,
               **{k: meta[k] for k in cls._FIELDS}, **later)

  def __repr__(self) -> str:
    return (f"CompiledKernel({self.name}, {target_text(self.target)}, "
            f"stages={sorted(self.asm)}, cache={self.cache})")


# --- launch: what a launch outside JAX needs -------------------------------------------

@dataclasses.dataclass(frozen=True)
class LaunchSpec:
  """A compiled kernel's launch, as the profiler's replay (in this process or a
  child, under ncu) performs it: cubin, grid, launch figures, parameters."""
  SCHEMA: ClassVar[str] = "pallas-prof/launch/1"

  name: str                              # the kernel's symbol in the cubin
  cubin: bytes
  launch_grid: tuple[int, int, int]
  num_warps: int
  warp_size: int
  shared: int
  num_ctas: int
  global_scratch_size: int
  global_scratch_align: int
  profile_scratch_size: int
  profile_scratch_align: int
  params: tuple                          # KernelParam, in the kernel's order
  aliases: tuple[tuple[int, int], ...]   # (input index, output index)
  zeroed_outputs: tuple[int, ...]        # output indices zeroed before each launch
  ptx_param_count: int | None            # .param entries of the PTX's .entry

  def __post_init__(self):
    object.__setattr__(self, "launch_grid", tuple(int(g) for g in self.launch_grid))
    object.__setattr__(self, "params", tuple(self.params))
    object.__setattr__(self, "aliases", tuple((int(i), int(o)) for i, o in self.aliases))
    object.__setattr__(self, "zeroed_outputs", tuple(sorted(int(i) for i in self.zeroed_outputs)))

  @classmethod
  def from_compiled(cls, ck: CompiledKernel, aliases=(), zeroed_outputs=()) -> "LaunchSpec":
    """ck's launch (its cubin must be assembled: compile.assemble_cubin).
    ValueError where the replay cannot launch it."""
    gk = ck.generated
    if gk is None:
      raise ValueError(f"kernel {ck.name}: no GeneratedKernel, so its parameters are unknown")
    md = ck.metadata
    zeroed = set(zeroed_outputs) | set(gk.zeroed_outputs(aliases))   # as the GPU path does
    target = md.get("target") or {}
    if md.get("launch_cooperative_grid") or md.get("launch_pdl"):
      raise ValueError(f"kernel {ck.name}: cooperative-grid / PDL launches are not supported "
                       "by the replay")
    name = str(md.get("name") or ck.name)
    return cls(
        name=name, cubin=ck.cubin, launch_grid=gk.launch_grid, num_warps=int(md["num_warps"]),
        warp_size=int(target.get("warp_size", md.get("warp_size", 32)) or 32),
        shared=int(md.get("shared", 0) or 0), num_ctas=int(md.get("num_ctas", 1) or 1),
        global_scratch_size=int(md.get("global_scratch_size", 0) or 0),
        global_scratch_align=int(md.get("global_scratch_align", 1) or 1),
        profile_scratch_size=int(md.get("profile_scratch_size", 0) or 0),
        profile_scratch_align=int(md.get("profile_scratch_align", 1) or 1),
        params=gk.params, aliases=aliases, zeroed_outputs=zeroed,
        ptx_param_count=ptx_param_count(ck.asm.get("ptx", ""), name))

  @property
  def inputs(self) -> list:
    return [p for p in self.params if p.role == "input"]

  @property
  def outputs(self) -> list:
    return [p for p in self.params if p.role == "output"]

  @property
  def programs(self) -> int:
    return math.prod(self.launch_grid)

  def save(self, directory: str, write: Writer = write_atomic) -> None:
    """Writes spec.json and kernel.cubin into `directory`, each whole (`write`)."""
    os.makedirs(directory, exist_ok=True)
    write(os.path.join(directory, "kernel.cubin"), self.cubin)
    meta = {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)
            if f.name != "cubin"}
    _write_json(os.path.join(directory, "spec.json"), {"schema": self.SCHEMA, **meta}, write)

  @classmethod
  def load(cls, directory: str) -> "LaunchSpec":
    meta = _read_json(os.path.join(directory, "spec.json"), cls.SCHEMA)
    meta.pop("schema")
    with open(os.path.join(directory, "kernel.cubin"), "rb") as f:
      cubin = f.read()
    meta["params"] = [from_fields(KernelParam, p) for p in meta["params"]]
    return cls(cubin=cubin, **meta)


def param_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
  """Bytes of an array of this dtype and shape as numpy holds it (int4: a byte
  per element); numpy and ml_dtypes, no JAX."""
  import numpy as np
  n = int(np.prod(shape, dtype=np.int64))
  try:
    itemsize = np.dtype(dtype).itemsize
  except TypeError:
    import ml_dtypes
    itemsize = np.dtype(getattr(ml_dtypes, dtype)).itemsize
  return n * itemsize


def ptx_param_count(ptx: str, name: str) -> int | None:
  """Number of .param entries of the kernel's .entry in the PTX."""
  import re
  m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
  if m is None:
    return None
  return len(re.findall(r"\.param\b", m.group(1)))
