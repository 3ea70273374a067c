"""Run reports and profiles as inline HTML and as text, for notebooks: what a report's
`_repr_html_` and `_repr_pretty_` give Jupyter and IPython (as JAX arrays show themselves),
and what `%load_ext pallas_prof.notebook` registers (pallas_prof/notebook.py).

In a notebook the output is report.html's page (heat on the user's lines, the generated
source, the advice) in an iframe of its own: its CSS and script stay inside it, and it
fetches nothing (the page carries its CSS, script and charts). As text it is the tables
`pallas-prof run` prints.
"""
from __future__ import annotations

import dataclasses
import html
import io
import os
import sys
import tempfile

from ...backend import kernel_registry
from .. import run_directory
from ..report import KernelEntry, Platform, RunReport
from . import render_html

# the frame grows to its page once loaded, up to this many pixels (then it scrolls)
FRAME_MAX_HEIGHT = 1400
FRAME_FIRST_HEIGHT = 800
PROFILE_SCRIPT = "pallas_prof.profile()"      # what the page's title names for a profile


def page_frame(page: str, title: str) -> str:
  """`page` (a whole HTML document) in an iframe, escaped into its srcdoc attribute."""
  grow = (f"this.style.height=Math.min(this.contentDocument.documentElement.scrollHeight+4,"
          f"{FRAME_MAX_HEIGHT})+'px'")
  return (f'<iframe class="pallas-prof-report" title="{html.escape(title)}" '
          f'style="width:100%;height:{FRAME_FIRST_HEIGHT}px;border:1px solid #d0d7de" '
          f'onload="{grow}" srcdoc="{html.escape(page, quote=True)}"></iframe>')


def run_html(run: RunReport, run_dir: str | None = None) -> str:
  """A run's page, inline; `run_dir` (RunReport.load's folder where not given) holds the
  saved kernels that the generated source and the PTX/SASS listings come from."""
  run_dir = run_dir if run_dir is not None else getattr(run, "loaded_from", None)
  name = os.path.basename(run.script or "") or "run"
  return page_frame(_render(run, run_dir), f"pallas-prof report of {name}")


def profile_html(report) -> str:
  """A ProfileReport of this process (pallas_prof.profile()) as a run's page: its kernels
  saved for the page's listings in a folder removed once the page is made."""
  with tempfile.TemporaryDirectory(prefix="pallas-prof-notebook-") as run_dir:
    run = profile_run(report, run_dir)
    return page_frame(_render(run, run_dir), "pallas-prof profile")


def _render(run: RunReport, run_dir: str | None) -> str:
  return render_html(run, run_dir)


def profile_run(report, run_dir: str) -> RunReport:
  """The run report of a ProfileReport: its kernels as the registry knows them (the call's
  file:line, the generated source, saved under `run_dir`), the profile as the run's."""
  # lazy: at the top they would load rich, jax, numpy and opentelemetry whenever this module is
  #   imported
  from .. import run_writes
  from ..run_steps.entries import kernel_entry
  records = {r.label: r for r in kernel_registry.kernels()}
  kept = [records[k.label] for k in report.kernels if k.label in records]
  run_writes.save_kernels(run_dir, kept, run_writes.RunFiles(run_dir))
  kernels = []
  for k in report.kernels:
    rec = records.get(k.label)
    if rec is None:           # a kernel of another process, or the registry was cleared
      kernels.append(KernelEntry(label=k.label, name=k.name))
      continue
    files = {what: rel for what, rel in run_directory.kernel_files(rec.label,
                                                                   rec.compiled).items()
             if os.path.isfile(os.path.join(run_dir, rel))}
    entry = kernel_entry(rec, files)
    if entry.resources is None and k.static is not None:
      # compiled by the profiler for the figures (a CPU run's records were never compiled)
      entry = dataclasses.replace(entry, resources=dict(k.static.resources))
    kernels.append(entry)
  platform = Platform(backend="gpu" if report.gpu_present else "cpu",
                      devices=(report.device.name,) if report.device is not None else ())
  return RunReport(script=PROFILE_SCRIPT, platform=platform, kernels=tuple(kernels),
                   profiles=(report,))


def run_text(run: RunReport) -> str:
  """The tables `pallas-prof run` prints, as plain text as wide as the terminal."""

  # lazy: at the top it would load numpy, rich whenever this module is imported
  from ..terminal.render import console, console_width
  out = io.StringIO()
  con = console(out)
  con.width = console_width(bool(getattr(sys.stdout, "isatty", lambda: False)()))
  con.print(run)
  return out.getvalue().rstrip("\n")
