"""A tuning file's entry still applies to a kernel whose only change is where its lines
are: each line of the generated source names the user's line it came from, so an edit above
the kernel (advice's split of another kernel in the file, a docstring) changed its source's
sha256, and a committed file's entry stopped applying without a word (tune/tuned_file.py)."""
from __future__ import annotations

import importlib.util
import warnings

import pytest

import pallas_prof
from pallas_prof.backend.options import TunedSettings as S
from pallas_prof.tune import tuned_file, validate
from pallas_prof.tune.tuned_file import TuningEntry, TuningFile
from testkit.examples import lowered_record, sds

KERNEL = '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_kernel(x_ref, o_ref):
  o_ref[...] = jnp.exp(x_ref[...]) * 2.0


@jax.jit
def scale(x):
  spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
  return pl.pallas_call(scale_kernel, grid=(x.shape[0] // 8,), in_specs=[spec],
                        out_specs=spec, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
'''
# the same kernel four lines further down, as an edit above it leaves it
MOVED = '"""A docstring added above."""\n\n\ndef helper():\n  return 1\n' + KERNEL.replace(
    "import jax\n", "", 1).replace("from jax", "import jax\nfrom jax", 1)
CHANGED = KERNEL.replace("* 2.0", "* 3.0")
TARGET, GPU = ("cuda", 90), "NVIDIA H200"
BEST = S(8, 3, 4, False)


def _lowered(tmp_path, name: str, text: str, rows: int = 32):
  path = tmp_path / f"{name}.py"
  path.write_text(text)
  spec = importlib.util.spec_from_file_location(f"tuned_moves_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return lowered_record(module.scale, sds((rows, 128), "float32")).generated


@pytest.fixture
def kernels(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  pallas_prof.install()
  try:
    yield {**{name: _lowered(tmp_path, name, text)
              for name, text in (("first", KERNEL), ("moved", MOVED), ("changed", CHANGED))},
           # the same code on a longer array: a grid of 64, which a comment alone says
           "longer": _lowered(tmp_path, "longer", KERNEL, rows=512),
           "warps": _lowered(tmp_path, "warps", KERNEL.replace(
               "out_shape=jax", "compiler_params=pallas_prof.CompilerParams(num_warps=8), "
               "out_shape=jax").replace("import jax\n", "import jax\nimport pallas_prof\n", 1))}
  finally:
    pallas_prof.uninstall()


def _file(tmp_path, gk, *, code: bool) -> str:
  path = str(tmp_path / "tuning.json")
  TuningFile.of([TuningEntry(gk.name, gk.key, TARGET, GPU, BEST, S(4, 3),
                             code=gk.code_key if code else None)]).write(path)
  return path


def _choice(path, gk):
  tuned_file.forget()
  validate._warned.clear()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    best = tuned_file.choice(path, gk, TARGET, GPU)
  return best, [str(w.message) for w in caught if w.category is validate.TuningFileWarning]


def test_the_moved_kernel_has_another_source_and_the_same_code(kernels):
  first, moved, changed = kernels["first"], kernels["moved"], kernels["changed"]
  assert first.source != moved.source and first.key != moved.key      # its lines moved
  assert first.code_key == moved.code_key
  assert changed.code_key != first.code_key
  # another grid, or other settings, is another entry: a choice timed at one does not say
  # what is fastest at the other, nor overrides a num_warps the user wrote
  longer, warps = kernels["longer"], kernels["warps"]
  assert longer.grid != first.grid and longer.code_key != first.code_key
  assert warps.num_warps == 8 and warps.code_key != first.code_key


def test_an_entry_applies_to_its_kernel_moved_in_its_file(kernels, tmp_path):
  path = _file(tmp_path, kernels["first"], code=True)
  assert _choice(path, kernels["first"]) == (BEST, [])
  assert _choice(path, kernels["moved"]) == (BEST, [])


def test_an_entry_for_other_code_is_not_applied_and_is_said(kernels, tmp_path):
  path = _file(tmp_path, kernels["first"], code=True)
  best, said = _choice(path, kernels["changed"])
  assert best is None
  [text] = said
  assert "no entry is for this scale_kernel" in text and "cuda:90 on NVIDIA H200" in text, text
  assert "default config" in text and "pallas-prof tune" in text, text


def test_an_entry_written_before_code_was_saved_still_applies_where_its_source_is(kernels,
                                                                                 tmp_path):
  """Files written before `code` match by source alone: the moved kernel is said, not
  silently left at its default."""
  path = _file(tmp_path, kernels["first"], code=False)
  assert "code" not in open(path).read()
  assert _choice(path, kernels["first"]) == (BEST, [])
  best, said = _choice(path, kernels["moved"])
  assert best is None and len(said) == 1 and "scale_kernel" in said[0], said


def test_an_entry_for_another_gpu_says_nothing(kernels, tmp_path):
  """Entries for other GPUs are for other machines: not this kernel's stale entry."""
  path = _file(tmp_path, kernels["first"], code=True)
  tuned_file.forget()
  validate._warned.clear()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert tuned_file.choice(path, kernels["changed"], TARGET, "NVIDIA A100") is None
  assert not caught


def test_a_bad_code_is_named_and_the_entry_ignored(tmp_path):
  import json
  path = tmp_path / "tuning.json"
  entry = TuningEntry("k", "ab" * 32, TARGET, GPU, BEST, S(4, 3), code="ab" * 32).to_dict()
  entry["code"] = "not a sha"
  path.write_text(json.dumps({"version": 4, "kernels": [entry]}))
  tuning, problems = TuningFile.read(str(path))
  assert tuning.entries == ()
  assert problems == ["entry 0 ('k'): code 'not a sha' is not a sha256 in hex"], problems
