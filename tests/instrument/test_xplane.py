"""pallas-prof's plane in a jax.profiler profile, for XProf (issue 41 item 1; docs/xprof.md).

What needs no XProf: the XSpace written is the schema's (checked on the wire, not only by
our own classes), it goes into the profile JAX wrote beside JAX's own planes, and a failure
leaves JAX's file as it was. What needs XProf: its own converter (the one its trace viewer
runs) reads the plane back; that test runs where `xprof` is importable, or where
PALLAS_PROF_XPROF_PYTHON names a Python that has it (xprof is no dependency of pallas-prof).
"""
from __future__ import annotations

import glob
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from pallas_prof.instrument import xplane

START_NS = 1_790_000_000_123_456_789
DOCUMENT = {
    "traceEvents": [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "pallas-prof"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 2,
         "args": {"name": "kernel add_kernel"}},
        {"name": "pallas_call add_kernel", "ph": "X", "pid": 1, "tid": 2, "ts": 10.5,
         "dur": 2.25, "args": {"pallas.kernel": "add_kernel", "pallas.grid": "(2,)"}},
        {"name": "advise add_kernel", "ph": "X", "pid": 1, "tid": 1, "ts": 40.0, "dur": 1.0,
         "args": {"pallas.advice.summary": "2 programs on 132 SMs", "count": 3, "ok": True}},
    ],
    "otherData": {"trace_start_unix_ns": START_NS},
}


def _fields(data: bytes):
  """(field number, wire type, value) of a message's top level, read off the wire."""
  i, out = 0, []
  while i < len(data):
    key, i = _varint(data, i)
    number, wire = key >> 3, key & 7
    if wire == 0:
      value, i = _varint(data, i)
    elif wire == 2:
      n, i = _varint(data, i)
      value, i = data[i:i + n], i + n
    else:
      raise AssertionError(f"unexpected wire type {wire}")
    out.append((number, wire, value))
  return out


def _varint(data: bytes, i: int):
  shift = value = 0
  while True:
    b = data[i]
    value |= (b & 0x7F) << shift
    i, shift = i + 1, shift + 7
    if not b & 0x80:
      return value, i


def test_the_plane_is_xplane_proto_on_the_wire():
  data = xplane.from_trace_events(DOCUMENT["traceEvents"], START_NS, hostname="h")
  space = _fields(data)
  # XSpace: planes = 1, hostnames = 4
  assert [(n, w) for n, w, _ in space] == [(1, 2), (4, 2)] and space[1][2] == b"h"
  plane = _fields(space[0][2])
  by_number = {}
  for n, _, v in plane:
    by_number.setdefault(n, []).append(v)
  # XPlane: id = 1, name = 2, lines = 3, event_metadata = 4, stat_metadata = 5
  assert by_number[2] == [xplane.PLANE_NAME.encode()] and by_number[1] == [1]
  lines = [dict((n, v) for n, _, v in _fields(line)) for line in by_number[3]]
  # XLine: name = 2, timestamp_ns = 3 (ns since the Unix epoch)
  assert {line[2] for line in lines} == {b"pallas-prof", b"kernel add_kernel"}
  assert {line[3] for line in lines} == {START_NS}
  kernel = next(line for line in lines if line[2] == b"kernel add_kernel")
  # XEvent: offset_ps = 2, duration_ps = 3 (picoseconds)
  event = dict((n, v) for n, _, v in _fields(kernel[4]))
  assert event[2] == 10_500_000 and event[3] == 2_250_000
  names = {dict((n, v) for n, _, v in _fields(entry))[1]: entry for entry in by_number[4]}
  assert len(names) == 2


def test_the_events_keep_their_args_as_stats():
  m = xplane.messages()
  space = m["XSpace"].FromString(xplane.from_trace_events(DOCUMENT["traceEvents"], START_NS))
  [plane] = space.planes
  stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
  event_names = {k: v.name for k, v in plane.event_metadata.items()}
  [advise] = [e for line in plane.lines for e in line.events
              if event_names[e.metadata_id] == "advise add_kernel"]
  stats = {stat_names[s.metadata_id]: s for s in advise.stats}
  assert stats["pallas.advice.summary"].str_value == "2 programs on 132 SMs"
  assert stats["count"].int64_value == 3 and stats["ok"].str_value == "True"


