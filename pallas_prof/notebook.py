"""`%load_ext pallas_prof.notebook`: run reports and profiles shown inline in Jupyter and
IPython (docs/notebooks.md).

    %load_ext pallas_prof.notebook
    RunReport.load("pallas-prof-out/20261204-101500")   # a saved run: its report.html panel
    pallas_prof.profile()                               # this process's kernels: the same

The reports show themselves without it (their `_repr_html_` and `_repr_pretty_`, drawn by
cli/html/inline.py); the extension registers the same drawings as IPython formatters by
type, for a session that loaded it before the reports had the methods.
"""
from __future__ import annotations

from .cli.html.inline import (FRAME_FIRST_HEIGHT, FRAME_MAX_HEIGHT, PROFILE_SCRIPT,  # noqa: F401
                              page_frame, profile_html, profile_run, run_html, run_text)
from .cli.report import RunReport
from .profiler.schema import ProfileReport


def register(ipython) -> None:
  """IPython's formatters for both reports: HTML in a notebook, the tables as text."""
  formatters = ipython.display_formatter.formatters
  formatters["text/html"].for_type(RunReport, run_html)
  formatters["text/html"].for_type(ProfileReport, profile_html)
  formatters["text/plain"].for_type(RunReport, lambda r, p, cycle: p.text(run_text(r)))
  formatters["text/plain"].for_type(ProfileReport, lambda r, p, cycle: p.text(str(r)))


def load_ipython_extension(ipython) -> None:
  register(ipython)
