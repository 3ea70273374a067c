"""The report's probe table (`pallas-prof run --probes`): per region of the probed
variant its share of the cycles, the cycles and ns per warp (median and spread over
the sampled CTAs), the PC samples' share of the same equations beside it; then the
grid, the distortion and, in words, what disagrees or should not be trusted."""
from __future__ import annotations

from rich.text import Text

from . import layout
from .layout import Col


def probe_lines(report, kernel, width: int) -> list:
  """The table and the lines under it; [] when the kernel was not probed."""
  kp = report.kernel_profile(kernel.label)
  pr = getattr(kp, "probes", None) if kp is not None else None
  if pr is None:
    return []
  rec = pr.reconciliation
  sampled = {r.label: (r.stood_share, r.sampling_share) for r in rec.regions} \
      if rec is not None else {}
  basis = rec.basis if rec is not None and rec.basis != "static" else None
  cols = [Col("share", right=True), Col("region", give=2, least=16),
          Col("cycles p50", right=True), Col("p10–p90", right=True), Col("ns p50", right=True)]
  if basis:
    cols += [Col("samples at", right=True), Col("charged", right=True)]
  rows = []
  for r in pr.regions:
    row = [f"{100 * r.share:.1f}%", r.label, f"{r.cycles_median:,.0f}",
           f"{r.cycles_p10:,.0f}–{r.cycles_p90:,.0f}", f"{r.ns_median:,.0f}"]
    if basis:
      at, weight = sampled.get(r.label, (None, None))
      row += ["" if at is None else f"{100 * at:.1f}%",
              "" if weight is None else f"{100 * weight:.1f}%"]
    rows.append(row)
  title = (f"probes of {kernel.label}: per warp, {pr.sampled_programs:,} of {pr.programs:,} "
           f"CTAs x {pr.sampled_warps} of {pr.num_warps} warps"
           + (f"; {basis} of the same equations: where warps stood, and as charged"
              if basis else ""))
  out: list = [layout.table(title, cols, rows, width)]
  out.append(Text(f"  {pr.sms} SMs, up to {pr.max_concurrent_ctas} sampled CTAs at once "
                  f"(~{pr.waves:.1f} waves), CTA median {pr.cta_ns_median / 1e3:.2f} µs, "
                  f"sampled CTAs span {pr.span_ns / 1e3:.1f} µs"))
  d = pr.distortion
  if d is not None:
    parts = []
    if d.runtime_pct is not None:
      parts.append(f"runtime {d.runtime_plain_s * 1e6:.1f} → {d.runtime_probed_s * 1e6:.1f} µs "
                   f"({d.runtime_pct:+.1f}%)")
    parts.append(f"registers {d.registers_plain} → {d.registers_probed}")
    if d.sass_pct is not None:
      parts.append(f"SASS {d.sass_plain} → {d.sass_probed} ({d.sass_pct:+.1f}%; "
                   f"{d.sass_probe_instructions} of them the probes')")
    out.append(Text("  distortion: " + ", ".join(parts)))
    out += [Text(f"  distrust: {why}", style="bold") for why in d.distrust]
  if rec is not None:
    out += [Text(f"  disagrees: {why}") for why in rec.disagreements]
  out += [Text(f"  note: {n}") for n in pr.notes]
  return out
