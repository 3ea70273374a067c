"""The ground truth of ground_truth.py's kernels, judged on a run's report.json.

    python tests/profiler/ground_truth_checks.py RUN/report.json [NCU_RUN/report.json]
    python tests/profiler/ground_truth_checks.py --table STATIC/report.json GPU/report.json ...

--table prints one Markdown row per kernel with a column per basis found in the reports
(static counts, PC sampling, ncu): the heavy lines' share and the worst cheap line's, with
the verdict; the closing table of issue 47.

The answer of each kernel is in its source: the lines marked `# heavy` hold nearly all
the work, each line marked `# cheap` almost none (ground_truth.py says how each is built).
An answer passes when the heavy lines together weigh at least HEAVY_AT_LEAST (the
construction's share, less the 5 points the issue allows) and no cheap line weighs more
than CHEAP_AT_MOST. Lines marked `# not run` (a branch the inputs never take) are judged
cheap only where the weights were measured: static counts weigh code that never runs.

The report's weights come from its attribution: by user line (`attribution.lines`) where
the report has them, else summed over the equations of each line (ncu's cross-check).
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ground_truth  # noqa: E402

CHEAP_AT_MOST = 0.10
# the construction's share of the heavy lines, less 5 points: the slow path or loop is at
# least 95 % of the executed instructions of each kernel but these
HEAVY_AT_LEAST = {"default": 0.90,
                  # the dot's loop: its loads, the dot and the loop's own control
                  "gt_dot_kernel": 0.75,
                  # contended atomics against one reduction of the block
                  "gt_atomic_kernel": 0.75}
# Static weights are instructions times loop trips: they count the instructions of the
# loads and stores (which a PC sample charges to the first use of the value, or which take
# no time at all), and a dot's few instructions each do a tile's work. What they can show
# is where the instructions are: the heavy lines hold most of them, by construction.
HEAVY_AT_LEAST_STATIC = {"default": 0.80,
                         "gt_dot_kernel": 0.50}


@dataclasses.dataclass(frozen=True)
class Markers:
  heavy: frozenset[int]
  cheap: frozenset[int]
  not_run: frozenset[int]


def markers(kernel_name: str) -> Markers | None:
  """The marked lines of one kernel of ground_truth.py (None: not a corpus kernel)."""
  functions = ground_truth.kernels_in_this_file().get(kernel_name)
  if functions is None:
    return None
  marks: dict[str, set[int]] = {"heavy": set(), "cheap": set(), "not run": set()}
  for fn in functions:
    try:
      lines, start = inspect.getsourcelines(fn)
    except TypeError:       # a library's function (jnp.tanh): no marked lines of ours
      continue
    for offset, text in enumerate(lines):
      for mark, found in marks.items():
        if text.rstrip().endswith(f"# {mark}"):
          found.add(start + offset)
  return Markers(frozenset(marks["heavy"]), frozenset(marks["cheap"]),
                 frozenset(marks["not run"]))


def line_weights(attribution: dict) -> dict[int, float]:
  """{line of ground_truth.py: weight} of one kernel's attribution."""
  here = os.path.basename(ground_truth.__file__)
  out: dict[int, float] = {}
  rows = attribution.get("lines") or attribution.get("equations") or []
  for row in rows:
    if row.get("user_file") and os.path.basename(row["user_file"]) != here:
      continue
    if row.get("user_line") is not None:
      out[row["user_line"]] = out.get(row["user_line"], 0.0) + row["weight"]
  return out


@dataclasses.dataclass(frozen=True)
class Verdict:
  kernel: str
  basis: str
  heavy: float
  worst_cheap: float
  worst_cheap_line: int | None
  want_heavy: float
  passed: bool

  def row(self) -> str:
    cheap = (f"{100 * self.worst_cheap:5.1f}% (line {self.worst_cheap_line})"
             if self.worst_cheap_line is not None else "    -")
    return (f"{self.kernel:<24} {self.basis:<10} heavy {100 * self.heavy:5.1f}% (want >= "
            f"{100 * self.want_heavy:.0f}%)  worst cheap {cheap:<18} "
            f"{'PASS' if self.passed else 'FAIL'}")


