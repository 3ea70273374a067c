"""Summary of attribution_gpu.sh's run directories: per kernel the weight basis,
sampling figures, heaviest equations and the known-answer checks."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from known_answer_checks import CHECKS, kernels  # noqa: E402


def main(root):
  for name in sorted(os.listdir(root)):
    path = os.path.join(root, name, "report.json")
    if not os.path.exists(path):
      continue
    with open(path) as f:
      report = json.load(f)
    print(f"## {name}")
    sdir = os.path.join(root, name, "samples")
    for f in sorted(os.listdir(sdir)) if os.path.isdir(sdir) else []:
      with open(os.path.join(sdir, f)) as fh:
        raw = json.load(fh)
      phases = ", ".join(f"{k} {v:.2f}" for k, v in raw.get("phases_s", {}).items())
      print(f"{f}: child wall {raw.get('wall_seconds', 0):.2f} s (inside {raw.get('child_seconds', 0):.2f} s:"
            f" {phases})")
    for k in kernels(report):
      att = k.get("attribution") or {}
      rt = k.get("runtime") or {}
      s = att.get("sampling") or {}
      print(f"{k['label']}: basis {k.get('weight_basis')} ({att.get('description')}); "
            f"replay median {rt.get('median_s', 0) * 1e6:.1f} us (unsampled)")
      if s:
        print(f"  sampling: period {s['period_cycles']} cycles, {s['launches']} launches, "
              f"{s['total_samples']} samples ({s['dropped_samples']} dropped), child "
              f"{s['child_seconds']:.2f} s, launch median unsampled "
              f"{(s['unsampled_median_s'] or 0) * 1e6:.1f} us / sampled "
              f"{(s['sampled_median_s'] or 0) * 1e6:.1f} us: overhead {s['overhead_pct']}")
      for e in att.get("equations", [])[:6]:
        st = ", ".join(f"{x['reason']} {100 * x['share']:.0f}%" for x in e.get("stalls", [])[:3])
        print(f"  [{e['index']}] {e['primitive']:<12} w {100 * e['weight']:5.1f}%  incl "
              f"{100 * e['inclusive_weight']:5.1f}%  at {100 * e['share_at']:5.1f}%  "
              f"in {e['charged_in']:.0f} out {e['charged_out']:.0f}  line {e['user_line']}  {st}")
      ncu_att = (k.get("ncu") or {}).get("attribution")
      if ncu_att:
        ours = {e["index"]: e["weight"] for e in att.get("equations", [])}
        print(f"  ncu cross-check ({ncu_att['description']}):")
        for e in ncu_att["equations"][:6]:
          print(f"    [{e['index']}] {e['primitive']:<12} ncu {100 * e['weight']:5.1f}%  "
                f"pc sampling {100 * ours.get(e['index'], 0.0):5.1f}%")
      for err in k.get("errors", []):
        print(f"  error: {err}")
      check = CHECKS.get(k["name"])
      if check and att.get("equations"):
        ok, text = check(k)
        print(f"  CHECK {'PASS' if ok else 'FAIL'}: {text}")


if __name__ == "__main__":
  main(sys.argv[1])
