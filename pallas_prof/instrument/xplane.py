"""pallas-prof's trace as an XSpace (`.xplane.pb`), the file XProf and TensorBoard's profile
plugin read from `<logdir>/plugins/profile/<session>/`, beside the one jax.profiler writes.

The schema is XLA's tsl/profiler/protobuf/xplane.proto (package tensorflow.profiler); no
installed package ships its generated module, so it is declared here, field for field, and
encoded by protobuf (a dependency of the OpenTelemetry exporters pallas-prof uses). Each
process/thread of pallas-prof's Perfetto trace (trace.perfetto.json: the run's spans, the
lowering of each equation, compiles, profiles with their verdicts and hot equations, the
advice, and on a GPU the probes' per-equation tracks) becomes one line of one plane, its
complete events become events with their args as stats, at the wall-clock time they ran
(docs/xprof.md says what XProf shows of it).
"""
from __future__ import annotations

import functools
import glob
import json
import os
import re
import socket
import stat

from ..safe_files import write_atomic
from .conventions import PALLAS_HLO_OP, PALLAS_KERNEL, PALLAS_SHARE

PLANE_NAME = "/device:CUSTOM:pallas-prof"  # XProf's trace viewer shows these as devices
FILE_SUFFIX = ".xplane.pb"
GPU_PLANE_PREFIX = "/device:GPU:"       # XLA's GPU profiler's planes, one per device

_INT64, _UINT64, _DOUBLE, _STRING, _BYTES = 3, 4, 1, 9, 12     # FieldDescriptorProto types
_REPEATED = 3
# message -> (field name, number, type or message name, repeated, oneof index)
_SCHEMA = {
    "XSpace": [("planes", 1, "XPlane", True, None), ("errors", 2, _STRING, True, None),
               ("warnings", 3, _STRING, True, None), ("hostnames", 4, _STRING, True, None)],
    "XPlane": [("id", 1, _INT64, False, None), ("name", 2, _STRING, False, None),
               ("lines", 3, "XLine", True, None),
               ("event_metadata", 4, "XPlane.EventMetadataEntry", True, None),
               ("stat_metadata", 5, "XPlane.StatMetadataEntry", True, None),
               ("stats", 6, "XStat", True, None)],
    "XLine": [("id", 1, _INT64, False, None), ("display_id", 10, _INT64, False, None),
              ("name", 2, _STRING, False, None), ("display_name", 11, _STRING, False, None),
              ("timestamp_ns", 3, _INT64, False, None), ("duration_ps", 9, _INT64, False, None),
              ("events", 4, "XEvent", True, None)],
    "XEvent": [("metadata_id", 1, _INT64, False, None), ("offset_ps", 2, _INT64, False, 0),
               ("num_occurrences", 5, _INT64, False, 0), ("duration_ps", 3, _INT64, False, None),
               ("stats", 4, "XStat", True, None)],
    "XStat": [("metadata_id", 1, _INT64, False, None), ("double_value", 2, _DOUBLE, False, 0),
              ("uint64_value", 3, _UINT64, False, 0), ("int64_value", 4, _INT64, False, 0),
              ("str_value", 5, _STRING, False, 0), ("bytes_value", 6, _BYTES, False, 0),
              ("ref_value", 7, _UINT64, False, 0)],
    "XEventMetadata": [("id", 1, _INT64, False, None), ("name", 2, _STRING, False, None),
                       ("display_name", 4, _STRING, False, None),
                       ("metadata", 3, _BYTES, False, None), ("stats", 5, "XStat", True, None),
                       ("child_id", 6, _INT64, True, None)],
    "XStatMetadata": [("id", 1, _INT64, False, None), ("name", 2, _STRING, False, None),
                      ("description", 3, _STRING, False, None)],
}
_ONEOF = {"XEvent": "data", "XStat": "value"}
_MAPS = {"EventMetadataEntry": "XEventMetadata", "StatMetadataEntry": "XStatMetadata"}


