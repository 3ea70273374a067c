"""The compile-side artifacts: frozen, work done by functions that return new
ones, one save/load each with a schema version (disk cache, run directory,
the profiler's child processes)."""
from __future__ import annotations

import ast
import dataclasses
import json
import os

import pytest

from pallas_prof.backend import artifacts
from pallas_prof.backend.compiling import compile as pcompile, compile_cache
from pallas_prof.backend.artifacts import CompiledKernel, GeneratedKernel, SchemaMismatch
from pallas_prof.backend.running.launch_spec import LaunchSpec
from pallas_prof.cli import run_directory as run_dir
from testkit.examples import lower_example


@pytest.fixture(scope="module")
def softmax():
  gk = lower_example("softmax")
  pcompile.clear_memory_cache()
  deferred = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False, need_cubin=False)
  return gk, deferred


def test_a_compiled_kernel_cannot_be_changed(softmax):
  _, ck = softmax
  with pytest.raises(dataclasses.FrozenInstanceError):
    ck.registers = 1
  with pytest.raises(TypeError):
    ck.asm["cubin"] = b"\x7fELF"
  with pytest.raises(TypeError):
    ck.metadata["num_warps"] = 8


def test_assembling_the_cubin_returns_a_new_artifact(softmax):
  """Before, complete() wrote the cubin into an `asm` dict that every
  dataclasses.replace copy shared, and ck.cubin ran ptxas."""
  _, ck = softmax
  copy = dataclasses.replace(ck, cache="memory")
  with pytest.raises(ValueError, match="assemble_cubin"):
    ck.cubin                                     # noqa: B018 - a property that does no work
  full = pcompile.assemble_cubin(ck)
  assert full is not ck and full.cubin[:4] == b"\x7fELF" and full.registers > 0
  assert "cubin" in full.stage_seconds and full.compile_seconds > ck.compile_seconds
  assert ck.cubin_deferred and copy.cubin_deferred and ck.registers is None
  assert pcompile.assemble_cubin(full) is full
  assert pcompile.assemble_cubin(copy).cubin == full.cubin     # remembered: no second ptxas


