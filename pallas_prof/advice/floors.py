"""The least work a program must keep for splitting it into more programs to pay.

A program costs a time of its own whatever it does: its CTA's launch, the latency of its
first loads, the drain of its last stores. A split that leaves each program less work
than that time's worth adds programs that spend most of their life starting: what the
advice proposes must not be what its own evidence says is pointless. So every kind of work
has a floor, the amount of it an SM does in about that time, and a program is worth its
start while any kind of its work is at or above its floor. The floors are one time in
several units, all sized by the memory floor (SMALL_PROGRAM_BYTES at an SM's share of the
copy bandwidth), by each unit's rate on an SM against that share.

Whatever its work, a program also keeps at least one element of its block per thread:
below that its threads idle and the split shortens nothing.

The floors also give the estimate of a split (estimate.spread): a program at its floor is
taken to spend as long starting as working, so its start stays when its work is split.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

# A program that moves less than this spends a large part of its life starting,
# finishing and waiting for its first loads (its CTA's launch, the pipeline's fill)
SMALL_PROGRAM_BYTES = 16 * 1024
# an H100's or H200's tensor cores do a few hundred dense bf16 FLOPs in the time its memory
# moves a byte (the datasheets' rates): one 128x128 output tile over a K of 128
DOT_FLOPS = 2 * 128 ** 3
# libdevice's fast paths take a few dozen instructions an evaluation, on an SM's 128 FP32
# lanes (the slow paths of large arguments take more, which only helps the program)
TRANSCENDENTALS = 4096
# an SM's 128 FP32 lanes, one operation each a cycle, for about the cycles the memory
# floor's bytes take at an SM's share of the bandwidth (reductions are counted here)
ARITHMETIC_FLOPS = 128 * 1024


@dataclasses.dataclass(frozen=True)
class Floor:
  kind: str                                   # what the program does: "memory", "dot", ...
  least: float                                # the least of it a program keeps
  per_program: Callable[[object], float | None]   # KernelFacts -> the amount a program does
  words: Callable[[float], str]               # an amount, as the evidence says it


def _per_program(field: str):
  def amount(f) -> float | None:
    value = getattr(f.work, field, None) if f.work is not None else None
    return value / f.programs if value and f.programs else None
  return amount


def _bytes(n: float) -> str:
  for unit in ("B", "KiB", "MiB", "GiB"):
    if abs(n) < 1024 or unit == "GiB":
      return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024
  return f"{n}"


FLOORS = (
    Floor("memory", SMALL_PROGRAM_BYTES, lambda f: f.bytes_per_program,
          lambda n: f"moves {_bytes(n)}"),
    Floor("dot", DOT_FLOPS, _per_program("dot_flops"), lambda n: f"does {n:,.0f} dot FLOPs"),
    Floor("transcendental", TRANSCENDENTALS, _per_program("transcendentals"),
          lambda n: f"evaluates {n:,.0f} transcendental functions"),
    Floor("arithmetic", ARITHMETIC_FLOPS, _per_program("elementwise_flops"),
          lambda n: f"does {n:,.0f} elementwise and reduction FLOPs"),
)


@dataclasses.dataclass(frozen=True)
class Work:
  """A program's work against the floors: each kind it does, its amount and floor."""
  amounts: tuple[tuple[Floor, float], ...]    # the kinds of work it does (amount > 0)
  elements: int | None                        # of its largest block
  threads: int

  @property
  def in_floors(self) -> float | None:
    """The program's work in floors: the largest of its kinds' amounts over their floors
    (the kind that keeps it busiest); None where the work model says nothing."""
    return max((amount / fl.least for fl, amount in self.amounts), default=None)

  @property
  def by_floors(self) -> int | None:
    """The largest power-of-two split that leaves some kind of work at its floor or above."""
    return _pow2_at_most(self.in_floors) if self.amounts else None

  @property
  def by_threads(self) -> int | None:
    """The largest power-of-two split that leaves a block element for every thread."""
    return _pow2_at_most(self.elements / max(self.threads, 1)) if self.elements else None

  def cap(self, factor: int) -> int:
    """`factor`, or less where a floor or the threads stop the split first."""
    return min([factor] + [c for c in (self.by_floors, self.by_threads) if c is not None])

  @property
  def said(self) -> tuple[tuple[Floor, float], ...]:
    """The kinds the evidence names: arithmetic, which nearly every kernel does, only where
    it keeps the program busiest."""
    busiest = max(self.amounts, key=lambda a: a[1] / a[0].least, default=None)
    return tuple(a for a in self.amounts if a[0].kind != "arithmetic" or a is busiest)

  def doing(self) -> str:
    """'moves 2.0 KiB and evaluates 256 transcendental functions'"""
    return " and ".join(fl.words(amount) for fl, amount in self.said)

  def least(self) -> str:
    """'16.0 KiB or 4,096 transcendental functions': what keeps a program worth its start."""
    return " or ".join(fl.words(fl.least).split(" ", 1)[1] for fl, _ in self.said)


def _pow2_at_most(x: float) -> int:
  return 1 << max(0, int(x).bit_length() - 1) if x >= 1 else 1


def program_work(f) -> Work:
  amounts = []
  for fl in FLOORS:
    amount = fl.per_program(f) if f.work is not None else None
    if amount:
      amounts.append((fl, float(amount)))
  e = f.largest_block()
  elements = math.prod(e.block_shape) if e is not None else None
  return Work(tuple(amounts), elements, f.threads)
