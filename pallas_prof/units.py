"""Figures as every view of a run writes them (terminal tables, diff, report.html), so that
the same number reads the same everywhere."""
from __future__ import annotations


def spills(resources) -> int | None:
  """Bytes of spill stores and loads in a kernel's resources (CompiledKernel.resources(), as a
  run's kernel or a profile's static figures keep them); None where ptxas did not say."""
  res = resources or {}
  if res.get("spill_stores") is None:
    return None
  return res["spill_stores"] + (res.get("spill_loads") or 0)


def instruction_mix(counts, total) -> str:
  """An equation's instructions by kind, heaviest first ("global load 4, special function 2,
  arithmetic and other 12"): the kinds of the profiler's correlation (counts), the rest of its
  `total` (plain arithmetic, moves) as "arithmetic and other N", so no row's cell is blank."""
  named = sorted(((k.replace("_", " "), n) for k, n in (counts or {}).items()
                  if n and k != "other"), key=lambda kv: -kv[1])
  other = (total or 0) - sum(n for _, n in named)
  return ", ".join([f"{name} {n}" for name, n in named]
                   + ([f"arithmetic and other {other}"] if other > 0 else []))


def size(n) -> str:
  """Bytes: "16 B", "24 KiB", "1.5 MiB" (whole numbers without a decimal)."""
  if n is None:
    return "-"
  value = float(n)
  for unit in ("B", "KiB", "MiB", "GiB"):
    if abs(value) < 1024 or unit == "GiB":
      break
    value /= 1024
  if unit == "B" or value == int(value):
    return f"{value:.0f} {unit}"
  return f"{value:.1f} {unit}"


def rate(value, unit: str) -> str:
  """Per second: "3.4 TB/s", "789.0 TFLOP/s", "12.5 kB/s"; "-" for none or zero (nothing
  was timed or measured)."""
  if not value:
    return "-"
  for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
    if value >= scale:
      return f"{value / scale:.1f} {prefix}{unit}"
  return f"{value:.0f} {unit}"