@functools.lru_cache(maxsize=1)
def messages() -> dict:
  """The XSpace schema's message classes, by name (XSpace, XPlane, XLine, XEvent, ...)."""
  # lazy: keeps google.protobuf out of this module's import (start-up time)
  from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
  package = "tensorflow.profiler"
  file = descriptor_pb2.FileDescriptorProto(name="pallas_prof/xplane.proto", package=package,
                                            syntax="proto3")
  for name, fields in _SCHEMA.items():
    message = file.message_type.add(name=name)
    if name in _ONEOF:
      message.oneof_decl.add(name=_ONEOF[name])
    for field_name, number, kind, repeated, oneof in fields:
      _add_field(message, field_name, number, kind, repeated, oneof, package)
    if name == "XPlane":
      for entry, value in _MAPS.items():
        nested = message.nested_type.add(name=entry)
        nested.options.map_entry = True
        _add_field(nested, "key", 1, _INT64, False, None, package)
        _add_field(nested, "value", 2, value, False, None, package)
  pool = descriptor_pool.DescriptorPool()
  pool.Add(file)
  return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
          for name in _SCHEMA}


def _add_field(message, name, number, kind, repeated, oneof, package) -> None:
  field = message.field.add(name=name, number=number, label=_REPEATED if repeated else 1)
  if isinstance(kind, str):
    field.type, field.type_name = 11, f".{package}.{kind}"          # a message
  else:
    field.type = kind
  if oneof is not None:
    field.oneof_index = oneof


