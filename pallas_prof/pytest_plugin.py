"""pytest's `--pallas-prof`: gate the Pallas kernels each test runs (docs/pytest.md).

Registered through the `pytest11` entry point, so pytest loads this module in every
project where pallas-prof is installed: it declares the options and the marker and
imports nothing else (no JAX, no Triton). The gate itself (pallas_prof/gate/) is
loaded only when --pallas-prof or --pallas-prof-update is given.
"""
from __future__ import annotations

DEFAULT_BASELINE = ".pallas-prof/baseline"
DEFAULT_TOLERANCE = "5"
MARKER = ("pallas_prof(max_time_us=None, no_spills=False, max_registers=None, "
          "max_shared_bytes=None, max_instructions=None): budgets for the Pallas kernels "
          "this test runs, checked with --pallas-prof")


def pytest_addoption(parser):
  group = parser.getgroup("pallas-prof", "gate the Pallas kernels each test runs")
  group.addoption("--pallas-prof", action="store_true", dest="pallas_prof",
                  help="profile the kernels each test runs and compare them with the test's "
                       "baseline and its pallas_prof marker's budgets")
  group.addoption("--pallas-prof-update", action="store_true", dest="pallas_prof_update",
                  help="write each test's baseline from this run (implies --pallas-prof)")
  group.addoption("--pallas-prof-baseline", dest="pallas_prof_baseline", metavar="DIR",
                  help=f"the baselines' folder, relative to the rootdir (default "
                       f"{DEFAULT_BASELINE}; ini: pallas_prof_baseline)")
  group.addoption("--pallas-prof-tolerance", dest="pallas_prof_tolerance", metavar="PCT",
                  help=f"growth in percent allowed before a figure fails (default "
                       f"{DEFAULT_TOLERANCE}; ini: pallas_prof_tolerance)")
  group.addoption("--pallas-prof-repeats", dest="pallas_prof_repeats", type=int, default=3,
                  metavar="N", help="GPU only: replays of each kernel whose medians give its "
                                    "time and noise (default 3)")
  group.addoption("--pallas-prof-launches", dest="pallas_prof_launches", type=int,
                  default=100, metavar="N",
                  help="GPU only: timed launches in each replay (default 100)")
  parser.addini("pallas_prof_baseline", "pallas-prof's baselines folder",
                default=DEFAULT_BASELINE)
  parser.addini("pallas_prof_tolerance", "pallas-prof's growth allowed, in percent",
                default=DEFAULT_TOLERANCE)


def pytest_configure(config):
  config.addinivalue_line("markers", MARKER)
  if config.getoption("pallas_prof") or config.getoption("pallas_prof_update"):
    # lazy: at the top it would load pytest whenever this module is imported
    from .gate.session import GateSession
    config.pluginmanager.register(GateSession(config), "pallas-prof-gate")
