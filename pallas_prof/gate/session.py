"""The hooks of `pytest --pallas-prof`: record each test's kernels, gate them, say what was done.

Registered by pytest_plugin.py only when --pallas-prof (or --pallas-prof-update) is given.
Before each test JAX's caches and the kernel registry are cleared, so that the kernels
the test runs are lowered, and recorded, during that test and no other. After a test
that passed, its kernels are profiled (gate/timing.py) and compared with the test's
baseline file and with its marker's budgets; what grew fails the test with a message
naming the kernel, the equation, the user's line, before and after.
"""
from __future__ import annotations

import errno
import json
import os

import pytest

import pallas_prof
from . import baseline as baseline_files
from .compare import (Verdict, against_baseline, against_budgets, budget_errors, by_key,
                      failure_message)
from .figures import SCHEMA, Baseline, toolchain
from .timing import measure
from ..backend import kernel_registry

SHOWN = 10          # tests listed by name in the summary before "and N more"


class GateSession:
  def __init__(self, config):
    self.config = config
    self.update = bool(config.getoption("pallas_prof_update"))
    folder = config.getoption("pallas_prof_baseline") or config.getini("pallas_prof_baseline")
    self.folder = os.path.join(str(config.rootpath), os.path.expanduser(folder))
    self.tolerance = _tolerance(config)
    self.repeats = config.getoption("pallas_prof_repeats")
    self.launches = config.getoption("pallas_prof_launches")
    self.gated: list[str] = []
    self.written: list[str] = []
    self.removed: list[str] = []
    self.no_baseline: list[str] = []
    self.unchecked: list[str] = []
    self.notes: list[str] = []
    self.kept_theirs: list[str] = []

  def _path(self, item) -> str:
    return baseline_files.path_for(self.folder, item.nodeid)

  @pytest.hookimpl(wrapper=True)
  def pytest_runtest_call(self, item):
    budgets = _budgets(item)
    # the file as this test found it: one another process writes meanwhile is not replaced
    before = baseline_files.state(self._path(item))
    _start_recording()
    result = yield
    self._gate(item, kernel_registry.kernels(), budgets, before)
    return result

  def _gate(self, item, records, budgets: dict, before=None) -> None:
    path = self._path(item)
    self._remove_stale_parts(item.nodeid, path)
    # read first: a damaged baseline fails the test before its kernels are profiled (an
    # update replaces it, and says what it replaced)
    old, damage = (None, self._damage(path, item.nodeid)) if self.update \
        else (self._read(path, item.nodeid), None)
    if not records:
      self._without_kernels(item.nodeid, path, old, budgets)
      return
    try:
      figures, why_untimed = measure(records, repeats=self.repeats, launches=self.launches)
    except Exception as e:  # noqa: BLE001 - the test fails saying so, the session goes on
      _fail(f"pallas-prof: profiling the kernels of {item.nodeid} failed: "
            f"{type(e).__name__}: {e}")
    now = by_key(figures)
    tools = toolchain(",".join(sorted({k.target or "?" for k in figures})))
    verdict = Verdict()
    if self.update:
      self._write(path, Baseline(SCHEMA, item.nodeid, tools, now), before, damage)
    elif old is None:
      self.no_baseline.append(item.nodeid)
    else:
      self.gated.append(item.nodeid)
      verdict = against_baseline(old, now, tools, self.tolerance, os.path.relpath(path))
    against_budgets(budgets, now, why_untimed or "", verdict)
    item.user_properties.append(("pallas_prof", json.dumps(
        {key: k.to_dict() for key, k in now.items()}, sort_keys=True)))
    self.unchecked += [f"{item.nodeid}: {u}" for u in verdict.unchecked]
    self.notes += [f"{item.nodeid}: {n}" for n in verdict.notes]
    # a baseline is named only where one was read (a failure against it needs one)
    message = failure_message(verdict, os.path.relpath(path) if old is not None else None,
                              item.nodeid, budgets)
    if message:
      _fail(message)

  def _read(self, path: str, nodeid: str):
    try:
      return baseline_files.read(path, nodeid)
    except baseline_files.BaselineError as e:
      _fail(str(e))

  def _damage(self, path: str, nodeid: str) -> str | None:
    try:
      baseline_files.read(path, nodeid)
    except baseline_files.BaselineError as e:
      return e.problem
    return None

  def _remove_stale_parts(self, nodeid: str, path: str) -> None:
    removed, kept = baseline_files.remove_stale_parts(path)
    self.notes += [f"{nodeid}: removed {part}, a part of its baseline whose writer was stopped "
                   "before it finished (the baseline itself was not touched)" for part in removed]
    self.notes += [f"{nodeid}: {part} is a part of its baseline whose writer was stopped; it "
                   "could not be removed: delete it" for part in kept]

  def _write(self, path: str, baseline: Baseline, before=None, damage=None) -> None:
    try:
      baseline_files.write(path, baseline, expected=before)
    except baseline_files.WrittenMeanwhile:
      self.kept_theirs.append(baseline.test)
      return
    except OSError as e:
      fix = ("free space on its disk" if e.errno == errno.ENOSPC else
             f"make {self.folder} writable or give --pallas-prof-baseline a folder you can write")
      _fail(f"pallas-prof: could not write baseline {path}: {e.strerror or e}; the old file, "
            f"if any, is as it was; {fix}")
    self.written.append(baseline.test)
    if damage:
      self.notes.append(f"{baseline.test}: replaced its baseline {os.path.relpath(path)}, "
                        f"which {damage}")

  def _without_kernels(self, nodeid: str, path: str, old, budgets: dict) -> None:
    """A test that lowered no kernel: its budgets said unchecked; a baseline it left from
    when it did is removed by an update, else said."""
    if budgets:
      self.unchecked.append(f"{nodeid}: its pallas_prof budgets found no kernel (the test "
                            "lowered none)")
    if self.update and os.path.lexists(path):
      try:
        os.unlink(path)
      except OSError as e:
        _fail(f"pallas-prof: could not remove the baseline {path} of a test that runs no "
              f"kernel now: {e.strerror or e}")
      self.removed.append(nodeid)
    elif old is not None and old.kernels:
      self.notes.append(f"{nodeid}: ran no kernel; its baseline {os.path.relpath(path)} holds "
                        f"{', '.join(old.kernels)} (--pallas-prof-update removes it)")

  def pytest_terminal_summary(self, terminalreporter):
    tr = terminalreporter
    tr.section("pallas-prof")
    where = os.path.relpath(self.folder)
    if self.update:
      tr.write_line(f"wrote {len(self.written)} baseline(s) under {where}/")
      if self.removed:
        tr.write_line(f"removed {len(self.removed)} baseline(s) of tests that ran no kernel: "
                      f"{_listed(self.removed)}")
    else:
      tr.write_line(f"{len(self.gated)} test(s) gated against their baselines under {where}/ "
                    f"(tolerance {self.tolerance:g}%)")
    if self.kept_theirs:
      tr.write_line(f"not written: {len(self.kept_theirs)} baseline(s) another process wrote "
                    f"while these tests ran (theirs kept, whole): {_listed(self.kept_theirs)}; "
                    "run --pallas-prof-update again to write this run's")
    if self.no_baseline:
      tr.write_line(f"{len(self.no_baseline)} test(s) ran kernels but have no baseline, not "
                    f"gated: {_listed(self.no_baseline)}; write theirs with "
                    "--pallas-prof-update")
    for line in self.unchecked:
      tr.write_line(f"not checked: {line}")
    for line in self.notes:
      tr.write_line(f"note: {line}")


