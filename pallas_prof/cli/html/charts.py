"""Inline SVG charts: a roofline, a compile waterfall, clock and power over time.

Drawn in Python, so the page needs no chart library and no network. Every
text that goes into the SVG passes through markupsafe's escape.
"""
from __future__ import annotations

import math

from markupsafe import Markup, escape

from .model import Clocks, Roofline

W, H = 460, 260                      # the drawing's size in SVG units (it scales with the page)
PAD_L, PAD_R, PAD_T, PAD_B = 62, 16, 14, 40


def _svg(body: list[str], cls: str, label: str, w: int = W, h: int = H) -> Markup:
  return Markup(f'<svg class="chart {cls}" viewBox="0 0 {w} {h}" role="img" '
                f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">'
                + "".join(body) + "</svg>")


def _si(value: float, unit: str) -> str:
  """3 significant figures and an SI prefix: "43.5 GFLOP/s", "4.13 TB/s", "10 P"."""
  for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
    if abs(value) >= scale:
      return f"{float(f'{value / scale:.3g}'):g} {prefix}{unit}".rstrip()
  return f"{float(f'{value:.3g}'):g} {unit}".rstrip()


def _text(x, y, s, cls="", anchor="start") -> str:
  return (f'<text x="{x:.1f}" y="{y:.1f}" class="{cls}" text-anchor="{anchor}">'
          f"{escape(s)}</text>")


def roofline(r: Roofline) -> Markup:
  """Log-log: FLOP/s against FLOP per byte; the copy ceiling is the slanted line
  (bandwidth x intensity), each matrix ceiling a flat one, the kernel a dot."""
  x_val = r.intensity or 0.0
  y_val = r.flops_per_s or 0.0
  peak = max([v for _, v in r.matrix_flops_per_s] or [0.0])
  bw = r.copy_bytes_per_s or 0.0
  xs = [v for v in (x_val, peak / bw if bw and peak else 0) if v > 0] or [1.0]
  x_lo = 10 ** math.floor(math.log10(min(xs + [0.1])) - 0.5)
  x_hi = 10 ** math.ceil(math.log10(max(xs + [100.0])) + 0.5)
  ys = [v for v in (y_val, peak, bw * x_lo) if v > 0] or [1e9]
  y_lo = 10 ** math.floor(math.log10(min(ys)) - 0.5)
  y_hi = 10 ** math.ceil(math.log10(max(ys)) + 0.3)

  def px(x):
    return PAD_L + (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) \
        * (W - PAD_L - PAD_R)

  def py(y):
    return H - PAD_B - (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) \
        * (H - PAD_T - PAD_B)

  body = [f'<rect x="{PAD_L}" y="{PAD_T}" width="{W - PAD_L - PAD_R}" '
          f'height="{H - PAD_T - PAD_B}" class="frame"/>']
  for e in range(round(math.log10(x_lo)), round(math.log10(x_hi)) + 1):
    x = px(10 ** e)
    body.append(f'<line x1="{x:.1f}" y1="{PAD_T}" x2="{x:.1f}" y2="{H - PAD_B}" class="grid"/>')
    body.append(_text(x, H - PAD_B + 14, _si(10 ** e, ""), "tick", "middle"))
  for e in range(round(math.log10(y_lo)), round(math.log10(y_hi)) + 1):
    y = py(10 ** e)
    body.append(f'<line x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}" class="grid"/>')
    body.append(_text(PAD_L - 5, y + 4, _si(10 ** e, ""), "tick", "end"))
  body.append(_text((PAD_L + W - PAD_R) / 2, H - 6, "arithmetic intensity (FLOP / byte)",
                    "axis", "middle"))
  body.append(f'<text transform="translate(13 {(PAD_T + H - PAD_B) / 2:.0f}) rotate(-90)" '
              f'class="axis" text-anchor="middle">FLOP/s</text>')
  body.append(f'<clipPath id="plot"><rect x="{PAD_L}" y="{PAD_T}" '
              f'width="{W - PAD_L - PAD_R}" height="{H - PAD_T - PAD_B}"/></clipPath>')
  lines: list[str] = []
  legend: list[tuple[str, str]] = []
  for i, (name, flops) in enumerate(r.matrix_flops_per_s):
    knee = flops / bw if bw else x_lo
    lines.append(f'<line x1="{px(max(knee, x_lo)):.1f}" y1="{py(flops):.1f}" '
                 f'x2="{W - PAD_R}" y2="{py(flops):.1f}" class="ceiling matrix m{i}"/>')
    legend.append((f"ceiling matrix m{i}", f"{name} matrix {_si(flops, 'FLOP/s')}"))
  if bw:
    x_end = min(x_hi, (peak / bw) if peak else x_hi)
    lines.append(f'<line x1="{px(x_lo):.1f}" y1="{py(bw * x_lo):.1f}" x2="{px(x_end):.1f}" '
                 f'y2="{py(bw * x_end):.1f}" class="ceiling copy"/>')
    legend.insert(0, ("ceiling copy", f"copy {_si(bw, 'B/s')}"))
  body.append('<g clip-path="url(#plot)">' + "".join(lines) + "</g>")
  if legend:
    lx, ly = PAD_L + 8, PAD_T + 8
    body.append(f'<rect x="{lx}" y="{ly}" width="150" height="{14 * len(legend) + 8}" '
                'class="legend-bg" rx="3"/>')
    for j, (cls, label) in enumerate(legend):
      y = ly + 12 + 14 * j
      body.append(f'<line x1="{lx + 6}" y1="{y - 3}" x2="{lx + 24}" y2="{y - 3}" class="{cls}"/>')
      body.append(_text(lx + 30, y, label, "legend"))
  if x_val > 0 and y_val > 0:
    point = f"{x_val:.3g} FLOP/B, {_si(y_val, 'FLOP/s')}"
    body.append(f'<circle cx="{px(x_val):.1f}" cy="{py(y_val):.1f}" r="6" class="kernel-point">'
                f"<title>{escape(point)}</title>"
                "</circle>")
    body.append(_text(px(x_val) + 9, py(y_val) + 4, _si(y_val, "FLOP/s"), "point-label"))
  return _svg(body, "roofline", "roofline: the kernel against the measured ceilings")


