"""One line per probed kernel, from what tests/profiler/probes_gpu.sh wrote: the heaviest
regions, the distortion, the grid's waves; then each known answer's verdict.

    python tests/profiler/summarize_probes.py DIR      # DIR/{ka,ex}/probes.json[.gz],
                                                       # DIR/softmax/report.json[.gz]
"""
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from known_answer_checks import PROBE_CHECKS  # noqa: E402

WAVES_AVAL = "float32[16384,2048]"     # probes_gpu.py's grid of ~8 waves


def _load(path):
  for p in (path, path + ".gz"):
    if os.path.exists(p):
      with (gzip.open(p, "rt") if p.endswith(".gz") else open(p)) as f:
        return json.load(f)
  return None


def kernels(directory):
  out = []
  for part in ("ka", "ex"):
    data = _load(os.path.join(directory, part, "probes.json"))
    for report in [data] if isinstance(data, dict) else data or []:
      out += report.get("kernels", [])
  run = _load(os.path.join(directory, "softmax", "report.json"))
  if run is not None:
    out += (run.get("profile") or {}).get("kernels", [])
  return out


def line(k):
  pr = k.get("probes")
  aval = (k.get("in_avals") or ["?"])[0]
  if pr is None:
    return f"{k['label']} {aval}: no probes ({'; '.join(k.get('errors') or []) or 'not run'})"
  top = sorted(pr["regions"], key=lambda r: -r["share"])[:3]
  d = pr.get("distortion") or {}
  parts = [", ".join(f"{_short(r)} {100 * r['share']:.0f}%" for r in top)]
  if d.get("runtime_pct") is not None:
    parts.append(f"distortion {d['runtime_pct']:+.1f}% ({1e6 * d['runtime_plain_s']:.1f} -> "
                 f"{1e6 * d['runtime_probed_s']:.1f} us), regs {d['registers_plain']}->"
                 f"{d['registers_probed']}, own SASS {d.get('sass_kernel_pct') or 0:+.0f}%")
  if pr.get("alone"):
    solo = sorted(pr["regions"], key=lambda r: -(r.get("alone_share") or 0))[:3]
    parts.append(f"alone (1 CTA/SM, {pr['alone']['ctas_per_sm_beside']} beside): " + ", ".join(
        f"{_short(r)} {100 * r['alone_share']:.0f}% ({r.get('beside_over_alone') or 0:.2f}x "
        "beside)" for r in solo))
  waves = pr["programs"] / max(pr["max_concurrent_ctas"] * pr["program_stride"], 1)
  parts.append(f"{pr['programs']} programs ~{waves:.1f} waves on {pr['sms']} SMs")
  rec = pr.get("reconciliation") or {}
  if rec.get("disagreements"):
    parts.append(f"{len(rec['disagreements'])} disagreement(s) with {rec.get('basis')}")
  return f"{k['label']} {aval}: " + "; ".join(parts)


def _short(region):
  """"[1] reduce_max (+load)" for "[0] get @ s.py:19 → [1] reduce_max @ s.py:20"."""
  name = region["label"].split(" → ")[-1].split(" @ ")[0].split(" (")[0]
  name = {"end of the kernel": "end"}.get(name, name)
  return name + (" (+load)" if region.get("loads") else "")


def verdicts(ks):
  out, failed = [], 0
  for k in ks:
    check = PROBE_CHECKS.get(k["name"])
    if (k.get("in_avals") or [None])[0] == WAVES_AVAL:
      check = _waves
    if check is None:
      continue
    if k.get("probes") is None:
      ok, what = False, "no probes"
    else:
      ok, what = check(k["probes"])
    failed += not ok
    out.append(f"{'PASS' if ok else 'FAIL'} {k['name']}: {what}")
  return out, failed


def _waves(pr):
  waves = pr["programs"] / max(pr["max_concurrent_ctas"] * pr["program_stride"], 1)
  return waves >= 4 and pr["sms"] >= 100, (f"~{waves:.1f} waves on {pr['sms']} SMs "
                                           "(want >= 4 on >= 100)")


def main(argv):
  ks = kernels(argv[0] if argv else ".")
  for k in ks:
    print(line(k))
  lines, failed = verdicts(ks)
  print("\n".join(lines))
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
