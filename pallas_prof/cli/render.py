"""The run report, rendered with rich (plain text when stdout is not a terminal)."""
from __future__ import annotations

import linecache
import os
import sys

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

# a compile that waited this long for the compile worker says so in the kernels table
_WAIT_WORTH_SHOWING_MS = 10


def console() -> Console:
  if sys.stdout.isatty():
    return Console()
  return Console(width=160, no_color=True, highlight=False, soft_wrap=False)


def _ms(seconds) -> str:
  return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def _us(seconds) -> str:
  return "-" if seconds is None else f"{seconds * 1e6:.1f}"


def _bytes(n) -> str:
  if n is None:
    return "-"
  for unit in ("B", "KiB", "MiB", "GiB"):
    if abs(n) < 1024 or unit == "GiB":
      return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
    n /= 1024
  return str(n)


def _rate(value, unit) -> str:
  if value is None:
    return "-"
  for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
    if value >= scale:
      return f"{value / scale:.1f} {prefix}{unit}"
  return f"{value:.0f} {unit}"


def _profile_by_label(run: dict, prof: dict | None = None) -> dict[str, dict]:
  prof = prof if prof is not None else (run.get("profile") or {})
  return {k["label"]: k for k in prof.get("kernels", [])}


def _device_profiles(run: dict) -> list[dict]:
  profiles = run.get("profiles") or ([run["profile"]] if run.get("profile") else [])
  return profiles or [{}]


def _timing_cells(rt: dict) -> tuple[str, str]:
  """The headline (cold) median [p10-p90], and the sustained (back-to-back) median.
  A report from before the two modes (no "mode") timed back-to-back: marked so."""
  if not rt:
    return "-", "-"
  timing = f"{_us(rt.get('median_s'))} [{_us(rt.get('p10_s'))}-{_us(rt.get('p90_s'))}]"
  if rt.get("mode", "sustained") != "cold":
    timing += " (sustained)"
  sustained = rt.get("sustained") or {}
  return timing, _us(sustained.get("median_s"))


def kernel_table(run: dict) -> Table:
  device_profiles = _device_profiles(run)
  gpu = any(p.get("gpu_present") for p in device_profiles)
  several = len(device_profiles) > 1
  insitu = any(k.get("insitu") for p in device_profiles for k in p.get("kernels", []))
  t = Table(title="kernels", box=box.SIMPLE_HEAVY, title_justify="left", show_lines=False)
  columns = [("kernel", "left")] + ([("device", "left")] if several else [])
  for col, justify in (*columns, ("grid", "left"), ("warps/stages", "right"),
                       ("compile ms (ttir/ttgir/llir/ptx/cubin)", "right"), ("smem", "right"),
                       ("regs", "right"), ("spills", "right")):
    t.add_column(col, justify=justify)
  if gpu:
    for col in ("cold median µs [p10-p90]", "sustained µs", "achieved", "% ceiling", "bound",
                "GPU during timing"):
      t.add_column(col, justify="right" if col != "GPU during timing" else "left")
    if insitu:
      t.add_column("in the program (CUPTI)", justify="right")
  else:
    t.add_column("launches (CPU)", justify="right")
  for k, prof in ((k, prof) for k in run.get("kernels", []) for prof in device_profiles):
    p = _profile_by_label(run, prof).get(k["label"], {})
    comp = k.get("compile") or {}
    stages = comp.get("stages_ms") or {}
    stage_text = "/".join(f"{stages[s]:.0f}" for s in ("ttir", "ttgir", "llir", "ptx", "cubin")
                          if s in stages)
    compile_text = f"{comp['total_ms']:.0f} ({stage_text})" if comp else "-"
    if (comp.get("worker_wait_ms") or 0) >= _WAIT_WORTH_SHOWING_MS:
      # waited for the compile worker (its start-up, the background warm-up)
      compile_text += f" +{comp['worker_wait_ms']:.0f} wait"
    if comp.get("cache") in ("memory", "disk"):
      compile_text = f"cached ({comp['cache']})"
    res = k.get("resources") or {}
    spills = None if res.get("spill_stores") is None else res["spill_stores"] + (res.get("spill_loads") or 0)
    device = prof.get("device") or {}
    row = [k["label"]] + ([f"{device.get('index', '?')}: {device.get('name', '')}"] if several else [])
    row += ["x".join(map(str, k["grid"])) or "()",
           f"{k['num_warps']}/{k['num_stages']}", compile_text, _bytes(res.get("shared_bytes")),
           str(res.get("registers", "-")), "-" if spills is None else str(spills)]
    if gpu:
      rt = p.get("runtime") or {}
      rates = p.get("rates") or {}
      nvml = p.get("nvml") or {}
      timing, loop = _timing_cells(rt)
      achieved = " ".join(x for x in (_rate(rates.get("bytes_per_s"), "B/s") if rates.get("bytes_per_s") else "",
                                      _rate(rates.get("flops_per_s"), "FLOP/s") if rates.get("flops_per_s") else "") if x) or "-"
      pct = rates.get("efficiency_pct")
      row += [timing, loop, achieved, "-" if pct is None else f"{pct:.0f}%", rates.get("bound", "-"),
              nvml.get("summary", "-")]
      if insitu:
        ins = p.get("insitu") or {}
        row.append(_insitu_cell(ins))
    else:
      row.append(str(k.get("cpu_launches", 0)))
    t.add_row(*row)
  if any((k.get("compile") or {}).get("worker_wait_ms", 0) >= _WAIT_WORTH_SHOWING_MS
         for k in run.get("kernels", [])):
    t.caption = ("+N wait: ms the compile waited for pallas-prof's compile worker (its start-up "
                 "with Triton's import, or compiles ahead of it), on top of the compile itself")
    t.caption_justify = "left"
  return t


