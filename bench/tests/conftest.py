"""bench/tests' setup is the suite's (testkit/suite_setup.py, which tests/conftest.py registers):
the same private cache, seeded inputs, GPU skips and per-test guards. bench imports testkit,
never tests/.

Run alone (`pytest bench/tests`) this is the only conftest pytest reads at the top, so it
registers the suite's hooks; run with tests/ (the test command), tests/conftest.py does,
and registering them here too would print the seed twice and mark each GPU test twice."""
from __future__ import annotations

from testkit import suite_setup as suite
from testkit.suite_setup import _install_state_kept, _no_inherited_terminal_size, rng  # noqa: F401


def _suite_registers_its_hooks(config) -> bool:
  """Whether another conftest (tests/conftest.py) holds the suite's own hooks: this one holds
  wrappers of them, never the same functions."""
  return any(getattr(plugin, "pytest_report_header", None) is suite.pytest_report_header
             for plugin in config.pluginmanager.get_plugins())


def pytest_report_header(config):
  if not _suite_registers_its_hooks(config):
    return suite.pytest_report_header(config)
  return None


def pytest_collection_modifyitems(config, items):
  if not _suite_registers_its_hooks(config):
    suite.pytest_collection_modifyitems(config, items)
