"""Every kernel this process lowered, with the shapes it ran on.

The profiler and the CLI find kernels here: the generated source, the
compiled artifacts (compiled lazily on CPU), the avals of each call site and
how many times the CPU path ran it.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from .artifacts import GeneratedKernel
from .equation_text import Aval, aval_texts


@dataclasses.dataclass
class KernelRecord:
  name: str
  generated: GeneratedKernel
  platform: str                       # "cpu" (interpreter) or "cuda"
  in_avals: tuple[Aval, ...]          # the call's operands and results, as JAX gave them
  out_avals: tuple[Aval, ...]
  input_output_aliases: tuple[tuple[int, int], ...]
  compiled: Any = None                # CompiledKernel once compiled
  cost_estimate: Any = None
  lowered_at: float = dataclasses.field(default_factory=time.time)
  lowerings: int = 1
  launches: int = 0                   # counted on the CPU path; GPU counts come from CUPTI
  device_ids: tuple[int, ...] = ()
  # coverage.UncoveredOutput: outputs with elements no program's block writes
  uncovered_outputs: tuple = ()
  # coverage.RevisitedOutput: output blocks several programs pick and the kernel reads
  revisited_outputs: tuple = ()
  # lowers the same pallas_call again with other options (num_warps, num_stages,
  # probes: the profiler's probed variant); None for records made elsewhere
  relower: Any = dataclasses.field(default=None, repr=False, compare=False)

  @property
  def key(self) -> tuple:
    return (self.generated.key, self.platform, self.in_avals, self.out_avals)

  @property
  def label(self) -> str:
    """A short unique name: kernel name plus a hash prefix."""
    return f"{self.name}#{self.generated.key[:6]}"

  def __repr__(self) -> str:
    # short, as pallas_prof.kernels() shows these in a REPL (the dataclass's own repr
    # printed the generated source, the jaxpr and every equation: kilobytes per kernel)
    grid = "x".join(str(g) for g in self.generated.grid) or "1"
    launches = f", {self.launches} launch{'es' if self.launches != 1 else ''}" \
        if self.platform == "cpu" else ""
    return (f"<KernelRecord {self.label}: grid {grid}, {aval_texts(self.in_avals) or 'no inputs'}"
            f" -> {aval_texts(self.out_avals)}, {self.platform}{launches}>")


_lock = threading.Lock()
_records: dict[tuple, KernelRecord] = {}
# pallas_calls with interpret=True, which JAX's own interpreter runs and pallas-prof never
# sees: (kernel name, the user's file:line), said by `pallas-prof run` (a run that reported
# no kernel without a word left the user looking for what went wrong)
_interpreted_by_jax: dict[tuple[str, str], None] = {}


def record(rec: KernelRecord) -> KernelRecord:
  with _lock:
    existing = _records.get(rec.key)
    if existing is not None:
      existing.lowerings += 1
      if rec.compiled is not None and existing.compiled is None:
        existing.compiled = rec.compiled
      return existing
    _records[rec.key] = rec
    return rec


def kernels() -> list[KernelRecord]:
  with _lock:
    return list(_records.values())


def find(name: str) -> list[KernelRecord]:
  """Records whose name or label matches `name` (exact label, name, or prefix)."""
  recs = kernels()
  exact = [r for r in recs if r.label == name]
  if exact:
    return exact
  by_name = [r for r in recs if r.name == name]
  if by_name:
    return by_name
  return [r for r in recs if r.name.startswith(name) or r.generated.key.startswith(name)]


def forget(name: str) -> None:
  """Drops the records of kernels named `name` (pallas-prof's own helper kernels)."""
  with _lock:
    for key in [k for k, r in _records.items() if r.name == name]:
      del _records[key]


def clear() -> None:
  with _lock:
    _records.clear()
    _interpreted_by_jax.clear()


def note_interpreted_by_jax(name: str, location: str) -> None:
  with _lock:
    _interpreted_by_jax[(name, location)] = None


def interpreted_by_jax() -> list[tuple[str, str]]:
  """(kernel name, file:line) of the pallas_calls JAX's interpreter ran (interpret=True)."""
  with _lock:
    return list(_interpreted_by_jax)


def discard(rec: KernelRecord) -> None:
  """Drops one record: a variant lowered to be tried (the advice's), which the program
  itself never ran."""
  with _lock:
    if _records.get(rec.key) is rec:
      del _records[rec.key]