def judge(kernel_name: str, attribution: dict, basis: str) -> Verdict | None:
  m = markers(kernel_name)
  if m is None or not attribution:
    return None
  weights = line_weights(attribution)
  heavy = sum(weights.get(n, 0.0) for n in m.heavy)
  cheap_lines = m.cheap | (m.not_run if basis != "static" else frozenset())
  worst = max(cheap_lines, key=lambda n: weights.get(n, 0.0), default=None)
  worst_w = weights.get(worst, 0.0) if worst is not None else 0.0
  table = HEAVY_AT_LEAST_STATIC if basis == "static" else HEAVY_AT_LEAST
  want = table.get(kernel_name, table["default"])
  return Verdict(kernel_name, basis, heavy, worst_w, worst, want,
                 heavy >= want and worst_w <= CHEAP_AT_MOST)


def verdicts(report: dict) -> list[Verdict]:
  out = []
  for k in (report.get("profile") or {}).get("kernels", []):
    att = k.get("attribution") or {}
    v = judge(k["name"], att, att.get("basis") or k.get("weight_basis") or "?")
    if v is not None:
      out.append(v)
    ncu_att = (k.get("ncu") or {}).get("attribution")
    v = judge(k["name"], ncu_att or {}, "ncu")
    if v is not None:
      out.append(v)
  return out


def line_rows(kernel_name: str, attribution: dict) -> list[str]:
  """Every weighed line of one kernel, marked or not, heaviest first (where the rest went)."""
  m = markers(kernel_name)
  if m is None or not attribution:
    return []
  with open(ground_truth.__file__) as f:
    source = f.read().splitlines()
  weights = line_weights(attribution)
  unplaced = 1.0 - sum(weights.values())
  rows = []
  for n, w in sorted(weights.items(), key=lambda kv: -kv[1]):
    mark = ("heavy" if n in m.heavy else "cheap" if n in m.cheap
            else "not run" if n in m.not_run else "")
    text = source[n - 1].strip() if 0 < n <= len(source) else "?"
    rows.append(f"    {100 * w:5.1f}%  line {n:<4} {mark:<8} {text[:70]}")
  if unplaced > 0.0005:
    rows.append(f"    {100 * unplaced:5.1f}%  (no line of ground_truth.py)")
  return rows


def table(reports: list[dict]) -> list[str]:
  """The closing table: kernel, its heavy lines, then per basis `heavy % / worst cheap %`
  and the verdict (a basis missing for a kernel: -)."""
  by_kernel: dict[str, dict[str, Verdict]] = {}
  for report in reports:
    for v in verdicts(report):
      by_kernel.setdefault(v.kernel, {})[v.basis] = v
  bases = [b for b in ("static", "sampled", "measured", "ncu")
           if any(b in vs for vs in by_kernel.values())]
  bases += sorted({b for vs in by_kernel.values() for b in vs} - set(bases))
  rows = ["| kernel | heavy lines (construction) | " +
          " | ".join(f"{b}: heavy / worst cheap" for b in bases) + " |",
          "|---|---|" + "---|" * len(bases)]
  for kernel in sorted(by_kernel, key=lambda k: list(ground_truth.kernels_in_this_file()).index(k)
                       if k in ground_truth.kernels_in_this_file() else 1 << 30):
    m = markers(kernel)
    heavy = ", ".join(str(n) for n in sorted(m.heavy)) if m else "?"
    cells = []
    for b in bases:
      v = by_kernel[kernel].get(b)
      cells.append("-" if v is None else
                   f"{100 * v.heavy:.1f} % (>= {100 * v.want_heavy:.0f}) / "
                   f"{100 * v.worst_cheap:.1f} % {'PASS' if v.passed else '**FAIL**'}")
    rows.append(f"| {kernel} | {heavy} | " + " | ".join(cells) + " |")
  return rows


def main(argv: list[str]) -> int:
  if argv[:1] == ["--table"]:
    reports = []
    for path in argv[1:]:
      with open(path) as f:
        reports.append(json.load(f))
    print("\n".join(table(reports)))
    return 0
  show_lines = "--lines" in argv
  failed = 0
  for path in [a for a in argv if a != "--lines"]:
    with open(path) as f:
      report = json.load(f)
    print(f"## {path}")
    for v in verdicts(report):
      print(v.row())
      failed += not v.passed
      if show_lines:
        kernel = next(k for k in report["profile"]["kernels"] if k["name"] == v.kernel)
        att = ((kernel.get("ncu") or {}).get("attribution") if v.basis == "ncu"
               else kernel.get("attribution"))
        print("\n".join(line_rows(v.kernel, att or {})))
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
