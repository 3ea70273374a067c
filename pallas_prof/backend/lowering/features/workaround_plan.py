"""A plan of lowerings that keep Triton off a failing path: what workarounds.py
asks lower_kernel for after a compile failed with a fault of Triton's.

The plan names equations (by index) and the form each is lowered in instead
of its plain one (for a scan: scan_forms.py), plus notes of changes
made outside the lowering (another num_warps). The rules write down what
they did (listeners.ScanWorkarounds' notes): those notes go into the
generated source's header, GeneratedKernel.workarounds, report.json and the
compile span. A form that does not fit an equation leaves it plain.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class WorkaroundPlan:
  scan_forms: tuple[tuple[int, str], ...] = ()   # (equation index, form), scan_forms.py
  num_warps: int | None = None                   # lowered with these instead of the kernel's
  notes: tuple[str, ...] = ()                    # changes made outside the rules (num_warps)
  because: str = ""                              # the failure it avoids, in one line

  def form_of(self, index: int) -> str | None:
    for i, form in self.scan_forms:
      if i == index:
        return form
    return None

  def only(self, indices) -> "WorkaroundPlan":
    """The plan for these equations only."""
    keep = set(indices)
    return dataclasses.replace(self, scan_forms=tuple(p for p in self.scan_forms
                                                      if p[0] in keep))

  def to_dict(self) -> dict:
    return {"scan_forms": [list(p) for p in self.scan_forms], "num_warps": self.num_warps,
            "notes": list(self.notes), "because": self.because}

  @classmethod
  def from_dict(cls, d: dict) -> "WorkaroundPlan":
    return cls(scan_forms=tuple((int(i), str(f)) for i, f in d.get("scan_forms", ())),
               num_warps=d.get("num_warps"), notes=tuple(d.get("notes", ())),
               because=str(d.get("because", "")))


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
