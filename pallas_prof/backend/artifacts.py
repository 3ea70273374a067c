"""The artifacts data flows through, one stage's output at a time, frozen.

    compile:   CompiledKernel   (every stage's text, Triton's metadata, ptxas's
                                 resource figures, stage times)

Each stage makes its artifact once and never changes it; work on an artifact
(compiling, assembling a cubin) is a function that returns a new one. Each
artifact has one save(dir)/load(dir) with a schema version, shared by the
disk cache and the run directory.
"""
from __future__ import annotations

import dataclasses
import json
import os
import types
from typing import Any, ClassVar, Mapping

# --- compile: the compiled kernel ------------------------------------------------------

STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
# each stage's file in a saved CompiledKernel (a run directory's kernels/<label>/ too)
STAGE_FILES = {"ttir": "kernel.ttir", "ttgir": "kernel.ttgir", "llir": "kernel.ll",
               "ptx": "kernel.ptx", "cubin": "kernel.cubin"}


class SchemaMismatch(ValueError):
  """A saved artifact of another layout (older or newer pallas-prof)."""


def _frozen(mapping: Mapping | None) -> Mapping:
  return types.MappingProxyType(dict(mapping or {}))


def _plain(value: Any) -> Any:
  """A frozen mapping (nested ones too) as plain dicts, for JSON."""
  if isinstance(value, Mapping):
    return {k: _plain(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_plain(v) for v in value]
  return value


def _read_json(path: str, schema: str) -> dict:
  with open(path) as f:
    meta = json.load(f)
  if meta.get("schema") != schema:
    raise SchemaMismatch(f"{path} has schema {meta.get('schema')!r}; this pallas-prof reads "
                         f"{schema!r}")
  return meta


def _write_json(path: str, meta: dict) -> None:
  with open(path, "w") as f:
    json.dump(meta, f, indent=1)


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
  target: tuple[str, int]
  asm: Mapping[str, str | bytes]   # stage -> text (cubin: bytes)
  metadata: Mapping[str, Any]      # Triton's metadata (shared, num_warps, scratch sizes, ...)
  stage_seconds: Mapping[str, float]
  compile_seconds: float
  registers: int | None
  spill_stores: int | None
  spill_loads: int | None
  stack_bytes: int | None
  ptxas_log: str
  generated: Any = None            # the GeneratedKernel it was compiled from
  cache: str = "miss"              # "miss", "memory" or "disk"
  # seconds this compile waited for the compile worker before Triton started on it:
  # queued behind other compiles (the background warm-up's) plus the worker's
  # start-up (Python, `import triton`) when it was not ready yet
  worker_wait_seconds: float = 0.0

  def __post_init__(self):
    object.__setattr__(self, "target", (str(self.target[0]), int(self.target[1])))
    for name in ("asm", "metadata", "stage_seconds"):
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
    return self.asm["ptx"]

  @property
  def cubin_deferred(self) -> bool:
    return not self.asm.get("cubin")

  @property
  def cubin(self) -> bytes:
    if self.cubin_deferred:
      raise ValueError(f"kernel {self.name}: the cubin was deferred (the GPU launch path "
                       "needs only PTX); compile.assemble_cubin(ck) returns one with it")
    return self.asm["cubin"]

  @property
  def spills(self) -> int | None:
    if self.spill_stores is None:
      return None
    return (self.spill_stores or 0) + (self.spill_loads or 0)

  def resources(self) -> dict[str, Any]:
    """Shared memory, registers, spills, stack, warps, stages, target (registers
    and spills are None while the cubin is deferred)."""
    return {"shared_bytes": self.shared_bytes, "registers": self.registers,
            "spill_stores": self.spill_stores, "spill_loads": self.spill_loads,
            "stack_bytes": self.stack_bytes, "num_warps": self.num_warps,
            "num_stages": self.num_stages, "target": f"{self.target[0]}:{self.target[1]}"}

  # --- one layout on disk: compiled.json and a file per stage ---

  _FIELDS: ClassVar[tuple[str, ...]] = (
      "name", "key", "metadata", "stage_seconds", "compile_seconds", "registers",
      "spill_stores", "spill_loads", "stack_bytes", "ptxas_log", "cache", "worker_wait_seconds")

  def save(self, directory: str) -> None:
    """Writes compiled.json and kernel.{ttir,ttgir,ll,ptx,cubin} into `directory`."""
    os.makedirs(directory, exist_ok=True)
    for stage, text in self.asm.items():
      with open(os.path.join(directory, STAGE_FILES[stage]),
                "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)
    meta = {"schema": self.SCHEMA, "target": list(self.target), "stages": sorted(self.asm),
            **{k: _plain(getattr(self, k)) for k in self._FIELDS}}
    _write_json(os.path.join(directory, "compiled.json"), meta)

  @classmethod
  def load(cls, directory: str, generated: Any = None) -> "CompiledKernel":
    """What save() wrote; SchemaMismatch for another layout, OSError if absent."""
    meta = _read_json(os.path.join(directory, "compiled.json"), cls.SCHEMA)
    asm = {}
    for stage in meta["stages"]:
      with open(os.path.join(directory, STAGE_FILES[stage]),
                "rb" if stage == "cubin" else "r") as f:
        asm[stage] = f.read()
    return cls(target=tuple(meta["target"]), asm=asm, generated=generated,
               **{k: meta[k] for k in cls._FIELDS})

  def __repr__(self) -> str:
    return (f"CompiledKernel({self.name}, {self.target[0]}:{self.target[1]}, "
            f"stages={sorted(self.asm)}, cache={self.cache})")
