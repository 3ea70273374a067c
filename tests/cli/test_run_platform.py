"""The run's platform record survives a run stopped part way through an import."""
import importlib.metadata
import sys
import types

from pallas_prof.cli.run_steps import entries


def test_the_platform_is_recorded_after_an_import_of_triton_was_interrupted(monkeypatch):
  # what a Ctrl-C inside `import triton` leaves: the package gone from sys.modules, a
  # half-made submodule still there (a new `import triton` then fails on it)
  monkeypatch.delitem(sys.modules, "triton", raising=False)
  monkeypatch.setitem(sys.modules, "triton.language", types.ModuleType("triton.language"))
  platform = entries.platform()
  assert platform.triton == importlib.metadata.version("triton")
  assert "triton" not in sys.modules           # no new import was tried


def test_the_platform_names_the_triton_the_run_imported(monkeypatch):
  # a triton put first on PYTHONPATH (the GPU machine's carried one) has no package record;
  # the module the run used is the one named
  fake = types.ModuleType("triton")
  fake.__version__ = "9.9.9"
  monkeypatch.setitem(sys.modules, "triton", fake)
  assert entries.platform().triton == "9.9.9"