def _jax_profile(logdir, started: list | None = None) -> str:
  import jax
  import jax.numpy as jnp
  with jax.profiler.trace(str(logdir)):
    if started is not None:
      started.append(time.time_ns())
    jnp.ones(8).block_until_ready()
    jnp.ones(8).sum().block_until_ready()
  [path] = glob.glob(os.path.join(str(logdir), "plugins", "profile", "*", "*.xplane.pb"))
  return path


def _perfetto(tmp_path, document=DOCUMENT) -> str:
  path = tmp_path / "trace.perfetto.json"
  path.write_text(json.dumps(document))
  return str(path)


def test_the_plane_joins_the_profile_jax_wrote(tmp_path):
  target = _jax_profile(tmp_path / "logdir")
  space_class = xplane.messages()["XSpace"]
  before = space_class.FromString(open(target, "rb").read())
  assert xplane.add_to_profile(_perfetto(tmp_path), str(tmp_path / "logdir")) == target
  after = space_class.FromString(open(target, "rb").read())
  assert [p.name for p in after.planes] == [p.name for p in before.planes] + [xplane.PLANE_NAME]
  assert after.planes[:-1] == before.planes[:]            # JAX's own planes, unchanged
  # a second time replaces pallas-prof's plane rather than adding another
  xplane.add_to_profile(_perfetto(tmp_path), str(tmp_path / "logdir"))
  again = space_class.FromString(open(target, "rb").read())
  assert [p.name for p in again.planes].count(xplane.PLANE_NAME) == 1
  assert not glob.glob(target + ".*")                        # no partial file left


def test_no_profile_is_said_with_what_to_do(tmp_path):
  with pytest.raises(xplane.ProfileNotFound) as error:
    xplane.add_to_profile(_perfetto(tmp_path), str(tmp_path / "empty"))
  message = str(error.value)
  assert os.path.join(str(tmp_path / "empty"), "plugins", "profile") in message
  assert "jax.profiler.trace(" in message and "--xprof" in message


@pytest.mark.parametrize("text", ["{not json", json.dumps({"traceEvents": []})])
def test_a_bad_trace_leaves_jax_profile_as_it_was(tmp_path, text):
  target = _jax_profile(tmp_path / "logdir")
  before = open(target, "rb").read()
  path = tmp_path / "trace.perfetto.json"
  path.write_text(text)
  with pytest.raises(ValueError) as error:
    xplane.add_to_profile(str(path), str(tmp_path / "logdir"))
  assert str(path) in str(error.value) or "Expecting" in str(error.value)
  assert open(target, "rb").read() == before
  assert not glob.glob(target + ".*")


def _xprof_python() -> str | None:
  if importlib.util.find_spec("xprof") is not None:
    return sys.executable
  return os.environ.get("PALLAS_PROF_XPROF_PYTHON") or None


CONVERT = textwrap.dedent("""
    import json, sys
    from xprof.convert import raw_to_tool_data
    data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "trace_viewer", {})
    events = json.loads(data)["traceEvents"]
    shown = [e for e in events if e.get("ph") == "M" or "add_kernel" in e.get("name", "")]
    jax_times = [e["ts"] for e in events if e.get("ph") == "X" and e["pid"] != shown[0]["pid"]
                 and "add_kernel" not in e.get("name", "")]
    print(json.dumps({"events": shown, "jax": [min(jax_times), max(jax_times)]}))
""")


@pytest.mark.skipif(_xprof_python() is None,
                    reason="xprof is not importable here (it is no dependency of pallas-prof): "
                           "pip install xprof, or set PALLAS_PROF_XPROF_PYTHON to a Python "
                           "that has it, to check the plane with XProf's own converter")
