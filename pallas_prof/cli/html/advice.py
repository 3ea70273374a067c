"""report.html's advice panel, beside the kernel's heated lines: each diagnosis with its
evidence and the equation it concerns (hovering it marks that equation's lines), and the
ranked actions with their measured savings or estimates. From report.json's "advice"
(pallas_prof/advice/schema.py: KernelAdvice as a dict); the template escapes every text."""
from __future__ import annotations

import dataclasses

from ...advice.rank import saving_text
from ...advice.schema import KINDS, Action, Trial


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


@dataclasses.dataclass(frozen=True)
class AdviceView:
  measured: str
  summary: str
  at_roof: bool
  diagnoses: tuple[DiagnosisView, ...]
  actions: tuple[ActionView, ...]
  notes: tuple[str, ...]


def _action(i: int, a: dict) -> ActionView:
  trial = a.get("trial")
  act = Action(kind=a.get("kind", "?"), title=a.get("title", ""), rule=a.get("rule", ""),
               estimate_pct=a.get("estimate_pct"), estimate_basis=a.get("estimate_basis", ""),
               status=a.get("status", ""),
               trial=Trial(**{k: trial.get(k) for k in ("before_s", "after_s", "saving_pct",
                                                        "noise_pct", "outputs_equal", "error")})
               if trial else None)
  return ActionView(i, act.kind, KINDS.get(act.kind, ""), act.title, saving_text(act),
                    bool(act.trial is not None and act.trial.held), act.trial is not None,
                    str(a.get("apply") or ""), str(a.get("compiled") or ""))


def advice_view(run: dict, label: str) -> AdviceView | None:
  a = next((x for x in run.get("advice") or [] if x.get("label") == label), None)
  if a is None:
    return None
  diagnoses = []
  for d in a.get("diagnoses") or []:
    where = f"{str(d['user_file']).rsplit('/', 1)[-1]}:{d.get('user_line')}" \
        if d.get("user_file") else ""
    diagnoses.append(DiagnosisView(
        str(d.get("text", "")), where, "" if d.get("eqn") is None else str(d["eqn"]),
        tuple((str(e.get("what", "")), str(e.get("text", "")), bool(e.get("measured")))
              for e in d.get("evidence") or [])))
  return AdviceView(str(a.get("measured") or ""), str(a.get("summary") or ""),
                    bool(a.get("at_roof")), tuple(diagnoses),
                    tuple(_action(i, x) for i, x in enumerate(a.get("actions") or [], 1)),
                    tuple(str(n) for n in a.get("notes") or []))
