"""The notes of a workaround plan's lowering: what the rules did with it.

The plan itself (WorkaroundPlan) is one of LoweringOptions' fields, so it lives with
them (backend/options.py). The rules write down what they did (listeners.ScanWorkarounds'
notes): those notes go into the generated source's header, GeneratedKernel.workarounds,
report.json and the compile span. A form that does not fit an equation leaves it plain.
"""
from __future__ import annotations

from ...options import WorkaroundPlan  # noqa: F401


def merged_notes(noted) -> tuple[str, ...]:
  """The rules' (equation index, what changed) notes, one per change: the equations of
  an unrolled loop, the same line each iteration, share theirs ("[12, 45] cumsum at ...")."""
  indices: dict[str, list[int]] = {}
  for index, text in noted:
    found = indices.setdefault(text, [])
    if index not in found:        # (a replayed jaxpr, a while's test, lowers it once more)
      found.append(index)
  return tuple(f"[{', '.join(map(str, found))}] {text}" for text, found in indices.items())


def header_lines(notes, because: str) -> list[str]:
  """The generated source's header lines for the workarounds a kernel was lowered with."""
  if not notes:
    return []
  lines = [f"Triton workaround: {note}" for note in notes]
  if because:
    lines.append(f"  (the plain lowering fails: {because})")
  return lines
