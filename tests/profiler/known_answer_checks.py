"""The known answers of known_answer.py and softmax, checked on a run's report.json.

Each check takes the kernel's profile entry (report.json: profile.kernels[i]) and
returns (passed, what was measured); the GPU test and the results summary use them.
"""
from __future__ import annotations

LOOPS = ("scan", "while", "fori_loop")
LOADS = ("get", "load")
STORES = ("swap", "store")


def _eqns(k):
  return k["attribution"]["equations"]


def _sum(k, primitives, key="weight"):
  return sum(e[key] for e in _eqns(k) if e["primitive"] in primitives)


def copy(k):
  w = _sum(k, LOADS + STORES)
  return w >= 0.70, f"load + store equations: {100 * w:.1f}% of the weight (want >= 70%)"


def loop(k):
  loops = [e for e in _eqns(k) if e["primitive"] in LOOPS]
  w = max((e["inclusive_weight"] for e in loops), default=0.0)
  return w >= 0.80, f"the fori_loop (inclusive): {100 * w:.1f}% (want >= 80%)"


def two_loops(k):
  loops = sorted((e for e in _eqns(k) if e["primitive"] in LOOPS and e["parent"] is None),
                 key=lambda e: e["index"])
  if len(loops) != 2:
    return False, f"expected two top-level loops, found {len(loops)}"
  short, long = loops[0]["inclusive_weight"], loops[1]["inclusive_weight"]
  ratio = long / short if short else float("inf")
  return 2.4 <= ratio <= 3.6, (f"loops of 16 and 48 rounds: {100 * short:.1f}% and "
                               f"{100 * long:.1f}%, ratio {ratio:.2f} (want 3 within 20%)")


def matmul(k):
  w = _sum(k, ("dot_general",) + LOADS)
  return w >= 0.80, f"dot_general + its loads: {100 * w:.1f}% (want >= 80%)"


def softmax_wait(k):
  gets = [e for e in _eqns(k) if e["primitive"] in LOADS]
  if not gets:
    return False, "no load equation was weighed"
  x = max(gets, key=lambda e: e["weight"])
  waits = [w for w in x.get("waits", []) if w["reason"] == "long_scoreboard"]
  line = next((ln for ln in k["attribution"]["lines"] if ln["user_line"] == x["user_line"]), None)
  ok = bool(waits) and line is not None and line["top_stall"] == "waiting for global memory"
  first = waits[0] if waits else None
  return ok, (f"x load at line {x['user_line']}: {100 * x['weight']:.1f}% of the weight, "
              f"{sum(w['samples'] for w in waits):.0f} samples waiting for global memory "
              f"charged to it" + (f" (first used by {first['consumer_primitive']} at "
                                  f":{first['consumer_line']})" if first else "")
              + f"; its line's top stall: {line['top_stall'] if line else None}")


CHECKS = {"ka_copy_kernel": copy, "ka_loop_kernel": loop, "ka_two_kernel": two_loops,
          "ka_matmul_kernel": matmul, "softmax_kernel": softmax_wait}


def kernels(report: dict) -> list[dict]:
  return (report.get("profile") or {}).get("kernels", [])


# --- the same known answers, from the probes (report.json: kernels[i].probes) --------------
# A probe reads the clock when its warp issues it, so a load's wait shows where the value
# is first used; the probed variant puts a load and its first use in one region, named
# after both ("[0] get @ k.py:44 → [1] mul @ k.py:44"), and the checks count it as the load.

def _regions(pr):
  return pr["regions"]


def probe_copy(pr):
  regions = [r for r in _regions(pr) if r.get("loads") or r["kind"] in ("load", "store")]
  w = sum(r["share"] for r in regions)
  eqns = sorted(i for r in regions for i in r.get("eqns", ()))
  return w >= 0.70, (f"the load (with its first use) and store regions: {100 * w:.1f}% "
                     f"(want >= 70%; {len(regions)} region(s), equations {eqns})")


def _loop_regions(pr):
  return [r for r in _regions(pr) if r["kind"] == "loop"]


def probe_loop(pr):
  w = max((r["share"] for r in _loop_regions(pr)), default=0.0)
  return w >= 0.80, f"the fori_loop's region: {100 * w:.1f}% (want >= 80%)"


def probe_two_loops(pr):
  """The work is 1:3 by construction; a per-warp clock sees it with the CTA alone on its
  SM (the 'alone' reading). Beside the other CTAs each loop's time also holds the waits
  for the special-function unit the SM's 64 warps share, and the warps the scheduler
  favours finish first: that ratio is printed, and is not the check."""
  loops = _loop_regions(pr)
  if len(loops) != 2:
    return False, f"expected two loop regions, found {len(loops)}"
  short, long = loops[0]["share"], loops[1]["share"]
  beside = long / short if short else float("inf")
  text = (f"beside the other CTAs: {100 * short:.1f}% and {100 * long:.1f}%, ratio "
          f"{beside:.2f}" + _first_and_last_on_each_sm(pr, loops))
  if not pr.get("alone"):
    return False, f"no 'alone' reading (one CTA per SM) to check the work with; {text}"
  a_short, a_long = loops[0]["alone_share"], loops[1]["alone_share"]
  ratio = a_long / a_short if a_short else float("inf")
  return 2.4 <= ratio <= 3.6, (f"loops of 16 and 48 rounds, one CTA per SM: "
                               f"{100 * a_short:.1f}% and {100 * a_long:.1f}%, ratio "
                               f"{ratio:.2f} (want 3 within 20%); {text}")


def _first_and_last_on_each_sm(pr, loops):
  """The same ratio for the CTA that started first and last on each SM (of those in the
  report): a warp waiting for a pipe other warps hold waits inside its region."""
  regions = _regions(pr)
  a, b = (regions.index(r) for r in loops)
  by_sm = {}
  for c in pr.get("ctas") or []:
    by_sm.setdefault(c["sm"], []).append(c)
  if not by_sm:
    return ""

  def ratio(c):
    t = c["boundaries_ns"]
    short = t[a + 1] - t[a]
    return (t[b + 1] - t[b]) / short if short > 0 else float("inf")

  def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]

  first = median([ratio(min(cs, key=lambda c: c["start_ns"])) for cs in by_sm.values()])
  last = median([ratio(max(cs, key=lambda c: c["start_ns"])) for cs in by_sm.values()])
  return (f"; per CTA, the first to start on each of {len(by_sm)} SMs: {first:.2f}, the last: "
          f"{last:.2f} (median)")


def probe_matmul(pr):
  # the dot and the loads that feed it are the fori_loop's body: its region
  w = max((r["share"] for r in _loop_regions(pr)), default=0.0)
  return w >= 0.80, f"the K loop (dot + its loads): {100 * w:.1f}% (want >= 80%)"


PROBE_CHECKS = {"ka_copy_kernel": probe_copy, "ka_loop_kernel": probe_loop,
                "ka_two_kernel": probe_two_loops, "ka_matmul_kernel": probe_matmul}