def test_xprofs_own_converter_shows_the_plane(tmp_path):
  started = []
  target = _jax_profile(tmp_path / "logdir", started)
  document = dict(DOCUMENT, otherData={"trace_start_unix_ns": started[0]})
  xplane.add_to_profile(_perfetto(tmp_path, document), str(tmp_path / "logdir"))
  done = subprocess.run([_xprof_python(), "-c", CONVERT, target], capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  converted = json.loads(done.stdout.strip().splitlines()[-1])
  events = converted["events"]
  processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
  assert xplane.PLANE_NAME in processes.values() and "/host:CPU" in processes.values()
  ours = [pid for pid, name in processes.items() if name == xplane.PLANE_NAME]
  threads = {e["args"]["name"] for e in events
             if e["name"] == "thread_name" and e["pid"] in ours}
  assert threads == {"pallas-prof", "kernel add_kernel"}
  [advise] = [e for e in events if e.get("name") == "advise add_kernel"]
  assert advise["args"]["pallas.advice.summary"] == "2 programs on 132 SMs"
  # at the time it ran, on the program's timeline: after the kernel's lowering by the
  # offsets of the trace, inside the span of JAX's own events of the same profile
  [lowered] = [e for e in events if e.get("name") == "pallas_call add_kernel"]
  assert advise["ts"] - lowered["ts"] == pytest.approx(40.0 - 10.5, abs=0.01)
  first, last = converted["jax"]
  assert first <= lowered["ts"] <= last, (first, lowered["ts"], last)


# --- a probed kernel's equations under each of its launches (issue 41: "under each kernel")

LABEL = "add_kernel#1f22e0"
HLO_OP = "pallas_prof_add_kernel_1f22e0_add_py_line_12_.1"     # as XLA names the op
PROBES = {"regions": [{"label": "line 10: load", "eqns": [0, 1], "kind": "load"},
                      {"label": "line 11: add", "eqns": [2], "kind": "compute"},
                      {"label": "line 12: store", "eqns": [3], "kind": "store"}],
          # two CTAs, each 100 ns: load 50, add 20, store 30 (shares 0.5, 0.2, 0.3)
          "ctas": [{"sm": 0, "program": p, "start_ns": 1000 * p, "end_ns": 1000 * p + 100,
                    "boundaries_ns": [1000 * p + b for b in (0, 50, 70, 100)]}
                   for p in (0, 1)]}
LAUNCHES_PS = [(7_000_000, 4_000_000), (20_000_000, 2_000_000)]   # (offset, duration)


def _with_gpu_launches(target: str, hlo_op: str = HLO_OP) -> None:
  """Adds a GPU plane to a real (CPU) profile, as XLA's GPU profiler writes one: a stream
  line whose kernel events carry the op in an `hlo_op` stat, one by reference."""
  m = xplane.messages()
  space = m["XSpace"].FromString(open(target, "rb").read())
  gpu = space.planes.add(id=len(space.planes) + 1, name="/device:GPU:0")
  gpu.event_metadata[1].id, gpu.event_metadata[1].name = 1, "add_kernel"
  gpu.stat_metadata[1].id, gpu.stat_metadata[1].name = 1, "hlo_op"
  gpu.stat_metadata[2].id, gpu.stat_metadata[2].name = 2, hlo_op
  line = gpu.lines.add(id=7, display_id=7, name="Stream #7(Compute)", timestamp_ns=1000)
  for i, (offset, duration) in enumerate(LAUNCHES_PS):
    event = line.events.add(metadata_id=1, offset_ps=offset, duration_ps=duration)
    if i == 0:
      event.stats.add(metadata_id=1, str_value=hlo_op)
    else:
      event.stats.add(metadata_id=1, ref_value=2)
  with open(target, "wb") as f:
    f.write(space.SerializeToString())


def _probed_document(start_ns: int = START_NS) -> dict:
  from pallas_prof.instrument import probe_tracks
  events = DOCUMENT["traceEvents"] + probe_tracks.perfetto_events(LABEL, PROBES)
  return {"traceEvents": events, "otherData": {"trace_start_unix_ns": start_ns}}


def _equations(target: str):
  space = xplane.messages()["XSpace"].FromString(open(target, "rb").read())
  [plane] = [p for p in space.planes if p.name == xplane.PLANE_NAME]
  names = {k: v.name for k, v in plane.event_metadata.items()}
  lines = {line.name: line for line in plane.lines}
  line = lines.get(f"equations {LABEL}")
  return lines, [(names[e.metadata_id], (e.offset_ps, e.duration_ps))
                 for e in (line.events if line is not None else [])]


def test_the_equations_nest_inside_each_launch_of_their_kernel(tmp_path):
  target = _jax_profile(tmp_path / "logdir")
  _with_gpu_launches(target)
  xplane.add_to_profile(_perfetto(tmp_path, _probed_document()), str(tmp_path / "logdir"))
  lines, events = _equations(target)
  # the probe tracks' own clock is not the profile's: they are not lines of their own
  assert not any(name.startswith("SM ") for name in lines)
  base = 1000 * 1000                                   # the stream line's timestamp, in ps
  expected = []
  for offset, duration in LAUNCHES_PS:
    start = base + offset
    expected += [(HLO_OP, (start, duration)),
                 ("line 10: load", (start, duration // 2)),
                 ("line 11: add", (start + duration // 2, duration // 5)),
                 ("line 12: store", (start + duration // 2 + duration // 5,
                                     duration * 3 // 10))]
  assert events == expected


def test_a_kernel_with_no_launch_in_the_profile_gets_no_equations_line(tmp_path):
  target = _jax_profile(tmp_path / "logdir")
  _with_gpu_launches(target, hlo_op="pallas_prof_other_kernel_abcdef_x_py_line_1_.1")
  xplane.add_to_profile(_perfetto(tmp_path, _probed_document()), str(tmp_path / "logdir"))
  lines, events = _equations(target)
  assert events == [] and set(lines) == {"pallas-prof", "kernel add_kernel"}


NESTED = textwrap.dedent("""
    import json, sys
    from xprof.convert import raw_to_tool_data
    # the streaming trace viewer's converter: the one XProf's UI asks for
    data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "trace_viewer@", {})
    print(json.dumps(json.loads(data)["traceEvents"]))
""")


@pytest.mark.skipif(_xprof_python() is None,
                    reason="xprof is not importable here (it is no dependency of pallas-prof): "
                           "pip install xprof, or set PALLAS_PROF_XPROF_PYTHON to a Python "
                           "that has it, to check the nesting with XProf's own converter")
def test_xprofs_trace_viewer_shows_the_equations_inside_each_launch(tmp_path):
  target = _jax_profile(tmp_path / "logdir")
  _with_gpu_launches(target)
  xplane.add_to_profile(_perfetto(tmp_path, _probed_document()), str(tmp_path / "logdir"))
  done = subprocess.run([_xprof_python(), "-c", NESTED, target], capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  events = json.loads(done.stdout.strip().splitlines()[-1])
  processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
  [gpu] = [pid for pid, name in processes.items() if name.endswith("/device:GPU:0")]
  [ours] = [pid for pid, name in processes.items() if name.endswith(xplane.PLANE_NAME)]
  [tid] = [e["tid"] for e in events if e["name"] == "thread_name" and e["pid"] == ours
           and e["args"]["name"] == f"equations {LABEL}"]
  launches = sorted((e["ts"], e["dur"]) for e in events
                    if e.get("ph") == "X" and e["pid"] == gpu and e["name"] == "add_kernel")
  assert len(launches) == 2
  mine = [e for e in events if e.get("ph") == "X" and e["pid"] == ours and e["tid"] == tid]
  for ts, dur in launches:
    inside = [e for e in mine if ts <= e["ts"] and e["ts"] + e["dur"] <= ts + dur + 1e-6]
    names = [e["name"] for e in sorted(inside, key=lambda e: (e["ts"], -e["dur"]))]
    # the kernel's op spanning the launch, its regions in program order under it
    assert names == [HLO_OP, "line 10: load", "line 11: add", "line 12: store"], names
    [parent] = [e for e in inside if e["name"] == HLO_OP]
    assert (parent["ts"], parent["dur"]) == (ts, dur)
  assert len(mine) == 8
