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
import functools
import hashlib
import io
import json
import os
import tokenize
import types
from typing import Any, Callable, ClassVar, Mapping, Union

from .. import serial
from ..run_layout import COMPILED, KERNEL, SOURCE, STAGE_FILES
from ..safe_files import write_atomic
from ..serial import Saved, decode
from .check_sites import CheckSite
from .equation_text import (SAVED_KEYS, Described, Description, saved_description,
                            without_line_comment)
from .options import (LoweringOptions, ProbeLayout, read_saved_options,
                      option_property as _option)
# DEFAULT_TARGET and target_text lived here before targets.py: still importable from here
from .targets import DEFAULT_TARGET, Target, as_target, saved_target, target_text  # noqa: F401
from .tma_note import TmaNote

# --- lowering: what the kernel takes ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class KernelParam(Saved):
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
class DotFacts(Saved):
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
class EquationRecord(Described, Saved):
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
  description: Description = serial.field(
      flat=SAVED_KEYS, write=saved_description, read=Description.from_saved,
      default_factory=Description, repr=False, compare=False)
  lines: tuple[int, ...] = ()   # the generated source's lines it emitted (1-based)
  # what the rule knows
  bytes_read: int = 0
  bytes_written: int = 0
  dot_flops: int = 0
  elementwise_flops: int = 0    # float arithmetic and reductions, transcendentals apart
  transcendentals: int = 0
  trips: Trips = None
  unrolled: bool = False
  # a counted loop emitted as a loop that CompilerParams(loop_stages) pipelines, the option
  # set or not: it loads, and holds no loop, dot, branch or memory write (files written
  # before it lack it: False, which offers nothing)
  stageable: bool = serial.field(default=False, omit_empty=True)
  dot: DotFacts | None = None
  # a load or store: the operand it moves (x_ref) and the bytes of its longest run of
  # consecutive addresses (a block row; None where not known: a gather)
  operand: str | None = None
  contiguous_bytes: int | None = None
  # inside a loop: computes the same value every iteration (reads only what the loop
  # does not change), so it could run once before the loop
  invariant: bool = False

  def __repr__(self) -> str:
    return f"EquationRecord({self.index}, {self.primitive}, {self.location})"


# --- lowering: the kernel ------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GeneratedKernel(Saved):
  """A lowered kernel: Triton source in a real file plus everything about it."""
  name: str
  source: str = serial.field(saved=False)       # source.py, beside kernel.json
  path: str = serial.field(key="source_path")
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
  options: LoweringOptions = serial.field(flat=LoweringOptions.SAVED, compare=False, repr=False,
                                          write=lambda gk: gk.options.saved(),
                                          read=read_saved_options)
  atomic_params: tuple[str, ...] = ()
  # of lowering_seconds, Python's garbage collections meanwhile (CollectionClock)
  gc_seconds: float = 0.0
  # bounds-checked mode: each checked access (check_sites.CheckSite); the kernel
  # then has one more parameter, the flag buffer (role "check")
  bounds_sites: tuple[CheckSite, ...] = ()
  # the profiler's probed variant (probes.py): what its probe buffer holds; the
  # kernel then has one more parameter, that buffer (role "probes"); not saved
  probe_layout: ProbeLayout | None = serial.field(saved=False, default=None)
  tma_notes: tuple[TmaNote, ...] = ()    # TMA asked for: accesses that could not use it
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
  persistent = _option("persistent")        # > 0: programs launched, looping over the grid
  loop_stages = _option("loop_stages")      # > 0: loops' loads pipelined (tl.range)
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

  @functools.cached_property
  def code_key(self) -> str:
    """sha256 of the source's code without its comments, with what its header comments
    say besides places (the grid, the operands' shapes and dtypes, the settings): the same
    for a kernel whose only change is where its lines are (an edit above it in the user's
    file moves every `@ file:line`), so a tuning file's entry still applies
    (tune/tuned_file.py), and another for the same code at another grid or shape."""
    said = (self.grid, self.launch_grid, self.options.settings.fields(),
            [(p.name, p.dtype, tuple(p.shape), p.role) for p in self.params])
    return code_key(self.source, repr(said))

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
  # written beside the fields: the run's label and aliases (save's `extra`), and the
  # compile of a run saved before compiled.json (cli/run_directory.py reads it)
  OTHER_KEYS: ClassVar[tuple[str, ...]] = ("schema", "label", "input_output_aliases",
                                           "compiled")

  def save(self, directory: str, *, write: "Writer" = write_atomic, **extra) -> None:
    """Writes source.py and kernel.json (with `extra`, e.g. the run's label and aliases),
    the bounds-checked mode's sites with it (an ejected kernel names what it checks).
    `write(path, data)` writes each file (see Writer). A run directory reads them back,
    decoded by type (cli/saved_runs/kernel.py)."""
    os.makedirs(directory, exist_ok=True)
    write(os.path.join(directory, SOURCE), self.source)
    meta = {"schema": self.SCHEMA, **extra, **serial.dump(self)}
    write(os.path.join(directory, KERNEL), json.dumps(meta, indent=1, default=str))

  @classmethod
  def from_saved(cls, meta, source: str, where: str) -> "GeneratedKernel":
    """kernel.json's values (`meta`, from the file `where`) and source.py's text: Misfit
    naming the field for a value its writer did not write, SchemaMismatch for a file of
    another layout."""
    schema = meta.get("schema", cls.SCHEMA) if isinstance(meta, dict) else cls.SCHEMA
    if schema != cls.SCHEMA:
      raise SchemaMismatch(f"{where} has schema {schema!r}; this pallas-prof reads "
                           f"{cls.SCHEMA!r}")
    return serial.load(cls, meta, where, source=source)


