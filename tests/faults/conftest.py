"""The fault-injection suite: every test names the faults it injects."""
from __future__ import annotations

import pytest

from .inject import KINDS


def pytest_collection_modifyitems(config, items):
  for item in items:
    for mark in item.iter_markers("fault"):
      unknown = [k for k in mark.args if k not in KINDS]
      if unknown:
        raise pytest.UsageError(f"{item.nodeid}: unknown fault kind(s) {unknown}; "
                                f"tests/faults/inject.py KINDS lists them")


def pytest_itemcollected(item):
  # the kinds travel with the test's report (user_properties cross pytest-xdist's workers),
  # so that tools/fault_table.py can count them on the controller
  kinds = [k for mark in item.iter_markers("fault") for k in mark.args]
  if kinds:
    item.user_properties.append(("fault_kinds", kinds))
