"""`pallas_prof.profile()`'s report printed as the CLI prints a run: the same tables.

    report = pallas_prof.profile()
    report                        # <ProfileReport: 1 kernel, no GPU (static weights): ...>
    print(report)                 # the kernels table, the hot equations, the notes
    rich.print(report)            # the same, in colour on a terminal

A ProfileReport knows the kernels as the profiler saw them (their static figures, and on
a GPU their timings), not the run around them (the script, its compile times): the view
here gives render.py what it reads of a run from the report alone: the kernels' rows
(summary.profile_summary). The schema renders itself through this module by
profiler/presentation.py's view, never by importing it.
"""
from __future__ import annotations

import io
import sys

from ..summary import profile_summary


class ProfileView:
  """A ProfileReport seen as render.render_report sees a run: its rows are made from the
  profile alone (summary.profile_summary)."""

  def __init__(self, report):
    self.report = report
    self.profiles = (report,)
    self.profile = report
    self.notes: tuple[str, ...] = ()
    self.errors: tuple = ()
    self.summary_rows = tuple(profile_summary(k, report) for k in report.kernels)
    self.title = title(report)


def title(report) -> str:
  n = len(report.kernels)
  where = (f"on GPU {report.device.index} ({report.device.name})" if report.device is not None
           else "on GPU" if report.gpu_present else "no GPU: static weights")
  return f"profile of {n} kernel{'' if n == 1 else 's'}, {where}"


def render_profile(report, console, options):
  """What ProfileReport.__rich_console__ yields."""
  # lazy: at the top it would load numpy, rich whenever this module is imported
  from .render import render_report
  yield from render_report(ProfileView(report), console, options)


def profile_text(report) -> str:
  """The tables as plain text, as wide as the terminal (COLUMNS): str(report)."""
  # lazy: at the top it would load numpy, rich whenever this module is imported
  from .render import console, console_width
  out = io.StringIO()
  con = console(out)
  con.width = console_width(bool(getattr(sys.stdout, "isatty", lambda: False)()))
  con.print(report)
  return out.getvalue().rstrip("\n")


def short_repr(report) -> str:
  """<ProfileReport: 2 kernels, no GPU: static weights: a#1f22e0, b#77aa01>"""
  labels = []
  for k in report.kernels[:4]:
    try:
      median = k.runtime.median_s if k.runtime is not None else None
    except ValueError:            # runtime stats without their headline timing
      median = None
    labels.append(k.label + (f" {median * 1e6:.1f} µs" if median is not None else ""))
  more = f", +{len(report.kernels) - 4} more" if len(report.kernels) > 4 else ""
  return f"<ProfileReport: {title(report).removeprefix('profile of ')}: {', '.join(labels)}{more}>"


def profile_html(report) -> str:
  """The report as a notebook shows it: a run's page, inline (html/inline.py)."""
  # lazy: at the top it would load markupsafe whenever this module is imported
  from ..html import inline
  return inline.profile_html(report)


def run_html(run) -> str:
  """A saved run (RunReport) as a notebook shows it: its report.html page, inline."""
  # lazy: at the top it would load markupsafe whenever this module is imported
  from ..html import inline
  return inline.run_html(run)


def run_text(run) -> str:
  """A saved run as an IPython prompt shows it: the tables `pallas-prof run` prints."""
  # lazy: at the top it would load markupsafe whenever this module is imported
  from ..html import inline
  return inline.run_text(run)