# --- compile: the compiled kernel ------------------------------------------------------

STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
# each stage's file in a saved CompiledKernel (a run directory's kernels/<label>/ too):
# run_layout.STAGE_FILES
BINARY_STAGES = ("cubin", "hsaco")


class SchemaMismatch(ValueError):
  """A saved artifact of another layout (older or newer pallas-prof)."""


def code_key(source: str, context: str = "") -> str:
  """sha256 of Python source's tokens without comments and blank lines, and of `context`:
  two sources that differ only there compile alike (Triton's line info aside)."""
  digest = hashlib.sha256(context.encode())
  try:
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
      if tok.type not in (tokenize.COMMENT, tokenize.NL):
        digest.update(f"{tok.type}:{tok.string}\n".encode())
  except (tokenize.TokenError, SyntaxError):
    return hashlib.sha256((context + source).encode()).hexdigest()   # not Python: the whole text
  return digest.hexdigest()


def _frozen(mapping: Mapping | None) -> Mapping:
  return types.MappingProxyType(dict(mapping or {}))


def read_json(path: str, schema: str) -> dict:
  with open(path) as f:
    meta = json.load(f)
  if meta.get("schema") != schema:
    raise SchemaMismatch(f"{path} has schema {meta.get('schema')!r}; this pallas-prof reads "
                         f"{schema!r}")
  return meta


# writes one file whole: safe_files.write_atomic (temp, fsync, rename), raising on failure;
# a run folder's writer keeps each failure as a missing file and goes on (cli/run_writes.py)
Writer = Callable[[str, Union[bytes, str]], Any]


def write_json(path: str, meta: dict, write: Writer = write_atomic) -> None:
  write(path, json.dumps(meta, indent=1))


def saved_stages(meta: dict, where: str) -> tuple[str, ...]:
  """The stages compiled.json (the file `where`) says it saved, each one of STAGE_FILES'."""
  saved = decode(tuple[str, ...], meta.get("stages"), f"{where}.stages", strict=True)
  unknown = [s for s in saved if s not in STAGE_FILES]
  if unknown:
    raise ValueError(f"{where}.stages names {unknown[0]!r}, not a compile stage "
                     f"({', '.join(STAGE_FILES)})")
  return saved


