"""`%load_ext pallas_prof.notebook`: pallas-prof's reports shown inline in Jupyter and IPython.

Once loaded, a RunReport (`RunReport.load(run_dir)`) and a ProfileReport
(`pallas_prof.profile()`) at the end of a cell show report.html's panel in a notebook
and the CLI's tables in a terminal IPython (pallas_prof/cli/notebook.py; docs/notebooks.md).
"""
from __future__ import annotations


def load_ipython_extension(ipython) -> None:
  from .cli.notebook import register
  register(ipython)