def hot_equations(run: dict, kernel: dict, top: int = 5) -> Table | None:
  p = _profile_by_label(run).get(kernel["label"])
  static = (p or {}).get("static")
  if not static or not static.get("equations"):
    return None
  eqs = static["equations"]
  order = static.get("top_equations") or sorted(range(len(eqs)), key=lambda i: -eqs[i]["weight"])
  t = Table(title=f"hot equations of {kernel['label']} (share of {static.get('weight_basis', 'ptx')} "
                  f"instructions)", box=box.MINIMAL, title_justify="left")
  for col in ("weight", "eqn", "your line", "source", "instructions"):
    t.add_column(col, justify="right" if col == "weight" else "left", overflow="fold")
  for i in order[:top]:
    e = eqs[i]
    loc = f"{os.path.basename(e['user_file'])}:{e['user_line']}" if e.get("user_file") else "?"
    src = linecache.getline(e["user_file"], e["user_line"]).strip() if e.get("user_file") else ""
    counts = e.get("sass_counts") or e.get("ptx_counts") or {}
    interesting = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])
                            if v and k != "other")[:60]
    t.add_row(f"{100 * e['weight']:.1f}%", f"[{e['index']}] {e['primitive']}", loc, src[:70],
              interesting)
  return t


def render_run(run: dict, out_dir: str | None = None, con: Console | None = None) -> None:
  con = con or console()
  plat = run.get("platform", {})
  prof = run.get("profile") or {}
  head = Text()
  head.append("pallas-prof ", style="bold")
  head.append(f"{os.path.basename(run.get('script', '?'))}  exit {run.get('exit_code')}  ")
  head.append(f"jax {plat.get('jax')}  triton {plat.get('triton')}  "
              f"{', '.join(sorted(set(plat.get('devices', [])))) or plat.get('backend', '')}")
  con.print(head)
  if prof.get("message"):
    con.print(prof["message"])
  ceil = prof.get("ceilings")
  if ceil:
    mat = ", ".join(f"{k} {_rate(v, 'FLOP/s')}" for k, v in (ceil.get("matrix_flops_per_s") or {}).items())
    con.print(f"ceilings ({ceil.get('device_name')}): copy {_rate(ceil.get('copy_bytes_per_s'), 'B/s')}; {mat}")
  if not run.get("kernels"):
    con.print("no pallas_call kernels were lowered by this script")
  else:
    con.print(kernel_table(run))
    for k in run["kernels"]:
      table = hot_equations(run, k)
      if table is not None:
        con.print(table)
      p = _profile_by_label(run).get(k["label"]) or {}
      if p.get("verdict"):
        con.print(f"  {k['label']}: {p['verdict']}")
  for note in (run.get("notes") or []) + (prof.get("notes") or []):
    con.print(f"note: {note}")
  for err in run.get("errors") or []:
    con.print(f"error in {err.get('kernel')}: {err.get('reason')} "
              f"({err.get('location') or 'no location'})")
  if out_dir:
    traces = run.get("traces") or {}
    extra = ", ".join(traces.values())
    con.print(f"wrote {out_dir}/ (report.json, report.html{', ' + extra if extra else ''}, kernels/)")


def _insitu_cell(ins: dict) -> str:
  if not ins:
    return "-"
  if not ins["launches"]:
    return "not launched on this GPU"
  return (f"{ins['launches']} x {_us(ins['mean_s'])} µs on gpu "
          f"{','.join(map(str, ins.get('device_ids', [])))}")
