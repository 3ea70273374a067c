"""A GeneratedKernel's settings are its LoweringOptions (`gk.options`), the only place
they are kept: what Triton is asked to compile, the kernel's equality and what its file
saves all read them there, and a kernel read back from a run directory has them too."""
from __future__ import annotations

import dataclasses
import json
import os

import pytest

from pallas_prof.advice.trials import settings_of
from pallas_prof.backend.compiling import compile_cache
from pallas_prof.backend.options import LoweringOptions, TunedSettings, WorkaroundPlan
from pallas_prof.cli import run_directory as run_dir
from testkit.examples import lower_example

TARGET = ("cuda", 90)


@pytest.fixture(scope="module")
def softmax():
  return lower_example("softmax")


def _with(gk, **changes):
  return dataclasses.replace(gk, options=gk.options.replace(**changes))


def test_a_kernel_reads_its_settings_from_its_options(softmax):
  """Before, the kernel kept copies beside its options and Triton's options were made of
  the copies: a kernel whose options said 8 warps compiled with 4."""
  variant = _with(softmax, num_warps=8, num_stages=2, enable_fp_fusion=True)
  assert (variant.num_warps, variant.num_stages, variant.enable_fp_fusion) == (8, 2, True)
  asked = compile_cache.compile_options(variant, TARGET)
  assert (asked["num_warps"], asked["num_stages"], asked["enable_fp_fusion"]) == (8, 2, True)
  assert compile_cache.compile_key(variant, TARGET) != compile_cache.compile_key(softmax, TARGET)
  assert compile_cache.compile_key(_with(softmax), TARGET) == \
      compile_cache.compile_key(softmax, TARGET)


def test_equality_counts_the_saved_options_alone(softmax):
  """As when they were fields of the kernel: the saved settings count; the workaround
  plan and the target, which a kernel read back from disk lacks, do not."""
  assert _with(softmax, compute_capability=80,
               workarounds=WorkaroundPlan(notes=("8 warps",))) == softmax
  for change in ({"num_warps": 8}, {"num_stages": 5}, {"tma": True}, {"launch_group": 4},
                 {"check_bounds": True}, {"enable_fp_fusion": True}):
    assert _with(softmax, **change) != softmax, change


def test_a_kernel_read_back_from_a_run_has_its_options(softmax, tmp_path):
  """Before, a saved run's kernel had options=None: its advice settings (settings_of)
  failed with an AttributeError on None."""
  saved = _with(softmax, num_warps=8, num_stages=2, enable_fp_fusion=True, launch_group=4,
                workarounds=WorkaroundPlan(notes=("8 warps",)))
  saved.save(str(tmp_path))
  back, _ = run_dir.load_kernel(str(tmp_path))
  assert isinstance(back.options, LoweringOptions)
  assert back.options.saved() == saved.options.saved()
  assert back.options.workarounds is None and back.options.probes is None   # never saved
  assert back == saved
  assert settings_of({"num_warps": 2}, back) == TunedSettings(2, 2, 4, False)
  # kernel.json keeps its layout: each saved option under its own name, at the top
  meta = json.loads(open(os.path.join(tmp_path, "kernel.json")).read())
  assert {k: meta[k] for k in LoweringOptions.SAVED if k in meta} == saved.options.saved()
  assert "options" not in meta
  assert "persistent" not in meta        # written only where set: kernel.json as before it


def test_a_persistent_kernel_is_read_back_persistent(softmax, tmp_path):
  saved = _with(softmax, persistent=3)
  saved.save(str(tmp_path))
  meta = json.loads(open(os.path.join(tmp_path, "kernel.json")).read())
  assert meta["persistent"] == 3
  back, _ = run_dir.load_kernel(str(tmp_path))
  assert back == saved
  assert back.persistent == 3 and back.options.settings.persistent == 3


def test_an_older_kernel_file_without_the_later_options_loads(softmax, tmp_path):
  """A kernel.json written before enable_fp_fusion, check_bounds, launch_group and tma
  were saved reads them as their defaults."""
  softmax.save(str(tmp_path))
  path = os.path.join(tmp_path, "kernel.json")
  meta = json.loads(open(path).read())
  for name in ("enable_fp_fusion", "check_bounds", "launch_group", "tma"):
    del meta[name]
  meta["num_warps"] = 2
  with open(path, "w") as f:
    json.dump(meta, f)
  back, _ = run_dir.load_kernel(str(tmp_path))
  assert back.options == LoweringOptions(num_warps=2, num_stages=softmax.num_stages)
