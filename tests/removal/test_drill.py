"""The removal drill: the suite's backend, profiler and CLI tests (a selection, below) run
as when JAX has removed its Triton backend, and pass.

A copy of the project gets `blocker.py` as its `sitecustomize.py`, so that every Python
process with the copy's root on its path (pytest, and the subprocesses the tests start:
the CLI, the compile worker, the profiler's children) finds `jax._src.pallas.triton` and
`jax.experimental.pallas.triton` unimportable. The drill is shown to fail when the shim
(pallas_prof.triton) is gone or stands on JAX's module, and when a module of pallas-prof
imports JAX's Triton backend unconditionally.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from testkit.helpers import JAX_TRITON_GONE

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
HERE = "tests/removal/test_without_jax_triton.py"

# Chosen for what JAX's Triton backend could reach, in about two minutes on two cores:
# - what the removal changes: the shim against JAX's module and its primitives under both
#   interpreters and sm_90 (test_triton_shim), pallas-prof's own path importing nothing of
#   JAX's backend (test_own_path), the errors once it is gone (test_without_jax_triton),
#   import errors (test_structure, which reads the source only, is left out);
# - kernels written against plgpu in the backend's tests: loads, stores and atomics with
#   masks and options, reuse of loads across atomics and barriers (test_memory), the same
#   under bounds checking (test_bounds_paths), atomic tickets deciding a launch order
#   (test_launch_order), jaxlib's payload of an atomic kernel (test_jaxlib_payload), the
#   rules listing and its limits (test_rule_limits);
# - the profiler on the CPU (test_runner: the replay and its children; test_profile;
#   test_correlate: known-answer correlation of the generated code to equations) and the
#   CLI (test_cli: run, show, report, eject, the failing kernel's report; test_errors:
#   the error reports and their rule names).
SELECTION = (
    "tests/test_import_errors.py", HERE,
    "tests/backend/test_triton_shim.py", "tests/backend/test_own_path.py",
    "tests/backend/lowering/rules/test_memory.py", "tests/backend/lowering/test_bounds_paths.py",
    "tests/backend/lowering/test_launch_order.py", "tests/backend/running/test_jaxlib_payload.py",
    "tests/backend/lowering/rules/test_rule_limits.py", "tests/profiler/timing/test_runner.py",
    "tests/profiler/test_profile.py", "tests/profiler/static/test_correlate.py",
    "tests/cli/test_cli.py", "tests/instrument/test_errors.py",
)
# the only reasons a test may skip in the drill: JAX's module gone (tests comparing with
# it), a GPU's presence or absence, and a JAX without the deprecation (jax < 0.11)
ALLOWED_SKIPS = (JAX_TRITON_GONE, "needs an NVIDIA GPU", "asserts what a machine without a GPU",
                 "no jax-pallas-triton deprecation")


def copy_of_the_project(into: pathlib.Path) -> pathlib.Path:
  """The package, its tests (with testkit, the code they share with bench) and examples, with
  JAX's Triton backend made unimportable."""
  root = into / "project"
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
  for name in ("pallas_prof", "tests", "testkit", "examples"):
    shutil.copytree(ROOT / name, root / name, ignore=ignore)
  for name in ("pyproject.toml", "README.md"):
    shutil.copy(ROOT / name, root / name)
  shutil.copy(ROOT / "tests" / "removal" / "blocker.py", root / "sitecustomize.py")
  return root


def drill(root: pathlib.Path, selection, timeout: int) -> tuple[subprocess.CompletedProcess, dict]:
  """Runs pytest on `selection` in the copy at `root`: (the run, {test id: outcome})."""
  report = root / "drill.xml"
  env = dict(os.environ, PYTHONPATH=str(root), PALLAS_PROF_CACHE_DIR=str(root / "cache"),
             PALLAS_PROF_NO_RECEIVER_INSTALL="1")
  env.pop("PYTEST_XDIST_WORKER", None)
  workers = ["-n", "2"] if _has_xdist() else []
  done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         *workers, "-rs", f"--junitxml={report}", *selection],
                        capture_output=True, text=True, cwd=root, env=env, timeout=timeout)
  return done, _outcomes(report)


def _has_xdist() -> bool:
  import importlib.util
  return importlib.util.find_spec("xdist") is not None


