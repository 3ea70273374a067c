"""The kernel's verdict is a record the profiler makes (profiler/verdict.py): the renderers
read its fields, report.json keeps its text, and a saved report's text is read back once."""
from __future__ import annotations

import json

import pytest

from pallas_prof.profiler.schema import KernelProfile
from pallas_prof.profiler.verdict import Verdict
from pallas_prof.serial import Misfit, decode

TIMED = Verdict(findings=("memory-bound: 4.1 TB/s = 98% of the measured copy bandwidth",
                          "back-to-back in a loop: 134.5 us per launch (+2.7% against cold)"),
                heaviest_basis="by PC samples", heaviest="[0] get @ softmax.py:19 36%")
STATIC = Verdict(static_only=True, heaviest_basis="share of instructions",
                 heaviest="[4] exp @ softmax.py:21 31%")


def test_its_text_is_the_line_runs_have_always_written():
  assert str(TIMED) == ("memory-bound: 4.1 TB/s = 98% of the measured copy bandwidth; "
                        "back-to-back in a loop: 134.5 us per launch (+2.7% against cold); "
                        "heaviest equations (by PC samples): [0] get @ softmax.py:19 36%")
  assert str(STATIC) == ("static only; heaviest equations (share of instructions): "
                         "[4] exp @ softmax.py:21 31%")
  assert str(Verdict(static_only=True)) == "static only" and str(Verdict()) == ""


def test_beside_a_table_of_the_hot_equations_it_says_the_rest():
  assert TIMED.beside_table == ("memory-bound: 4.1 TB/s = 98% of the measured copy bandwidth; "
                                "back-to-back in a loop: 134.5 us per launch (+2.7% against cold)")
  assert STATIC.beside_table == "" and Verdict(findings=("not timed",)).beside_table == "not timed"


@pytest.mark.parametrize("text", [
    str(TIMED), str(STATIC), "static only", "", "not timed",
    # a run from before the weights' basis was said
    "memory-bound: 87 GB/s; back-to-back in a loop: 7.8 us per launch; heaviest equations: "
    "[4] exp @ softmax.py:21 31%",
])
def test_a_saved_verdict_reads_back_to_the_same_text_and_fields(text):
  kp = KernelProfile(label="k#1", name="k", in_avals=[], out_avals=[], static=None, work=None,
                     verdict=decode(Verdict, text))
  saved = json.loads(json.dumps(kp.to_dict()))
  assert saved["verdict"] == text                       # the file keeps the text
  back = decode(KernelProfile, saved)
  assert back.verdict == kp.verdict and str(back.verdict) == text
  assert "heaviest equations" not in back.verdict.beside_table


def test_the_old_format_gives_the_findings_without_the_heaviest_equations():
  v = decode(Verdict, "memory-bound: 87 GB/s; heaviest equations: [4] exp @ k.py:2 31%")
  assert v.beside_table == "memory-bound: 87 GB/s" and v.heaviest == "[4] exp @ k.py:2 31%"
  assert v.heaviest_basis == ""


@pytest.mark.parametrize("value, said", [
    (3, "is a number where a string (the text of verdict) belongs"),
    ({"findings": []}, "is an object where a string (the text of verdict) belongs"),
    ("memory-bound; heaviest equations (by PC samples) [0] get", "not a verdict pallas-prof writes"),
])
def test_a_malformed_saved_verdict_is_refused_naming_the_field(value, said):
  with pytest.raises(Misfit) as e:
    decode(KernelProfile, {"label": "k#1", "name": "k", "in_avals": [], "out_avals": [],
                           "static": None, "work": None, "verdict": value},
           "report.profiles[0].kernels[0]")
  assert said in e.value.describe() and "report.profiles[0].kernels[0].verdict" in e.value.describe()
