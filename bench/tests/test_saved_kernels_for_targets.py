"""The target matrix's two new groups (issue 40 item 1, "JAX's own ops (the conformance and
suite kernels)"): JAX's own Pallas GPU ops lowered with pallas-prof installed, and kernels
another pytest process saved (bench/targets/dump_kernels.py) compiled here for a target,
as `matrix.py --saved DIR` does with JAX's conformance tests run on a GPU machine."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.targets import dump_kernels, jax_ops, matrix
from pallas_prof.backend.compiling.for_targets import compile_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOWERING_TESTS = "tests/backend/lowering/test_kernel_key.py"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """One of our own test files run by pytest in a process of its own under the plugin."""
  folder = tmp_path_factory.mktemp("dumped")
  env = dict(os.environ, PALLAS_PROF_DUMP_KERNELS=str(folder), JAX_PLATFORMS="cpu")
  done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         "-n", "0", "-p", "bench.targets.dump_kernels", LOWERING_TESTS],
                        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  assert f"kernels saved in {folder}" in done.stdout
  return folder


def test_the_plugin_saves_each_kernel_with_the_test_that_lowered_it(saved):
  files = sorted(os.listdir(saved))
  assert files and all(f.endswith(".json") for f in files)
  records = [json.load(open(os.path.join(saved, f))) for f in files]
  assert {r["schema"] for r in records} == {dump_kernels.SCHEMA}
  tests = {r["test"] for r in records}
  assert all(t and t.startswith(LOWERING_TESTS + "::test_") for t in tests), tests
  assert {r["kernel"]["name"] for r in records} >= {"scale_kernel"}


def test_saved_kernels_compile_for_another_target(saved):
  kernels, bad = jax_ops.saved_kernels(str(saved), matrix.Lowered)
  assert not bad and kernels
  assert all(k.group == "conformance" and "::test_" in k.label for k in kernels)
  for k in kernels:
    # the source was written where this process keeps kernels, not read from the path
    # of the process that saved it
    assert open(k.gk.path).read() == k.gk.source
  outcome = compile_for(kernels[0].gk, "sm_80", use_disk_cache=False)
  assert outcome.status == "compiled", outcome.reason
  assert outcome.figures()["registers"] > 0


def _copy(saved, tmp_path, change) -> str:
  folder = tmp_path / "copied"
  folder.mkdir()
  for f in os.listdir(saved):
    (folder / f).write_text(open(os.path.join(saved, f)).read())
  record = json.loads((folder / "0.json").read_text())
  (folder / "0.json").write_text(change(record))
  return str(folder)


def _edited_source(record):
  record["source"] += "\n# edited\n"
  return json.dumps(record)


def _escaping_name(record):
  record["kernel"]["name"] = "../../escape"
  return json.dumps(record)


@pytest.mark.parametrize("change, said", [
    (_edited_source, "does not hash to its key"),
    (_escaping_name, "is not a Python identifier"),
    (lambda record: "{not json", "is not JSON"),
    (lambda record: json.dumps(dict(record, schema="other/1")), "has schema 'other/1'"),
    (lambda record: json.dumps(dict(record, kernel={"schema": record["kernel"]["schema"]})),
     "kernel"),
])
def test_a_damaged_saved_file_is_named_and_the_others_still_compile(saved, tmp_path, change,
                                                                     said):
  folder = _copy(saved, tmp_path, change)
  kernels, bad = jax_ops.saved_kernels(folder, matrix.Lowered)
  [(path, why)] = bad
  assert path == os.path.join(folder, "0.json") and said in why, why
  assert len(kernels) == len(os.listdir(saved)) - 1
  # nothing was written for the refused file outside the kernels' own folder
  assert not any("escape" in k.gk.path for k in kernels)


def test_an_empty_folder_says_how_to_fill_it(tmp_path):
  with pytest.raises(FileNotFoundError) as error:
    jax_ops.saved_kernels(str(tmp_path), matrix.Lowered)
  assert str(tmp_path) in str(error.value) and "-p bench.targets.dump_kernels" in str(error.value)


def test_every_jax_op_lowers_forward_and_backward():
  from testkit.jax_ops import gpu_ops
  gpu_ops("softmax", "layer_norm", "rms_norm", "attention", "decode_attention",
          "paged_attention")          # skipped on a JAX without them (0.12.1 and later)
  import pallas_prof
  pallas_prof.install()
  kernels, not_lowered = jax_ops.jax_op_kernels(matrix._lowered)
  assert not not_lowered, not_lowered
  ops = {k.label.split(":")[0] for k in kernels}
  assert {"layer_norm", "layer_norm backward", "rms_norm backward", "softmax", "mha",
          "mha causal backward", "mqa decode", "gqa decode", "paged_attention"} <= ops, ops
  backward = {k.gk.name for k in kernels if k.label.startswith("mha backward")}
  assert "mha_backward" in backward, backward
  # the rows' shapes are not powers of two (layer_norm's grid is the batch by the tokens)
  [ln] = [k for k in kernels if k.label.startswith("layer_norm:")]
  assert ln.gk.grid == (4, 750)
  outcome = compile_for(ln.gk, "gfx942", relower=ln.relower, use_disk_cache=False)
  assert outcome.status == "compiled", outcome.reason


def _session(worker: str):
  class Session:
    class config:
      workerinput = {"workerid": worker}

      class pluginmanager:
        get_plugin = staticmethod(lambda name: None)
  return Session


def test_xdist_workers_save_into_folders_of_their_own(saved, tmp_path, monkeypatch):
  """JAX's conformance tests run under pytest-xdist: workers numbering files in one folder
  at once would overwrite each other's <n>.json."""
  kernels, _ = jax_ops.saved_kernels(str(saved), matrix.Lowered)
  monkeypatch.setenv(dump_kernels.ENV, str(tmp_path))
  for worker in ("gw0", "gw1"):
    monkeypatch.setattr(dump_kernels, "_kept", {k.gk.key: (k.label, k.gk) for k in kernels})
    dump_kernels.pytest_sessionfinish(_session(worker), 0)
  assert sorted(os.listdir(tmp_path)) == ["gw0", "gw1"]
  counts = [len(os.listdir(tmp_path / w)) for w in ("gw0", "gw1")]
  assert counts[0] == counts[1] >= len(kernels)
  again, bad = jax_ops.saved_kernels(str(tmp_path), matrix.Lowered)
  assert not bad and {k.gk.key for k in again} >= {k.gk.key for k in kernels}
  assert len(again) == counts[0]         # the second worker's copies are the same kernels