def _outcomes(report: pathlib.Path) -> dict[str, tuple[str, str]]:
  """{file::test: (passed|failed|error|skipped, message)} from pytest's JUnit XML."""
  if not report.exists():
    return {}
  out = {}
  for case in ElementTree.parse(report).iter("testcase"):
    module = case.get("classname", "")
    name = f"{module.replace('.', '/')}.py::{case.get('name')}" if module else case.get("name")
    outcome, message = "passed", ""
    for child in case:
      if child.tag in ("failure", "error", "skipped"):
        outcome = {"failure": "failed"}.get(child.tag, child.tag)
        message = child.get("message", "")
        break
    out[name] = (outcome, message)
  return out


@pytest.mark.slow
def test_the_suite_passes_without_jax_triton_backend(tmp_path):
  root = copy_of_the_project(tmp_path)
  done, outcomes = drill(root, SELECTION, timeout=1500)
  tail = (done.stdout[-6000:] + done.stderr[-3000:])
  assert done.returncode == 0, tail
  counts = {k: sum(1 for o, _ in outcomes.values() if o == k)
            for k in ("passed", "failed", "error", "skipped")}
  assert counts["failed"] == counts["error"] == 0, tail
  # every selected file ran, and its tests passed but for the allowed skips
  for path in SELECTION:
    ran = [o for name, (o, _) in outcomes.items() if name.startswith(path + "::")]
    assert ran and "passed" in ran, (path, tail)
  odd = {n: m for n, (o, m) in outcomes.items()
         if o == "skipped" and not any(reason in m for reason in ALLOWED_SKIPS)}
  assert not odd, odd
  here = {n: o for n, (o, _) in outcomes.items() if n.startswith(HERE + "::")}
  assert here and set(here.values()) == {"passed"}, here
  print(f"removal drill: {counts}")


# Each way pallas-prof could still need JAX's Triton backend, planted in the copy: the
# drill (on the files that use the shim most, to keep it short) must fail.
def _remove_the_shim(root):
  (root / "pallas_prof" / "triton.py").unlink()


def _the_shim_stands_on_jax_module(root):
  (root / "pallas_prof" / "triton.py").write_text(
      "from jax.experimental.pallas.triton import *  # noqa: F401,F403\n"
      "from .backend.pallas_call_rule import CompilerParams  # noqa: F401\n")


def _compat_imports_jax_triton_backend(root):
  path = root / "pallas_prof" / "backend" / "compat" / "mlir_lowering.py"
  source = path.read_text()
  anchor = "from jax._src.pallas import core as pallas_core\n"
  assert anchor in source
  path.write_text(source.replace(
      anchor, anchor + "from jax._src.pallas.triton import core as _triton_core  # noqa: F401\n"))


def _the_rules_listing_imports_jax_primitives(root):
  path = root / "pallas_prof" / "backend" / "lowering" / "rules" / "table.py"
  source = path.read_text()
  anchor = "def all_rules() -> dict[object, Callable]:\n"
  assert anchor in source
  path.write_text(source.replace(anchor, anchor + "  import importlib\n"
                                 "  [importlib.import_module(m) for m, _, _ in list(_DEFERRED)]\n"))


BLOCKED = "(the removal drill: JAX without its Triton backend)"   # blocker.py's words
PLANTS = {"remove_the_shim": (_remove_the_shim, "cannot import name 'triton' from 'pallas_prof'"),
          "the_shim_stands_on_jax_module": (_the_shim_stands_on_jax_module, BLOCKED),
          "compat_imports_jax_triton_backend": (_compat_imports_jax_triton_backend, BLOCKED),
          "the_rules_listing_imports_jax_primitives": (_the_rules_listing_imports_jax_primitives,
                                                       BLOCKED)}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PLANTS))
def test_the_drill_fails_when_pallas_prof_needs_jax_triton_backend(tmp_path, name):
  plant, cause = PLANTS[name]
  root = copy_of_the_project(tmp_path)
  plant(root)
  done, outcomes = drill(root, (HERE, "tests/backend/test_triton_shim.py"), timeout=600)
  assert done.returncode != 0, done.stdout[-3000:]
  failed = {n: m for n, (o, m) in outcomes.items() if o in ("failed", "error")}
  assert failed, done.stdout[-3000:]
  assert cause in done.stdout, done.stdout[-3000:]
