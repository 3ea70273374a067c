"""The figures of a saved report that `report`, `show` and `diff` compute with, checked
before they are believed (issue 48, item 9).

serial.decode gives each field its type, but a float field takes NaN, infinity and
negative numbers, and `resources` (a compile's figures, CompiledKernel.resources()) is a
free dict. A NaN runtime compares as neither faster nor slower, so a damaged run would pass
`diff --fail-on-regression`; a negative one reads as a large speed-up; a string where a
count belongs ends the comparison in a traceback. None of these is what a run writes: the
first such figure is named (`damage`), with the kernel it belongs to, and the report is
refused as damaged.
"""
from __future__ import annotations

import math
from typing import Any, Iterator

# far above any figure a run measures (counts, bytes, programs), and small enough that a
# float holds it exactly: what the comparisons divide by stays finite
MAX_COUNT = 1 << 53
# seconds and milliseconds: a figure beyond these is no timing a run records
MAX_SECONDS = 1e7
MAX_MS = MAX_SECONDS * 1e3

# the timings a runtime's headline may be (profiler/schema.py's RuntimeStats.mode)
RUNTIME_MODES = ("cold", "sustained")

# resources' keys a view reads as counts; any other numeric value there is checked as a
# figure too, a text (the target) is left as it is
RESOURCE_COUNTS = ("registers", "shared_bytes", "spill_stores", "spill_loads", "stack_bytes",
                   "num_warps", "num_stages")


def _is_number(value) -> bool:
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value, where: str) -> str | None:
  if value is None:
    return None
  if not isinstance(value, int) or isinstance(value, bool):
    return f"{where} is {value!r}, where a whole number belongs"
  if not 0 <= value <= MAX_COUNT:
    return f"{where} is {value}, outside 0 .. {MAX_COUNT}"
  return None


def _amount(value, where: str, most: float) -> str | None:
  if value is None:
    return None
  if not _is_number(value):
    return f"{where} is {value!r}, where a number belongs"
  if not math.isfinite(value):
    return f"{where} is {value}, not a finite number"
  if not 0 <= value <= most:
    return f"{where} is {value}, outside 0 .. {most:g}"
  return None


def _resources(resources, where: str) -> Iterator[str | None]:
  if resources is None:
    return
  for key, value in resources.items():
    if key in RESOURCE_COUNTS:
      yield _count(value, f"{where}.{key}")
    elif _is_number(value):
      yield _amount(value, f"{where}.{key}", MAX_COUNT)


def _kernel(k, where: str) -> Iterator[str | None]:
  for name in ("num_warps", "num_stages", "equations", "cpu_launches"):
    yield _count(getattr(k, name), f"{where}.{name}")
  for name in ("grid", "launch_grid"):
    for i, n in enumerate(getattr(k, name)):
      yield _count(n, f"{where}.{name}[{i}]")
  for name in ("lowering_ms", "lowering_gc_ms"):
    yield _amount(getattr(k, name), f"{where}.{name}", MAX_MS)
  c = k.compile
  if c is not None:
    yield _amount(c.total_ms, f"{where}.compile.total_ms", MAX_MS)
    yield _amount(c.worker_wait_ms, f"{where}.compile.worker_wait_ms", MAX_MS)
    for stage, ms in c.stages_ms.items():
      yield _amount(ms, f"{where}.compile.stages_ms.{stage}", MAX_MS)
  yield from _resources(k.resources, f"{where}.resources")


def _timing(t, where: str) -> Iterator[str | None]:
  if t is None:
    return
  for name in ("median_s", "p10_s", "p90_s", "min_s", "mean_s", "timed_window_s",
               "paced_gap_s"):
    yield _amount(getattr(t, name), f"{where}.{name}", MAX_SECONDS)
  for name in ("launches", "warmup_launches"):
    yield _count(getattr(t, name), f"{where}.{name}")


def _profile(kp, where: str) -> Iterator[str | None]:
  rt = kp.runtime
  if rt is not None:
    # the headline is the timing `mode` names: another mode, or a missing timing, read as
    # "not timed" (diff's gate passed it) and ended report --html in a traceback
    if rt.mode not in RUNTIME_MODES:
      yield f"{where}.runtime.mode is {rt.mode!r}, not one of {', '.join(RUNTIME_MODES)}"
    elif getattr(rt, rt.mode) is None or getattr(rt, rt.mode).median_s is None:
      yield f"{where}.runtime.mode names {rt.mode!r}, and runtime.{rt.mode} holds no timing"
    yield _timing(rt.cold, f"{where}.runtime.cold")
    yield _timing(rt.sustained, f"{where}.runtime.sustained")
  s = kp.static
  if s is not None:
    yield _count(s.ptx_instructions, f"{where}.static.ptx_instructions")
    yield _count(s.sass_instructions, f"{where}.static.sass_instructions")
    yield _resources(s.resources, f"{where}.static.resources")
  w = kp.work
  if w is not None:
    for name in ("bytes", "block_bytes", "flops", "dot_flops", "elementwise_flops",
                 "transcendentals", "programs"):
      yield _count(getattr(w, name), f"{where}.work.{name}")


def _flat(found) -> Iterator[str]:
  for item in found:
    if isinstance(item, str):
      yield item
    elif item is not None:
      yield from _flat(item)


def damage(report: Any) -> str | None:
  """The first figure of `report` (a RunReport) no run writes, named with its field and
  kernel: "kernels[0] (softmax_kernel#1f22e0).resources.registers is 'many', ..."; None
  where every one is a finite, non-negative number of its kind and bounds."""
  found = [_kernel(k, f"kernels[{i}] ({k.label})") for i, k in enumerate(report.kernels)]
  for p, profile in enumerate(report.profiles):
    found += [_profile(kp, f"profiles[{p}].kernels[{i}] ({kp.label})")
              for i, kp in enumerate(profile.kernels)]
  return next(_flat(found), None)
