"""report.html: one self-contained page per run (CSS, script and charts inline).

    write_html(run_dir)            -> <run_dir>/report.html from its report.json
    render_html(run, run_dir)      -> the page as a string (run: a RunReport)

model.py reads the typed run report into views, charts.py draws them as SVG, and the
Jinja2 template (autoescaping on) lays them out, so no text from the user's
program reaches the page unescaped.
"""
from __future__ import annotations

import os

from markupsafe import Markup, escape

from ... import run_layout
from ...version import __version__
from ...safe_files import write_atomic
from ..report import RunReport
from . import charts
from .model import Listing, RunView, run_view

HTML = run_layout.HTML
_HERE = os.path.dirname(os.path.abspath(__file__))


def _read(name: str) -> str:
  with open(os.path.join(_HERE, name)) as f:
    return f.read()


def _environment():
  # lazy: keeps jinja2 out of this module's import (start-up time)
  import jinja2
  env = jinja2.Environment(loader=jinja2.FileSystemLoader(_HERE), autoescape=True,
                           trim_blocks=True, lstrip_blocks=True,
                           undefined=jinja2.StrictUndefined)
  env.filters["code_breaks"] = code_breaks
  env.filters["indent_columns"] = indent_columns
  listing_template = env.get_template("listing.html.j2")

  def listing(lst: Listing, cls: str) -> Markup:
    top = max((line.weight or 0.0 for line in lst.lines), default=0.0) or 1.0
    return Markup(listing_template.render(l=lst, cls=cls, heat=lambda w: (w or 0.0) / top))

  env.globals.update(listing=listing, roofline=charts.roofline, waterfall=charts.waterfall,
                     clocks=charts.clocks)
  return env


def indent_columns(text: str) -> int:
  """The columns of a code line's leading whitespace (tabs as the browser's 8): where a
  wrapped line's continuation hangs (report.css)."""
  expanded = text.expandtabs(8)
  return len(expanded) - len(expanded.lstrip())


def code_breaks(text: str) -> Markup:
  """Code in a narrow cell, escaped, with line-break opportunities after its commas,
  dots and opening brackets (a CompilerParams line wraps between its arguments, not
  inside a name)."""
  out = str(escape(text))
  for mark in (",", ".", "(", "="):
    out = out.replace(mark, mark + "<wbr>")
  return Markup(out)


def render_view(view: RunView) -> str:
  page = _environment().get_template("report.html.j2")
  return page.render(run=view, version=__version__, css=Markup(_read("report.css")),
                     js=Markup(_read("report.js")))


def render_html(run: RunReport, run_dir: str | None) -> str:
  return render_view(run_view(run, run_dir))


def write_html(run_dir: str, run: RunReport | None = None, out: str | None = None) -> str:
  """Writes the page for the run saved in `run_dir` (its report.json read when `run` is
  not given)."""
  if run is None:
    run = RunReport.load(run_dir)
  path = out or os.path.join(run_dir, HTML)
  return write_atomic(path, render_html(run, run_dir), mode=0o644)    # whole or not at all


def write_merged_html(runs: list[tuple[str, RunReport]], names: list[str], out: str) -> str:
  """One page for the runs of several processes (processes.py orders and names them)."""
  # lazy: breaks the circle: cli.html.model imports this module
  from .model import merged_view
  view = merged_view(runs, names)
  return write_atomic(out, render_view(view), mode=0o644)


def write_or_warn(run_dir: str, run: RunReport) -> str | None:
  """`pallas-prof run`'s call: a page that fails to render costs the run nothing but
  the page, and says why on stderr; one that cannot be written raises OSError."""
  try:
    return write_html(run_dir, run)
  except OSError:
    raise                   # not written (a full disk): the caller keeps it as missing
  except Exception as e:  # noqa: BLE001 - the run's own results are already saved
    import sys
    print(f"pallas-prof: report.html not written: {type(e).__name__}: {e}", file=sys.stderr)
    return None
