"""The suite's setup: a private cache, fresh random inputs, the run's seed named in reports,
GPU skips and per-test guards. It lives in testkit/suite_setup.py, which bench/tests' conftest
registers too (bench never imports tests/); pytest takes hooks and fixtures from the names a
conftest holds, so this one holds them."""
from __future__ import annotations

from testkit.suite_setup import (  # noqa: F401
    SEED, SEED_ENV, SEED_WORDS, _install_state_kept, _no_inherited_terminal_size,
    pytest_collection_modifyitems, pytest_report_header, pytest_runtest_makereport,
    pytest_terminal_summary, rng)