def from_trace_events(events: list[dict], start_ns: int, hostname: str | None = None,
                      launches: dict | None = None) -> bytes:
  """An XSpace of one plane (PLANE_NAME) holding `events` (Chrome trace-event dicts, `ts` and
  `dur` in microseconds from the trace's start) at `start_ns` (the lines' time base: ns
  since the Unix epoch, or since the profile's start where one is joined). Thread names
  become line names. A probed kernel's tracks (probe_tracks.py: its own clock, not the
  trace's) become one line of its equations under each of its launches in `launches`
  (kernel_launches: the profile's own), or nothing where it has none there."""
  m = messages()
  space = m["XSpace"](hostnames=[hostname or socket.gethostname()])
  plane = space.planes.add(id=1, name=PLANE_NAME)
  names = {(e.get("pid"), e.get("tid")): str(e.get("args", {}).get("name", ""))
           for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
  probed = _probed_kernels(events)
  lines: dict = {}
  event_ids: dict[str, int] = {}
  stat_ids: dict[str, int] = {}
  for e in sorted((e for e in events if e.get("ph") == "X"
                                and e.get("pid") not in probed.values()),
                  key=lambda e: float(e["ts"])):
    key = (e.get("pid"), e.get("tid"))
    if key not in lines:
      name = names.get(key) or f"thread {key[1]}"
      lines[key] = plane.lines.add(id=len(lines) + 1, display_id=len(lines) + 1, name=name,
                                   timestamp_ns=int(start_ns))
    line = lines[key]
    event = line.events.add(metadata_id=_metadata_id(plane, event_ids, str(e.get("name", ""))),
                            offset_ps=round(float(e["ts"]) * 1e6),
                            duration_ps=max(0, round(float(e.get("dur", 0)) * 1e6)))
    for stat_name, value in (e.get("args") or {}).items():
      stat = event.stats.add(metadata_id=_stat_id(plane, stat_ids, str(stat_name)))
      _set_value(stat, value)
  for n, (label, pid) in enumerate(probed.items(), start=len(lines) + 1):
    shares = equation_shares([e for e in events if e.get("pid") == pid])
    _add_equations_line(plane, n, label, shares, launches_of(label, launches or {}),
                        event_ids, stat_ids)
  for line in plane.lines:
    end = max((ev.offset_ps + ev.duration_ps for ev in line.events), default=0)
    line.duration_ps = end
  return space.SerializeToString()


def _probed_kernels(events: list[dict]) -> dict[str, int]:
  """kernel label -> the trace's process of its probe tracks ("probes <label>: ...")."""
  out = {}
  for e in events:
    name = str((e.get("args") or {}).get("name", ""))
    if e.get("ph") == "M" and e.get("name") == "process_name" and name.startswith("probes "):
      out[name[len("probes "):].split(":")[0]] = e.get("pid")
  return out


def equation_shares(events: list[dict]) -> list[tuple[str, dict, float]]:
  """(region name, its args, its share of the sampled CTAs' time) of one probed kernel's
  tracks, in the order its regions first run: the part of each launch each region takes."""
  total = sum(float(e.get("dur", 0)) for e in events if e.get("cat") == "cta")
  regions: dict[str, list] = {}
  for e in sorted((e for e in events if e.get("cat") == "probe"), key=lambda e: float(e["ts"])):
    entry = regions.setdefault(str(e.get("name", "")), [e.get("args") or {}, 0.0])
    entry[1] += float(e.get("dur", 0))
  return [(name, args, took / total) for name, (args, took) in regions.items() if total > 0]


def hlo_name_prefix(label: str) -> str:
  """The start of the HLO instruction name XLA gives the op of kernel `label`: its
  name-stack scope (backend/running/xla_names.py) with what is not a letter, digit or
  underscore made an underscore, as XLA names instructions."""
  return re.sub(r"[^A-Za-z0-9_]", "_", f"pallas_prof[{label}")


def kernel_launches(space) -> dict[str, list[tuple[int, int]]]:
  """HLO op name -> (start, duration) in ps on the profile's timeline, of each launch of a
  pallas-prof kernel on the profile's GPU planes: the events whose `hlo_op` stat (XLA's
  GPU profiler sets it on each kernel it records), or name, is a pallas-prof op."""
  out: dict[str, set] = {}
  for plane in space.planes:
    if not plane.name.startswith(GPU_PLANE_PREFIX):
      continue
    stat_names = {k: v.name for k, v in plane.stat_metadata.items()}
    hlo_stat = next((k for k, name in stat_names.items() if name == "hlo_op"), None)
    for line in plane.lines:
      for event in line.events:
        # a kernel under several annotations has their ops joined by commas
        for op in _hlo_op(plane, event, hlo_stat).split(","):
          if op.strip().startswith("pallas_prof_"):
            start = line.timestamp_ns * 1000 + event.offset_ps
            out.setdefault(op.strip(), set()).add((start, event.duration_ps))
  return {op: sorted(spans) for op, spans in out.items()}


def _hlo_op(plane, event, hlo_stat) -> str:
  """The event's `hlo_op` stat (a string, or a reference to one), else its name."""
  for stat in list(event.stats) + list(plane.event_metadata[event.metadata_id].stats):
    if stat.metadata_id == hlo_stat:
      if stat.WhichOneof("value") == "ref_value":
        return plane.stat_metadata[stat.ref_value].name
      return stat.str_value
  return plane.event_metadata[event.metadata_id].name


def launches_of(label: str, launches: dict) -> list[tuple[str, int, int]]:
  """(HLO op name, start ps, duration ps) of each launch of kernel `label`, in time order."""
  prefix = hlo_name_prefix(label)
  return sorted(((op, start, dur) for op, spans in launches.items()
                 if op.startswith(prefix) for start, dur in spans), key=lambda x: x[1])


def _add_equations_line(plane, line_id: int, label: str, shares, launches, event_ids,
                        stat_ids) -> None:
  """One line, `equations <label>`: each launch of the kernel as an event named for its
  op, spanning it, with the kernel's regions nested inside in program order, each as
  wide as its measured share (the probes measured a replay, not this launch: the widths
  are shares of it, the order the kernel's). None without a launch in the profile."""
  if not launches or not shares:
    return
  line = plane.lines.add(id=line_id, display_id=line_id, name=f"equations {label}",
                         timestamp_ns=0)       # offsets on the profile's own time base

  def add(name: str, start: int, duration: int, stats: dict) -> None:
    event = line.events.add(metadata_id=_metadata_id(plane, event_ids, name),
                            offset_ps=start, duration_ps=max(0, duration))
    for stat_name, value in stats.items():
      _set_value(event.stats.add(metadata_id=_stat_id(plane, stat_ids, stat_name)), value)

  for op, start, duration in launches:
    add(op, start, duration, {PALLAS_KERNEL: label, PALLAS_HLO_OP: op})
    done = 0.0
    for name, args, share in shares:
      # edges from the running sum, kept inside the launch: children never overhang it
      lo = start + min(duration, round(duration * done))
      done += share
      hi = start + min(duration, round(duration * done))
      add(name, lo, hi - lo, {PALLAS_KERNEL: label, PALLAS_SHARE: round(share, 4),
                              **{f"pallas.{k}": v for k, v in args.items()}})


def _interned(table, ids: dict, name: str) -> int:
  """The id of `name` in one of the plane's metadata tables (events' or stats'), added there
  the first time it is asked for."""
  if name not in ids:
    ids[name] = len(ids) + 1
    table[ids[name]].id = ids[name]
    table[ids[name]].name = name
  return ids[name]


def _metadata_id(plane, ids: dict, name: str) -> int:
  return _interned(plane.event_metadata, ids, name)


def _stat_id(plane, ids: dict, name: str) -> int:
  return _interned(plane.stat_metadata, ids, name)


def _set_value(stat, value) -> None:
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    stat.str_value = str(value)
  elif isinstance(value, int) and -2**63 <= value < 2**63:
    stat.int64_value = value
  else:
    stat.double_value = float(value)


class ProfileNotFound(Exception):
  """No jax.profiler session with an `.xplane.pb` file under the directory given."""


def add_to_profile(perfetto_path: str, logdir: str) -> str:
  """Adds pallas-prof's plane (from its Perfetto trace at `perfetto_path`) to the newest
  session jax.profiler wrote under `logdir`, inside that session's XSpace file for this
  host, so that XProf's trace viewer shows it on the program's own timeline. Returns the
  file's path. The file is replaced whole (written beside it, then renamed): a failure
  (a full disk) leaves JAX's profile as it was, no part of the new one beside it, and
  raises an OSError naming the file. A plane of an earlier call is replaced, not repeated."""
  with open(perfetto_path) as f:
    document = json.load(f)
  start_ns = int((document.get("otherData") or {}).get("trace_start_unix_ns") or 0)
  if not start_ns:
    raise ValueError(f"{perfetto_path} has no otherData.trace_start_unix_ns: it was not "
                     "written by this pallas-prof, whose trace holds the run's start time")
  target = _session_file(logdir)
  space_class = messages()["XSpace"]
  with open(target, "rb") as f:
    space = space_class.FromString(f.read())
  # JAX's profile keeps its lines' times from the session's start (the "Task Environment"
  # plane's profile_start_time): ours are put on the same base
  start_ns -= _profile_start_ns(space)
  kept = [p for p in space.planes if p.name != PLANE_NAME]
  launches = kernel_launches(space)
  ours = space_class.FromString(from_trace_events(document.get("traceEvents", []), start_ns,
                                                  launches=launches))
  plane = ours.planes[0]
  plane.id = max((p.id for p in kept), default=0) + 1
  del space.planes[:]
  space.planes.extend(kept + [plane])
  try:
    write_atomic(target, space.SerializeToString(), mode=stat.S_IMODE(os.stat(target).st_mode))
  except OSError as e:
    # the temporary file is gone and JAX's file as it was: the error names the file kept
    raise OSError(e.errno, e.strerror, target) from None
  return target


def _profile_start_ns(space) -> int:
  """The wall-clock time a profile's line times count from: 0 where it does not say."""
  for plane in space.planes:
    names = {k: v.name for k, v in plane.stat_metadata.items()}
    for stat in plane.stats:
      if names.get(stat.metadata_id) == "profile_start_time":
        return int(stat.uint64_value or stat.int64_value)
  return 0


def _session_file(logdir: str) -> str:
  """This host's XSpace file of the newest session under `logdir`/plugins/profile."""
  sessions = sorted(glob.glob(os.path.join(glob.escape(logdir), "plugins", "profile", "*")),
                    key=os.path.getmtime)
  for session in reversed(sessions):
    files = sorted(glob.glob(os.path.join(glob.escape(session), "*" + FILE_SUFFIX)))
    if files:
      mine = os.path.join(session, socket.gethostname() + FILE_SUFFIX)
      return mine if mine in files else files[0]
  raise ProfileNotFound(
      f"no jax.profiler session under {os.path.join(logdir, 'plugins', 'profile')}: take one "
      f"with jax.profiler.trace({logdir!r}) (or `pallas-prof run --xprof {logdir} ...`) first")
