"""The report's probe table (`pallas-prof run --probes`): per region of the probed
variant its share of the cycles, the cycles and ns per warp (median and spread over
the sampled CTAs), the PC samples' share of the same equations beside it; then the
grid, the distortion and, in words, what disagrees or should not be trusted."""
from __future__ import annotations

from rich.text import Text

from ...profiler.probes.probe_results import footer_lines, table_rows
from . import layout
from .layout import Col


def probe_lines(s, width: int) -> list:
  """The table and the lines under it, for the row `s` (a summary.KernelSummary); [] when
  the kernel was not probed."""
  pr = s.probes
  if pr is None:
    return []
  names, rows, basis = table_rows(pr)
  cols = [Col(name, right=name != "region", **({"give": 2, "least": 16} if name == "region"
                                                 else {})) for name in names]
  title = (f"probes of {s.label}: per warp, {pr.sampled_programs:,} of {pr.programs:,} "
           f"CTAs x {pr.sampled_warps} of {pr.num_warps} warps"
           + (f"; {basis} of the same equations: where warps stood, and as charged"
              if basis else ""))
  out: list = [layout.table(title, cols, rows, width)]
  out += [Text(f"  {text}", style="bold" if stress else "") for text, stress in footer_lines(pr)]
  return out