def test_save_and_load_give_the_same_kernel(softmax, tmp_path):
  gk, ck = softmax
  full = pcompile.assemble_cubin(ck)
  full.save(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["compiled.json", "kernel.cubin", "kernel.ll",
                                          "kernel.ptx", "kernel.ttgir", "kernel.ttir"]
  back = CompiledKernel.load(str(tmp_path), generated=gk)
  assert back == full
  assert json.loads((tmp_path / "compiled.json").read_text())["schema"] == CompiledKernel.SCHEMA


def test_another_layout_is_refused_by_name(softmax, tmp_path):
  _, ck = softmax
  ck.save(str(tmp_path))
  meta = json.loads((tmp_path / "compiled.json").read_text())
  (tmp_path / "compiled.json").write_text(json.dumps({**meta, "schema": "pallas-prof/compiled/0"}))
  with pytest.raises(SchemaMismatch, match="compiled/0"):
    CompiledKernel.load(str(tmp_path))


def test_the_disk_cache_never_loads_an_entry_of_another_layout(softmax, tmp_path, monkeypatch):
  gk, _ = softmax
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  pcompile.clear_memory_cache()
  first = pcompile.compile_kernel(gk, ("cuda", 90))
  pcompile.clear_memory_cache()
  assert pcompile.compile_kernel(gk, ("cuda", 90)).cache == "disk"
  # the layout's version is part of the key: a new layout never finds old entries ...
  monkeypatch.setattr(CompiledKernel, "SCHEMA", "pallas-prof/compiled/999")
  assert compile_cache.compile_key(gk, ("cuda", 90)) != first.key
  monkeypatch.undo()
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  # ... and an entry whose file says another layout is a miss, not a crash
  entry = compile_cache._disk_dir(first.key)
  meta = json.loads(open(os.path.join(entry, "compiled.json")).read())
  with open(os.path.join(entry, "compiled.json"), "w") as f:
    json.dump({**meta, "schema": "pallas-prof/compiled/0"}, f)
  pcompile.clear_memory_cache()
  again = pcompile.compile_kernel(gk, ("cuda", 90))
  assert again.cache == "miss" and again.ptx == first.ptx


def test_launch_spec_round_trip_and_schema(softmax, tmp_path):
  _, ck = softmax
  with pytest.raises(ValueError, match="assemble_cubin"):
    LaunchSpec.from_compiled(ck)               # no cubin: the caller assembles it
  spec = LaunchSpec.from_compiled(pcompile.assemble_cubin(ck), aliases=[(0, 0)])
  spec.save(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["kernel.cubin", "spec.json"]
  back = LaunchSpec.load(str(tmp_path))
  assert back == spec and back.aliases == ((0, 0),)
  assert [(p.name, p.dtype, p.shape, p.role, p.index) for p in back.params] == [
      (p.name, p.dtype, tuple(p.shape), p.role, p.index) for p in ck.generated.params]
  assert back.params[0].nbytes == 16 * 300 * 4
  meta = json.loads((tmp_path / "spec.json").read_text())
  (tmp_path / "spec.json").write_text(json.dumps({**meta, "schema": "pallas-prof/launch/0"}))
  with pytest.raises(SchemaMismatch):
    LaunchSpec.load(str(tmp_path))


def test_a_child_process_loads_a_launch_spec_without_jax(softmax, tmp_path):
  """The profiler's children (PC sampling) stub the pallas_prof package to skip
  JAX's import (1-2 s); the launch spec they load must not bring it back."""
  import subprocess
  import sys
  _, ck = softmax
  LaunchSpec.from_compiled(pcompile.assemble_cubin(ck)).save(str(tmp_path))
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  code = ("import sys, types\n"
          f"p = types.ModuleType('pallas_prof'); p.__path__ = [{root!r} + '/pallas_prof']\n"
          "sys.modules['pallas_prof'] = p\n"
          "from pallas_prof.backend.running.launch_spec import LaunchSpec\n"
          f"spec = LaunchSpec.load({str(tmp_path)!r})\n"
          "print(spec.name, sum(p.nbytes for p in spec.params),\n"
          "      sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'triton')))\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr
  assert out.stdout.split() == [ck.name, str(2 * 16 * 300 * 4), "[]"]


def test_run_directory_keeps_the_artifacts_and_reads_older_runs(softmax, tmp_path):
  gk, ck = softmax
  full = pcompile.assemble_cubin(ck)
  files = run_dir.save_kernel(str(tmp_path), "softmax_kernel#abc", gk, full, aliases=[(0, 0)])
  kdir = os.path.dirname(os.path.join(tmp_path, files["kernel"]))
  assert {"compiled", "launch", "ptx", "cubin"} <= set(files)
  loaded_gk, loaded = run_dir.load_kernel(kdir)
  assert loaded == dataclasses.replace(full, generated=loaded_gk)
  assert run_dir.load_aliases(kdir) == ((0, 0),)
  spec = LaunchSpec.load(kdir)                 # what `python -m ...timing.runner DIR` replays
  assert spec.cubin == full.cubin and spec.aliases == ((0, 0),)
  # a run saved before compiled.json: its compile lived in kernel.json
  compiled = json.loads(open(os.path.join(kdir, "compiled.json")).read())
  os.remove(os.path.join(kdir, "compiled.json"))
  meta = json.loads(open(os.path.join(kdir, "kernel.json")).read())
  meta.pop("input_output_aliases")
  meta["compiled"] = {k: compiled[k] for k in (
      "key", "target", "metadata", "stage_seconds", "compile_seconds", "registers",
      "spill_stores", "spill_loads", "stack_bytes", "ptxas_log", "cache")}
  with open(os.path.join(kdir, "kernel.json"), "w") as f:
    json.dump(meta, f)
  os.remove(os.path.join(kdir, "spec.json"))
  _, old = run_dir.load_kernel(kdir)
  assert old.cubin == full.cubin and old.registers == full.registers and old.ptx == full.ptx
  assert run_dir.load_aliases(kdir) == ()


def test_a_generated_kernel_saves_and_loads_itself(softmax, tmp_path):
  gk, _ = softmax
  # a field kernel.json once lost
  fused = dataclasses.replace(gk, options=gk.options.replace(enable_fp_fusion=True))
  fused.save(str(tmp_path), label="softmax_kernel#abc")
  back, _ = run_dir.load_kernel(str(tmp_path))   # the run directory's reader
  for field in ("name", "source", "path", "line_map", "params", "grid", "launch_grid",
                "num_warps", "num_stages", "jaxpr_text", "key", "enable_fp_fusion",
                "ref_names"):
    assert getattr(back, field) == getattr(fused, field), field
  # an ejected kernel names its refs as the kernel does (its bounds findings' equations)
  assert dict(back.ref_names) == {"a": "x_ref", "b": "o_ref"}, back.ref_names
  assert [e.to_dict() for e in back.eqns] == [e.to_dict() for e in gk.eqns]
  meta = json.loads(open(os.path.join(tmp_path, "kernel.json")).read())
  assert meta["schema"] == GeneratedKernel.SCHEMA and meta["label"] == "softmax_kernel#abc"
  meta["schema"] = "pallas-prof/generated/999"
  with open(os.path.join(tmp_path, "kernel.json"), "w") as f:
    json.dump(meta, f)
  with pytest.raises(SchemaMismatch, match="generated/999"):
    run_dir.load_kernel(str(tmp_path))


@pytest.mark.parametrize("saved", [[["a", 3]], [["a"]], {"a": "x_ref"}, "x_ref"])
def test_a_damaged_ref_names_is_refused_by_name(softmax, tmp_path, saved):
  gk, _ = softmax
  gk.save(str(tmp_path))
  path = os.path.join(tmp_path, "kernel.json")
  meta = json.loads(open(path).read())
  meta["ref_names"] = saved
  with open(path, "w") as f:
    json.dump(meta, f)
  with pytest.raises(run_dir.saved_kernel.Damaged, match=r"kernel\.json\.ref_names"):
    run_dir.load_kernel(str(tmp_path))


def test_the_compile_worker_imports_nothing_that_imports_it():
  """compile.py and warmup.py call the worker; the worker's parent side imports only
  triton_run.py and the worker's own modules (free of pallas_prof itself), and the worker
  process (worker_main.py) only those, so the compile <-> compile_worker cycle is gone."""
  def imports(name):
    path = os.path.join(os.path.dirname(artifacts.__file__), "compiling", name)
    imported = set()
    for node in ast.walk(ast.parse(open(path).read())):
      if isinstance(node, ast.ImportFrom):
        imported.add("." * node.level + (node.module or ""))
        if not node.module:
          imported |= {"." * node.level + a.name for a in node.names}
      elif isinstance(node, ast.Import):
        imported |= {a.name for a in node.names}
    return {m for m in imported if m.startswith((".", "pallas_prof")) and m.strip(".")}

  # settings and safe_files: read by the parent's side alone (enabled(), a leftover worker
  # folder's checks), leaves of the standard library
  assert imports("compile_worker.py") == {".triton_run", ".worker_main", ".worker_output",
                                          "...settings", "...safe_files"}
  assert imports("worker_main.py") == {".worker_batch", ".worker_output"}
  assert imports("worker_output.py") == set()


def test_the_outputs_zeroed_for_atomics_are_the_kernels_to_say(rng):
  """GeneratedKernel.zeroed_outputs: an output updated with atomics starts from zero (the
  GPU launch zeroes it, the interpreter's poisoned start leaves it at zero), unless an input
  aliases it; registration, LaunchSpec, the interpreter and eject all ask the kernel."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.experimental import pallas as pl

  import pallas_prof
  from pallas_prof import triton as plgpu
  from pallas_prof.backend import kernel_registry
  from pallas_prof.backend.running.launch import run_interpreted
  pallas_prof.install()
  vals = np.asarray(rng.integers(-32, 33, size=(4, 8)) / 8, np.float32)   # exact sums

  def kernel(v_ref, o_ref, p_ref):
    i = pl.program_id(0)
    plgpu.atomic_add(o_ref, (slice(None),), v_ref[i])
    p_ref[i] = v_ref[i] * 2

  shapes = (jax.ShapeDtypeStruct((8,), jnp.float32), jax.ShapeDtypeStruct((4, 8), jnp.float32))
  out = pl.pallas_call(kernel, out_shape=shapes, grid=(4,), name="atomic_and_plain")(vals)
  np.testing.assert_array_equal(np.asarray(out[0]), vals.sum(0))
  gk = kernel_registry.find("atomic_and_plain")[-1].generated
  assert gk.atomic_params == ("o_ref",)
  assert gk.zeroed_outputs() == (0,)
  assert gk.zeroed_outputs([(0, 0)]) == ()       # aliased: the buffer holds the input
  first, second = run_interpreted(gk, [vals], [((8,), np.float32), ((4, 8), np.float32)],
                                  poison=True)
  np.testing.assert_array_equal(first, vals.sum(0))        # from zero, not from NaN
  np.testing.assert_array_equal(second, vals * 2)