def _fail(message: str):
  """Fails the test with `message` alone: raised inside an `except`, pytest.fail would print
  the error it handles before it (Python's implicit chaining)."""
  error = pytest.fail.Exception(message, pytrace=False)
  error.__suppress_context__ = True
  raise error


def _listed(names: list[str]) -> str:
  more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
  return ", ".join(names[:SHOWN]) + more


def _tolerance(config) -> float:
  given = config.getoption("pallas_prof_tolerance")
  text = given if given is not None else config.getini("pallas_prof_tolerance")
  try:
    value = float(text)
  except (TypeError, ValueError):
    value = -1.0
  if not value >= 0:
    raise pytest.UsageError(f"pallas-prof: the tolerance {text!r} (--pallas-prof-tolerance or "
                            "the ini option pallas_prof_tolerance) is not a percentage; give "
                            "a number like 5")
  return value


def _budgets(item) -> dict:
  marker = item.get_closest_marker("pallas_prof")
  if marker is None:
    return {}
  errors = budget_errors(marker.kwargs)
  if marker.args:
    errors.insert(0, f"positional arguments {marker.args!r}: name each budget")
  if errors:
    pytest.fail(f"pallas-prof: the pallas_prof marker of {item.nodeid}: " + "; ".join(errors),
                pytrace=False)
  return dict(marker.kwargs)


def _start_recording() -> None:
  """The test's kernels, and only its, in the registry: pallas-prof installed as the
  backend (as `pallas-prof run` does), JAX's caches emptied so that every kernel the test
  runs is lowered again while it runs."""
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  pallas_prof.install()
  jax.clear_caches()
  kernel_registry.clear()
