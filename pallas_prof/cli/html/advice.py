"""report.html's advice panel, beside the kernel's heated lines: each diagnosis with its
evidence and the equation it concerns (hovering it marks that equation's lines), and the
ranked actions with their measured savings or estimates. From the run report's typed
advice (pallas_prof/advice/schema.py: KernelAdvice); the template escapes every text."""
from __future__ import annotations

import dataclasses

from ...advice.rank import saving_text
from ...advice.schema import KINDS, Action


@dataclasses.dataclass(frozen=True)
class DiagnosisView:
  text: str
  location: str
  eqn: str                          # "" or the equation index (data-e, as the listings')
  evidence: tuple[tuple[str, str, bool], ...]   # (what, text, measured)


@dataclasses.dataclass(frozen=True)
class ActionView:
  rank: int
  kind: str
  kind_words: str
  title: str
  saving: str
  held: bool                        # measured, outputs equal, faster than the noise
  measured: bool
  apply: str
  compiled: str
  diff: str = ""                    # kind e: the unified diff against the user's file


@dataclasses.dataclass(frozen=True)
class AdviceView:
  measured: str
  summary: str
  at_roof: bool
  diagnoses: tuple[DiagnosisView, ...]
  actions: tuple[ActionView, ...]
  notes: tuple[str, ...]
  kinds: tuple[tuple[str, str], ...] = ()   # (kind, what it means) of the kinds listed


def _action(i: int, a: Action) -> ActionView:
  return ActionView(i, a.kind, KINDS.get(a.kind, ""), a.title, saving_text(a),
                    bool(a.trial is not None and a.trial.held), a.trial is not None,
                    str(a.apply or ""), str(a.compiled or ""), str(getattr(a, "diff", "") or ""))


def advice_view(s) -> AdviceView | None:
  """The advice panel of the kernel of the row `s` (summary.KernelSummary); none for a
  kernel that failed (its facts say how)."""
  a = s.advice
  if a is None or s.failed:
    return None
  diagnoses = []
  for d in a.diagnoses:
    where = f"{str(d.user_file).rsplit('/', 1)[-1]}:{d.user_line}" if d.user_file else ""
    diagnoses.append(DiagnosisView(
        str(d.text or ""), where, "" if d.eqn is None else str(d.eqn),
        tuple((str(e.what or ""), str(e.text or ""), bool(e.measured))
              for e in d.evidence)))
  listed = {x.kind for x in a.actions}
  return AdviceView(str(a.measured or ""), str(a.summary or ""),
                    bool(a.at_roof), tuple(diagnoses),
                    tuple(_action(i, x) for i, x in enumerate(a.actions, 1)),
                    tuple(str(n) for n in a.notes),
                    tuple((k, words) for k, words in KINDS.items() if k in listed))
