"""How a ProfileReport prints itself, without the profiler knowing who draws it.

`print(report)`, `rich.print(report)` and the prompt's repr draw the same tables as
`pallas-prof run` (cli/terminal/profile_view.py). The profiler sits below the CLI and
imports none of it: the package's root (pallas_prof/__init__.py) installs the CLI's view
here when pallas_prof is imported, as it installs the tuner into the backend's hooks.
"""
from __future__ import annotations

from typing import Any, Iterable, Protocol


class ReportView(Protocol):
  """What draws a ProfileReport: rich's renderables, plain text, a repr of one line, the
  page a notebook shows; and a saved run's page and text (cli/report.py's RunReport, which
  the page's renderer reads, so it cannot import the renderer either)."""

  def render_profile(self, report: Any, console: Any, options: Any) -> Iterable: ...
  def profile_text(self, report: Any) -> str: ...
  def short_repr(self, report: Any) -> str: ...
  def profile_html(self, report: Any) -> str: ...
  def run_html(self, run: Any) -> str: ...
  def run_text(self, run: Any) -> str: ...


_view: ReportView | None = None


def set_view(view: ReportView) -> None:
  global _view
  _view = view


def view() -> ReportView:
  if _view is None:       # only a stand-in package that skipped pallas_prof/__init__.py
    raise RuntimeError("no view of ProfileReport is installed: import pallas_prof (its "
                       "__init__ installs the CLI's), or call "
                       "pallas_prof.profiler.presentation.set_view first")
  return _view
