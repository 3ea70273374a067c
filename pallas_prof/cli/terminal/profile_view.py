"""`pallas_prof.profile()`'s report printed as the CLI prints a run: the same tables.

    report = pallas_prof.profile()
    report                        # <ProfileReport: 1 kernel, no GPU (static weights): ...>
    print(report)                 # the kernels table, the hot equations, the notes
    rich.print(report)            # the same, in colour on a terminal

A ProfileReport knows the kernels as the profiler saw them (their static figures, and on
a GPU their timings), not the run around them (the script, its compile times): the view
here gives render.py what it reads of a run from the report alone. This module imports
neither the profiler's schema nor the run report, so that the schema can render itself
through it without an import cycle.
"""
from __future__ import annotations

import dataclasses
import io
import sys
from typing import Any

from ... import units


@dataclasses.dataclass(frozen=True)
class ProfiledKernel:
  """A kernel of the report, with the fields the kernels table reads of a run's kernel."""
  label: str
  name: str
  platform: str
  grid: tuple[int, ...] = ()
  launch_grid: tuple[int, ...] = ()
  num_warps: int | None = None
  num_stages: int | None = None
  resources: dict[str, Any] | None = None
  compile: Any = None               # the profile has no compile times
  cpu_launches: int | None = None   # nor the interpreter's launch count
  warnings: tuple[str, ...] = ()
  workarounds: tuple[str, ...] = ()  # a run's Triton workarounds (none in a profile)

  @property
  def spills(self) -> int | None:
    return units.spills(self.resources)


class ProfileView:
  """A ProfileReport seen as render.render_report sees a run."""

  def __init__(self, report):
    self.report = report
    self.profiles = (report,)
    self.profile = report
    self.notes: tuple[str, ...] = ()
    self.errors: tuple = ()
    platform = "gpu" if report.gpu_present else "cpu"
    self.kernels = tuple(
        ProfiledKernel(label=k.label, name=k.name, platform=platform,
                       grid=tuple(k.static.grid) if k.static else (),
                       launch_grid=tuple(k.static.launch_grid) if k.static else (),
                       num_warps=k.static.num_warps if k.static else None,
                       num_stages=k.static.num_stages if k.static else None,
                       resources=dict(k.static.resources) if k.static else None)
        for k in report.kernels)
    self.title = title(report)

  def kernel_profile(self, label: str, profile=None):
    for k in self.report.kernels:
      if k.label == label:
        return k
    return None


def title(report) -> str:
  n = len(report.kernels)
  where = (f"on GPU {report.device.index} ({report.device.name})" if report.device is not None
           else "on GPU" if report.gpu_present else "no GPU: static weights")
  return f"profile of {n} kernel{'' if n == 1 else 's'}, {where}"


def render_profile(report, console, options):
  """What ProfileReport.__rich_console__ yields."""
  from .render import render_report
  yield from render_report(ProfileView(report), console, options)


def profile_text(report) -> str:
  """The tables as plain text, as wide as the terminal (COLUMNS): str(report)."""
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
  from ..html import inline
  return inline.profile_html(report)


def run_html(run) -> str:
  """A saved run (RunReport) as a notebook shows it: its report.html page, inline."""
  from ..html import inline
  return inline.run_html(run)


def run_text(run) -> str:
  """A saved run as an IPython prompt shows it: the tables `pallas-prof run` prints."""
  from ..html import inline
  return inline.run_text(run)
