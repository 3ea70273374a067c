"""profile() builds one frozen ProfileOptions from its keyword arguments and hands it to
each phase, where it passed nine positional arguments to the replay (issue 42 item 2). A
timing mode or launch count no replay can use is refused at the call, naming the
argument, where it failed each kernel's replay on a GPU, and went unnoticed without one.

The GPU path runs here with the driver, the static phase and the replay faked: what is
checked is what each phase is handed, not the GPU's work."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

import pallas_prof
from pallas_prof.profiler import api, driver
from pallas_prof.profiler.options import ProfileOptions
from pallas_prof.profiler.schema import KernelProfile
from pallas_prof.profiler.timing import runner


@pytest.mark.parametrize("given, named", [
    ({"mode": "fast"}, "profile(mode='fast'): the timing mode is one of cold, sustained, both"),
    ({"min_launches": 0}, "profile(min_launches=0): give a whole number of launches"),
    ({"min_launches": 2.5}, "profile(min_launches=2.5)"),
])
def test_a_value_no_replay_can_use_is_refused_at_the_call(given, named):
  with pytest.raises(driver.ProfilerError) as e:
    pallas_prof.profile([], **given)
  assert str(e.value).startswith(named)


def test_the_options_are_frozen():
  with pytest.raises(dataclasses.FrozenInstanceError):
    ProfileOptions().mode = "cold"


def _target(name: str):
  return api._Target(name=name, label=f"{name}#abc123", in_avals=(), out_avals=(), aliases=(),
                     cost_estimate=None, generated=SimpleNamespace(), compiled=object())


def _fake_gpu(monkeypatch, targets):
  """A GPU of index 1 and two kernels: the phases' calls are recorded, not run."""
  seen = {"replay": [], "attribute": [], "probe": []}
  info = SimpleNamespace(index=1, name="NVIDIA H200", compute_capability=90)
  monkeypatch.setattr(driver, "gpu_status", lambda: (True, ""))
  monkeypatch.setattr(driver, "device_info", lambda index: info)
  monkeypatch.setattr(api, "_targets", lambda kernels: targets)
  monkeypatch.setattr(api, "_static", lambda t, cc, top: KernelProfile(
      label=t.label, name=t.name, in_avals=[], out_avals=[], static=None, work=None))
  monkeypatch.setattr(runner, "replay", lambda ck, **kw: seen["replay"].append(kw))
  monkeypatch.setattr(api, "_attribute", lambda t, p, options: seen["attribute"].append(options))
  monkeypatch.setattr(api, "_probe", lambda t, p, options: seen["probe"].append(options))
  return seen


def test_each_phase_reads_the_one_options_object(monkeypatch):
  targets = [_target("softmax"), _target("matmul")]
  seen = _fake_gpu(monkeypatch, targets)
  check = lambda *a: None  # noqa: E731 - a reference function for one kernel
  report = pallas_prof.profile(device=1, min_launches=7, min_seconds=0.5, mode="cold",
                               nvml=False, ceilings=False, reference={"softmax": check},
                               tolerance={"matmul#abc123": (1e-3, 1e-3)}, sample=False,
                               keep_samples="/tmp/samples", probes=True)
  assert report.message == "replayed 0 of 2 kernel(s) on GPU 1 (NVIDIA H200)"
  # the reference by the kernel's name, the tolerance by its label: one each
  assert [(kw["reference"], kw["tolerance"]) for kw in seen["replay"]] == [
      (check, None), (None, (1e-3, 1e-3))]
  assert all((kw["device"], kw["min_launches"], kw["min_seconds"], kw["mode"]) ==
             (1, 7, 0.5, "cold") for kw in seen["replay"])
  options = seen["attribute"][0]
  assert seen["attribute"] == seen["probe"] == [options, options]
  assert all(o is options for o in seen["attribute"] + seen["probe"])   # built once
  assert (options.device, options.keep_samples, options.probes) == (1, "/tmp/samples", True)
  assert options.samples_taken is False


def test_no_replay_takes_no_samples():
  assert ProfileOptions(replay=False).samples_taken is False
  assert ProfileOptions().samples_taken is True