@dataclasses.dataclass(frozen=True)
class CompiledKernel(Saved):
  """A kernel compiled for one target.

  The GPU launch path stops at PTX (jaxlib assembles its own cubin): `asm`
  then has no "cubin" and registers/spills are None until
  compile.assemble_cubin returns the artifact that has them.
  """
  SCHEMA: ClassVar[str] = "pallas-prof/compiled/1"
  OTHER_KEYS: ClassVar[tuple[str, ...]] = ("schema", "stages")     # save's, beside the fields

  name: str
  key: str
  # ("cuda", 90), ("hip", "gfx942"); saved as a list
  target: Target = serial.field(write=list, read=saved_target)
  # stage -> text (cubin, hsaco: bytes), a file each (STAGE_FILES)
  asm: Mapping[str, str | bytes] = serial.field(saved=False)
  metadata: Mapping[str, Any]      # Triton's metadata (shared, num_warps, scratch sizes, ...)
  stage_seconds: Mapping[str, float]
  compile_seconds: float
  registers: int | None
  spill_stores: int | None
  spill_loads: int | None
  stack_bytes: int | None
  ptxas_log: str
  # the GeneratedKernel it was compiled from (not saved: its loader gives it)
  generated: GeneratedKernel | None = serial.field(saved=False, default=None)
  cache: str = "miss"              # "miss", "memory" or "disk"
  # seconds this compile waited for the compile worker before Triton started on it:
  # queued behind other compiles (the background warm-up's) plus the worker's
  # start-up (Python, `import triton`) when it was not ready yet
  worker_wait_seconds: float = 0.0
  # what an AMD target's assembly reports beside `registers` (its VGPRs): SGPRs, AGPRs,
  # registers spilled, LDS, scratch, LLVM's occupancy (compiling/amd_resources.py)
  target_resources: Mapping[str, int] = serial.field(default_factory=dict, omit_empty=True)

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

  def save(self, directory: str, write: Writer = write_atomic) -> None:
    """Writes compiled.json and kernel.{ttir,ttgir,ll,ptx,cubin} into `directory`, each
    whole (`write`), compiled.json last: a reader that finds it finds the stages too."""
    os.makedirs(directory, exist_ok=True)
    for stage, text in self.asm.items():
      write(os.path.join(directory, STAGE_FILES[stage]), text)
    meta = {"schema": self.SCHEMA, "stages": sorted(self.asm), **serial.dump(self)}
    write_json(os.path.join(directory, COMPILED), meta, write)

  @classmethod
  def load(cls, directory: str, generated: GeneratedKernel | None = None) -> "CompiledKernel":
    """What save() wrote; SchemaMismatch for another layout, OSError if absent, Misfit
    (a ValueError) naming the field for a value save() does not write."""
    where = os.path.join(directory, COMPILED)
    meta = read_json(where, cls.SCHEMA)
    asm = {}
    for stage in saved_stages(meta, where):
      with open(os.path.join(directory, STAGE_FILES[stage]),
                "rb" if stage in BINARY_STAGES else "r") as f:
        asm[stage] = f.read()
    return cls.from_saved(meta, asm, generated, where)

  @classmethod
  def from_saved(cls, meta: dict, asm: dict, generated: Any, where: str) -> "CompiledKernel":
    """compiled.json's values (`meta`, from the file `where`; or a run's kernel.json's
    "compiled", saved before compiled.json and without a name) and the stages' texts."""
    if "schema" in meta and meta["schema"] != cls.SCHEMA:
      raise SchemaMismatch(f"{where} has schema {meta['schema']!r}; this pallas-prof reads "
                           f"{cls.SCHEMA!r}")
    given = {"asm": asm, "generated": generated}
    if "name" not in meta and generated is not None:
      given["name"] = generated.name
    return serial.load(cls, meta, where, **given)

  def __repr__(self) -> str:
    return (f"CompiledKernel({self.name}, {target_text(self.target)}, "
            f"stages={sorted(self.asm)}, cache={self.cache})")


def param_nbytes(dtype: str, shape: tuple[int, ...]) -> int:
  """Bytes of an array of this dtype and shape as numpy holds it (int4: a byte
  per element); numpy and ml_dtypes, no JAX."""
  # lazy: keeps numpy out of this module's import (start-up time)
  import numpy as np
  n = int(np.prod(shape, dtype=np.int64))
  try:
    itemsize = np.dtype(dtype).itemsize
  except TypeError:
    # lazy: keeps ml_dtypes out of this module's import (start-up time)
    import ml_dtypes
    itemsize = np.dtype(getattr(ml_dtypes, dtype)).itemsize
  return n * itemsize
