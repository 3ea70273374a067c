"""What main wrote before the artifacts went through serial.py (tests/backend/saved_by_main,
make.py there says how) loads with today's code, and is written again as the same JSON."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from pallas_prof.backend.artifacts import CompiledKernel, GeneratedKernel
from pallas_prof.backend.running.launch_spec import LaunchSpec
from pallas_prof.backend.lowering.features.workaround_plan import WorkaroundPlan
from pallas_prof.cli import run_directory
from pallas_prof.serial import Misfit, load

SAVED = os.path.join(os.path.dirname(__file__), "saved_by_main")
KERNEL = os.path.join(SAVED, "run", "kernels", "matmul_kernel-1")


def _json(path: str):
  with open(path) as f:
    return json.load(f)


def test_a_kernel_directory_main_saved_loads_and_saves_as_the_same_json(tmp_path):
  gk, ck = run_directory.load_kernel(KERNEL, os.path.join(SAVED, "run"))
  assert gk.bounds_sites and gk.tma_notes and gk.check_bounds
  assert any(e.dot is not None and e.dot.flops for e in gk.eqns)
  assert gk.tma_notes[0].reason and gk.tma_notes[0].line
  assert ck.target == ("cuda", 90) and ck.cubin[:4] == b"\x7fELF" and ck.registers
  assert run_directory.load_aliases(KERNEL) == ((0, 0),)
  spec = LaunchSpec.load(KERNEL)
  assert spec.cubin == ck.cubin and spec.params == gk.params and spec.aliases == ((0, 0),)
  run_directory.save_kernel(str(tmp_path), "matmul_kernel#1", gk, ck, aliases=[(0, 0)])
  again = tmp_path / "kernels" / "matmul_kernel-1"
  for name in ("kernel.json", "compiled.json", "spec.json"):
    assert _json(again / name) == _json(os.path.join(KERNEL, name)), name
  for name in ("source.py", "kernel.ptx", "kernel.cubin"):
    assert (again / name).read_bytes() == open(os.path.join(KERNEL, name), "rb").read()


def test_the_disk_cache_reads_a_compiled_kernel_main_saved(tmp_path):
  copy = shutil.copytree(KERNEL, tmp_path / "k")
  gk, _ = run_directory.load_kernel(KERNEL)
  ck = CompiledKernel.load(str(copy), generated=gk)
  assert ck.generated is gk and ck.name == gk.name and ck.metadata["num_warps"] == 4
  assert set(ck.asm) == {"ptx", "cubin"}


def test_a_workaround_plan_main_saved_loads_as_it_was_written():
  saved = _json(os.path.join(SAVED, "workaround_plan.json"))
  plan = load(WorkaroundPlan, saved, "workaround_plan.json")
  assert plan == WorkaroundPlan(scan_forms=((3, "unrolled"),), num_warps=8,
                                notes=("num_warps 8",), because="an error of Triton's")
  assert {"format": saved["format"], "fault": "triton", **plan.to_dict()} == saved


@pytest.mark.parametrize("edit,named", [
    (lambda m: m.update(launch_grid=[2, 2]), r"kernel\.json\.launch_grid is a list of 2 items"),
    (lambda m: m.pop("num_warps"), r"kernel\.json\.num_warps is missing"),
    (lambda m: [m.pop(k) for k in ("name", "eqns")], r"kernel\.json lacks the fields name, eqns"),
    (lambda m: m.update(colour="red"), r"kernel\.json\.colour.*GeneratedKernel does not have"),
    (lambda m: m["eqns"][1].update(bytes_read="many"), r"eqns\[1\]\.bytes_read is a string"),
    (lambda m: m["bounds_sites"][0].update(base=None), r"bounds_sites\[0\]\.base is missing"),
    (lambda m: m["tma_notes"][0].pop("reason"), r"tma_notes\[0\]\.reason is missing"),
])
def test_a_field_of_another_kind_is_refused_naming_the_file_and_field(tmp_path, edit, named):
  copy = shutil.copytree(KERNEL, tmp_path / "k")
  meta = _json(copy / "kernel.json")
  edit(meta)
  (copy / "kernel.json").write_text(json.dumps(meta))
  with pytest.raises(run_directory.saved_kernel.Damaged, match=named):
    run_directory.load_kernel(str(copy))
  with pytest.raises(Misfit, match=named):       # the artifact's own reader says the same
    GeneratedKernel.from_saved(meta, "", str(copy / "kernel.json"))


@pytest.mark.parametrize("key,value,named", [
    ("compile_seconds", "slow", r"compiled\.json\.compile_seconds is a string where a number"),
    ("colour", 1, r"compiled\.json\.colour.*CompiledKernel does not have"),
    ("registers", [], r"compiled\.json\.registers is a list"),
])
def test_the_disk_caches_reader_refuses_a_field_of_another_kind(tmp_path, key, value, named):
  """CompiledKernel.load (the disk cache, the profiler's children) read a string where
  seconds belong, and a key it does not know, without a word."""
  copy = shutil.copytree(KERNEL, tmp_path / "k")
  meta = _json(copy / "compiled.json")
  meta[key] = value
  (copy / "compiled.json").write_text(json.dumps(meta))
  with pytest.raises(ValueError, match=named):
    CompiledKernel.load(str(copy))
