"""How the advice reads (issue 48, item 17): the legend of its kinds, and no action that
switches on an opt-in nothing has shown to work."""
from __future__ import annotations

import pytest

from pallas_prof.advice import api
from pallas_prof.advice.schema import KINDS, Action, Diagnosis, KernelAdvice

from . import recorded
from .test_advice_spans import _Record

PREPOSITIONS = {"at", "to", "of", "in", "for", "with", "by", "on", "from"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_reads_as_a_clause_after_its_letter(kind):
  """"[c] a block shape pallas-prof re-traces your kernel at" did not parse."""
  words = KINDS[kind].split()
  assert words[-1] not in PREPOSITIONS, KINDS[kind]
  assert {"it", "your"} & set(words), KINDS[kind]       # says what the action does, to whom


TMA = Action("a", "tma 0 -> 1 (opt-in: TMA has not yet run on a GPU)", "tma_eligible",
             {"tma": 1}, estimate_pct=5.0)
WARPS = Action("a", "num_warps 8 -> 16 (more warps)", "too_few_warps", {"num_warps": 16},
               estimate_pct=1.0)


@pytest.fixture
def advised(monkeypatch):
  """for_report on a recorded kernel whose diagnosis offers TMA first and more warps."""
  kp, rep = recorded.kernel("ka_copy_kernel", "float32[8192,8192]")

  def diagnose(kp, *args, **kwargs):
    return KernelAdvice(label=kp.label, name=kp.name, summary="tma first",
                        diagnoses=[Diagnosis("tma_eligible", "loads can go through TMA"),
                                   Diagnosis("too_few_warps", "too few warps")],
                        actions=[TMA, WARPS], measured="not measured: no GPU")
  monkeypatch.setattr(api, "diagnose", diagnose)
  return lambda **kw: api.for_report([_Record(kp)], rep, **kw)[0]


def test_run_lists_an_untested_opt_in_as_a_note_not_an_action(advised):
  advice = advised()
  assert [a.title for a in advice.actions] == [WARPS.title]
  (note,) = [n for n in advice.notes if "tma 0 -> 1" in n]
  assert note.startswith("not offered as an action: tma 0 -> 1:") and "--try-tma" in note
  assert "tma" not in advice.summary and WARPS.title in advice.summary


def test_advise_with_try_tma_keeps_it_as_an_action(advised):
  advice = advised(try_tma=True)
  assert [a.title for a in advice.actions] == [TMA.title, WARPS.title]
  assert not any("tma 0 -> 1" in n for n in advice.notes)
