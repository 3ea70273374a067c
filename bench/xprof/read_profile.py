"""What XProf shows of a profile: its own converters (the `xprof` package, not a
dependency of pallas-prof: run this with a Python that has it) read a jax.profiler
profile and this prints, as JSON, the trace viewer's processes and threads, the events
whose names carry pallas-prof's scope or come from pallas-prof's plane, and the op
profile's and HLO stats' rows for those ops.

    /path/to/xprof-python bench/xprof/read_profile.py LOGDIR [--out FILE]
"""
import glob
import json
import os
import sys

from xprof.convert import raw_to_tool_data

MARK = "pallas_prof"


def _tool(path, name):
  data, _ = raw_to_tool_data.xspace_to_tool_data([path], name, {})
  if isinstance(data, bytes):
    data = data.decode()
  try:
    return json.loads(data)
  except (TypeError, ValueError):
    return data


def _walk(node, found, depth=0):
  """op_profile nodes whose names carry pallas-prof's scope, with their metrics."""
  if isinstance(node, dict):
    name = node.get("name", "")
    if MARK in name and "metrics" in node:
      found.append({"name": name, "metrics": node["metrics"],
                    "category": (node.get("xla") or {}).get("category")})
    for child in node.get("children", []):
      _walk(child, found, depth + 1)


def main(argv):
  logdir = argv[0]
  [path] = sorted(glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb")))[-1:]
  trace = _tool(path, "trace_viewer")
  events = trace["traceEvents"]
  processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
  threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("name") == "thread_name"}
  ours = [e for e in events if e.get("ph") == "X"
          and (MARK in e.get("name", "") or MARK in json.dumps(e.get("args", {}))
               or processes.get(e["pid"], "").endswith("pallas-prof"))]
  out = {
    "file": path,
    "processes": sorted(set(processes.values())),
    "events": len([e for e in events if e.get("ph") == "X"]),
    "pallas_prof_events": [
      {"process": processes.get(e["pid"]), "thread": threads.get((e["pid"], e["tid"])),
       "name": e["name"], "ts": e["ts"], "dur": e.get("dur"),
       "args": {k: str(v)[:200] for k, v in (e.get("args") or {}).items()}}
      for e in ours[:400]],
  }
  found = []
  _walk(_tool(path, "op_profile"), found)
  out["op_profile"] = found[:100]
  stats = _tool(path, "hlo_stats")
  out["hlo_stats_rows_with_mark"] = [row for row in json.dumps(stats).split('"c":')
                                     if MARK in row][:40]
  text = json.dumps(out, indent=1)
  if "--out" in argv:
    with open(argv[argv.index("--out") + 1], "w") as f:
      f.write(text)
  print(text[:6000])


if __name__ == "__main__":
  main(sys.argv[1:])
