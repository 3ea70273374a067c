"""`pallas-prof diff A B`: two saved runs compared kernel by kernel.

Kernels are matched by label (name + content hash), then by name. Runtime
(replay median), registers, shared memory and spills are compared; with
`--fail-on-regression PCT` the command exits 1 when a kernel got slower by
more than PCT percent or started spilling, which makes it usable in CI.
"""
from __future__ import annotations

from rich import box
from rich.table import Table

from . import artifacts
from .render import console


def _index(run: dict) -> dict[str, dict]:
  prof = {k["label"]: k for k in (run.get("profile") or {}).get("kernels", [])}
  out = {}
  for k in run.get("kernels", []):
    p = prof.get(k["label"], {})
    rt = p.get("runtime") or {}
    res = k.get("resources") or {}
    spills = None
    if res.get("spill_stores") is not None:
      spills = res["spill_stores"] + (res.get("spill_loads") or 0)
    out[k["label"]] = {"name": k["name"], "median_s": rt.get("median_s"),
                       "registers": res.get("registers"), "shared_bytes": res.get("shared_bytes"),
                       "spills": spills}
  return out


def _pairs(a: dict, b: dict):
  matched, used = [], set()
  for label, ka in a.items():
    if label in b:
      matched.append((label, ka, b[label]))
      used.add(label)
  for label, ka in a.items():
    if label in b:
      continue
    same = [lb for lb, kb in b.items() if kb["name"] == ka["name"] and lb not in used]
    if len(same) == 1:
      matched.append((f"{label} -> {same[0]}", ka, b[same[0]]))
      used.add(same[0])
    else:
      matched.append((label, ka, None))
  for label, kb in b.items():
    if label not in used and label not in a:
      matched.append((label, None, kb))
  return matched


def _change(old, new) -> float | None:
  if old is None or new is None or old == 0:
    return None
  return 100.0 * (new - old) / old


def diff(args) -> int:
  run_a, run_b = artifacts.read_report(args.a), artifacts.read_report(args.b)
  rows = _pairs(_index(run_a), _index(run_b))
  table = Table(title=f"{args.a}  ->  {args.b}", box=box.SIMPLE_HEAVY, title_justify="left")
  for col in ("kernel", "median µs", "change", "registers", "shared", "spills", "verdict"):
    table.add_column(col, justify="left" if col in ("kernel", "verdict") else "right")
  regressions = []
  for label, ka, kb in rows:
    if ka is None or kb is None:
      table.add_row(label, "-", "-", "-", "-", "-", "only in A" if kb is None else "only in B")
      continue
    change = _change(ka["median_s"], kb["median_s"])
    verdict = []
    if args.fail_on_regression is not None and change is not None and change > args.fail_on_regression:
      verdict.append(f"SLOWER by {change:.1f}%")
    if (kb["spills"] or 0) > (ka["spills"] or 0):
      verdict.append("new spills")
    if verdict:
      regressions.append(label)
    fmt = lambda old, new: f"{old} -> {new}" if old != new else f"{new}"
    us = lambda s: "-" if s is None else f"{s * 1e6:.1f}"
    table.add_row(label, f"{us(ka['median_s'])} -> {us(kb['median_s'])}",
                  "-" if change is None else f"{change:+.1f}%",
                  fmt(ka["registers"], kb["registers"]), fmt(ka["shared_bytes"], kb["shared_bytes"]),
                  fmt(ka["spills"], kb["spills"]), ", ".join(verdict) or "ok")
  console().print(table)
  if args.fail_on_regression is not None and regressions:
    console().print(f"regressions: {', '.join(regressions)}")
    return 1
  return 0
