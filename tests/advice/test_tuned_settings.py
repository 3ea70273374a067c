"""Tuned settings (num_warps, num_stages, launch_group, tma) are one typed record,
backend.options.TunedSettings, from the kernel's LoweringOptions to the advice's trials, its
pasted CompilerParams line, its tuning file's entries and the tuner's candidates: they
unpacked (w, s, g, t) tuples before (issue 42 item 2)."""
import pathlib
import re
from types import SimpleNamespace

import pytest

from pallas_prof.advice import api as advice_api
from pallas_prof.advice import engine, trials
from pallas_prof.advice.schema import Action
from pallas_prof.backend.options import LoweringOptions, TunedSettings
from pallas_prof.tune import params


def test_settings_round_trip_through_their_saved_fields():
  s = TunedSettings(num_warps=8, num_stages=2, launch_group=4, tma=1)
  assert s.tma is True and s.label == "8w 2s g4 tma"
  assert s.to_dict() == {"num_warps": 8, "num_stages": 2, "launch_group": 4, "tma": True,
                         "persistent": 0, "loop_stages": 0}
  assert TunedSettings.from_dict(s.to_dict()) == s
  # settings saved before persistent was one read as 0
  older = {"num_warps": 8, "num_stages": 2, "launch_group": 4, "tma": True}
  assert TunedSettings.from_dict(older) == s
  persistent = TunedSettings(8, 2, 4, False, 132)
  assert persistent.label == "8w 2s g4 p132"
  assert TunedSettings.from_dict(persistent.to_dict()) == persistent


def test_lowering_options_give_and_take_their_settings():
  options = LoweringOptions(num_warps=2, num_stages=4, launch_group=8, check_bounds=True)
  assert options.settings == TunedSettings(2, 4, 8, False)
  moved = options.with_settings(TunedSettings(8, 2, 0, True))
  assert moved.settings == TunedSettings(8, 2, 0, True) and moved.check_bounds
  assert (moved.num_warps, moved.num_stages, moved.tma) == (8, 2, True)


def test_a_change_sets_only_the_tuned_fields():
  s = TunedSettings(4, 3).changed({"num_warps": 8, "tma": 1, "operand": "x_ref"})
  assert s == TunedSettings(8, 3, 0, True)


def _record(options: LoweringOptions):
  asked = []
  rec = SimpleNamespace(generated=SimpleNamespace(options=options),
                        relower=lambda **fields: asked.append(fields) or "variant")
  return rec, asked


def test_a_kind_a_trial_lowers_the_kernels_own_settings_with_the_change():
  rec, asked = _record(LoweringOptions(num_warps=2, num_stages=4, launch_group=8))
  action = Action(kind="a", rule="too_few_warps", title="8 warps", change={"num_warps": 8})
  assert trials.lower_variant(action, rec, None) == "variant"
  assert asked == [{"num_warps": 8, "num_stages": 4, "launch_group": 8, "tma": False,
                    "persistent": 0, "loop_stages": 0}]
  assert trials.settings_of(action.change, rec.generated) == TunedSettings(8, 4, 8, False)


@pytest.mark.parametrize("change, line", [
    ({"num_warps": 8}, "num_warps=8, num_stages=3, launch_group=4"),
    ({"launch_group": 0, "tma": 1}, "num_warps=4, num_stages=3, tma=True"),
    ({"launch_group": 8, "persistent": 132},
     "num_warps=4, num_stages=3, launch_group=8, persistent=132"),
    ({"loop_stages": 3, "num_warps": 2}, "num_warps=2, num_stages=3, launch_group=4, loop_stages=3"),
])
def test_the_pasted_line_is_the_facts_settings_with_the_change(change, line):
  facts = SimpleNamespace(num_warps=4, num_stages=3, launch_group=4, tma=False, persistent=0,
                          loop_stages=0)
  assert engine.compiler_params_line(change, facts) == \
      f"compiler_params=pallas_prof.CompilerParams({line})"


def test_a_tuner_candidate_is_made_from_options_or_settings():
  options = LoweringOptions(num_warps=8, num_stages=2, tma=True)
  for given in (options, options.settings):
    c = params._candidate(given, 1e-3)
    assert c.settings == TunedSettings(8, 2, 0, True) and c.label == "8w 2s tma"


# a settings tuple unpacked into four names: what TunedSettings replaces
UNPACKED = re.compile(r"^\s*\w+, \w+, \w+, \w+ = .*(config|key|_config\()", re.M)


def test_no_module_unpacks_a_settings_tuple():
  root = pathlib.Path(params.__file__).parents[1]
  found = [f"{p.relative_to(root)}: {m.group(0).strip()}"
           for p in sorted(root.rglob("*.py")) for m in UNPACKED.finditer(p.read_text())]
  assert found == []


def test_the_advice_tuning_entry_holds_the_trials_settings():
  gk = SimpleNamespace(options=LoweringOptions(num_warps=4, num_stages=3), key="0" * 64,
                       code_key="1" * 64)
  rec = SimpleNamespace(label="k#0", name="k", generated=gk, compiled=None)
  action = Action(kind="a", rule="too_few_warps", title="8 warps", change={"num_warps": 8},
                  trial=SimpleNamespace(held=True))
  advice = SimpleNamespace(label="k#0", actions=[action])
  report = SimpleNamespace(device=SimpleNamespace(name="NVIDIA H200"))
  (entry,) = advice_api.tuning_entries([advice], [rec], report)
  assert entry.best == TunedSettings(8, 3) and entry.default == TunedSettings(4, 3)
  assert (entry.source, entry.code) == ("0" * 64, "1" * 64)
