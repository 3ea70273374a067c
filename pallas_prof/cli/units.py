"""Figures as every view of a run writes them (terminal tables, diff, report.html), so that
the same number reads the same everywhere."""
from __future__ import annotations


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