def waterfall(stages: tuple[tuple[str, float], ...]) -> Markup:
  """Each stage a bar that starts where the previous one ended."""
  total = sum(ms for _, ms in stages) or 1.0
  row, top = 22, 8
  h = top + row * len(stages) + 30
  left, right = 92, 70
  span = W - left - right
  body, t = [], 0.0
  for i, (name, ms) in enumerate(stages):
    y = top + i * row
    x0 = left + t / total * span
    width = max(ms / total * span, 1.5)
    body.append(_text(left - 6, y + 14, name, "tick", "end"))
    body.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{width:.1f}" height="{row - 6}" '
                f'class="bar stage-{escape(name.replace(" ", "-"))}">'
                f"<title>{escape(f'{name}: {ms:.1f} ms')}</title></rect>")
    body.append(_text(x0 + width + 4, y + 14, f"{ms:.1f} ms", "tick"))
    t += ms
  body.append(f'<line x1="{left}" y1="{h - 26}" x2="{left + span}" y2="{h - 26}" class="grid"/>')
  body.append(_text(left, h - 12, "0", "tick", "middle"))
  body.append(_text(left + span, h - 12, f"{total:.0f} ms", "tick", "middle"))
  return _svg(body, "waterfall", "compile stages, one after another", h=h)


def clocks(c: Clocks) -> Markup:
  """SM clock (line) and power (line) over the timed window; throttled samples shaded."""
  t = [x for x in c.t_s]
  t_end = max(t[-1], 1e-6)
  top, bottom = PAD_T, H - PAD_B
  left, right = PAD_L, W - 56

  def px(x):
    return left + x / t_end * (right - left)

  clock_vals = [v for v in c.sm_clock_mhz if v is not None]
  clock_hi = max(clock_vals + [c.max_sm_clock_mhz or 0]) * 1.08 or 1.0
  power_vals = [v for v in c.power_w if v is not None]
  power_hi = max(power_vals + [c.power_limit_w or 0]) * 1.08 or 1.0

  def path(values, hi):
    pts = [f"{px(x):.1f},{bottom - v / hi * (bottom - top):.1f}"
           # strict=False: a saved run's series may lack a reading's list (() in model.py's
           # _clocks): that line is then not drawn
           for x, v in zip(t, values, strict=False) if v is not None]
    return "M" + " L".join(pts) if pts else ""

  body = [f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
          f'class="frame"/>']
  for i, reasons in enumerate(c.slowdown):
    if reasons:
      x0 = px(t[i])
      x1 = px(t[i + 1]) if i + 1 < len(t) else right
      body.append(f'<rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 2):.1f}" '
                  f'height="{bottom - top}" class="throttled">'
                  f"<title>{escape('throttled: ' + ', '.join(reasons))}</title></rect>")
  if c.max_sm_clock_mhz:
    y = bottom - c.max_sm_clock_mhz / clock_hi * (bottom - top)
    body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="limit clock"/>')
  if c.power_limit_w:
    y = bottom - c.power_limit_w / power_hi * (bottom - top)
    body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" class="limit power"/>')
  body.append(f'<path d="{path(c.sm_clock_mhz, clock_hi)}" class="series clock"/>')
  body.append(f'<path d="{path(c.power_w, power_hi)}" class="series power"/>')
  for frac in (0.0, 0.5, 1.0):
    y = bottom - frac * (bottom - top)
    body.append(_text(left - 5, y + 4, f"{frac * clock_hi:.0f}", "tick clock-tick", "end"))
    body.append(_text(right + 5, y + 4, f"{frac * power_hi:.0f}", "tick power-tick"))
  body.append(_text(left - 5, top - 3 + 0, "", "tick"))
  body.append(_text(left, H - 6, "SM clock (MHz)", "axis clock-tick"))
  body.append(_text(right, H - 6, "power (W)", "axis power-tick", "end"))
  body.append(_text((left + right) / 2, H - 22, f"{t_end * 1e3:.0f} ms of timed launches",
                    "tick", "middle"))
  return _svg(body, "clocks", "SM clock and power during the timed launches")
