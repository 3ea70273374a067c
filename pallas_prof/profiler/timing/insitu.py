"""In-situ runtimes: the user's program as it really ran, captured with CUPTI.

Triton's Proton profiler (`triton.profiler`, shipped in the triton wheel)
subscribes to CUPTI and records every kernel launched in the process,
including the pallas-prof kernels XLA launches through its Triton custom
call. Kernels are matched to the registry's records by name:

    with insitu.capture() as cap:
      run_the_program()
    cap.result.kernels["softmax_kernel"].launches

CUPTI allows one subscriber per process: jax.profiler traces, Nsight
Compute and Nsight Systems hold it while they run. `capture()` checks for
them first and raises CuptiBusy saying which one, rather than recording
nothing.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from typing import Any, Iterable

from ..driver import ProfilerError
from ..schema import InsituStats


class CuptiBusy(ProfilerError):
  """Another tool holds CUPTI."""


class InsituUnavailable(ProfilerError):
  pass


@dataclasses.dataclass
class KernelTimes:
  name: str
  launches: int
  total_ns: float
  device_ids: list[int]
  # per device, where the capture could tell devices apart (a trace with device marks)
  launches_by_device: dict[int, int] = dataclasses.field(default_factory=dict)
  ns_by_device: dict[int, float] = dataclasses.field(default_factory=dict)

  @property
  def mean_s(self) -> float:
    return self.total_ns / 1e9 / self.launches if self.launches else 0.0

  def add(self, dur_ns: float, device: int | None) -> None:
    self.launches += 1
    self.total_ns += dur_ns
    if device is None:
      return
    self.launches_by_device[device] = self.launches_by_device.get(device, 0) + 1
    self.ns_by_device[device] = self.ns_by_device.get(device, 0.0) + dur_ns
    if device not in self.device_ids:
      self.device_ids.append(device)


@dataclasses.dataclass
class InsituResult:
  kernels: dict[str, KernelTimes]
  devices: dict[str, Any]          # Proton's device info (arch, SMs, clocks)
  path: str | None
  notes: list[str]

  def stats_for(self, name: str, shared_with: Iterable[str] = (),
                device: int | None = None) -> InsituStats | None:
    """The kernel's in-situ numbers; with `device`, its launches on that device
    alone where the capture told devices apart."""
    k = self.kernels.get(name)
    if k is None:
      return None
    if device is not None and k.launches_by_device:
      n = k.launches_by_device.get(device, 0)
      ns = k.ns_by_device.get(device, 0.0)
      return InsituStats(name=name, launches=n, total_s=ns / 1e9, mean_s=ns / 1e9 / n if n else 0.0,
                         device_ids=[device] if n else [], shared_name_with=list(shared_with),
                         launches_by_device=dict(k.launches_by_device))
    return InsituStats(name=name, launches=k.launches, total_s=k.total_ns / 1e9, mean_s=k.mean_s,
                       device_ids=k.device_ids, shared_name_with=list(shared_with),
                       launches_by_device=dict(k.launches_by_device))


# --- who holds CUPTI --------------------------------------------------------------------------

def cupti_holders(environ=None) -> list[str]:
  """Tools that hold (or will hold) CUPTI in this process, in plain words."""
  environ = os.environ if environ is None else environ
  holders = []
  if _jax_trace_active():
    holders.append("a jax.profiler trace is running (jax.profiler.start_trace / trace())")
  for variable in ("CUDA_INJECTION64_PATH", "LD_PRELOAD"):
    text = environ.get(variable, "")
    low = text.lower()
    if not low:
      continue
    if "nsight-compute" in low or "treelauncher" in low or "/ncu" in low:
      holders.append(f"Nsight Compute (ncu) injected itself ({variable}={text})")
    elif "nsys" in low or "nsight-systems" in low or "toolsinjection" in low:
      holders.append(f"Nsight Systems (nsys) injected itself ({variable}={text})")
    elif "sanitizer" in low:
      holders.append(f"compute-sanitizer injected itself ({variable}={text})")
    elif variable == "CUDA_INJECTION64_PATH":
      holders.append(f"a CUDA injection library is loaded ({variable}={text})")
  if environ.get("NSYS_PROFILING_SESSION_ID") and not any("nsys" in h for h in holders):
    holders.append("Nsight Systems (nsys) session "
                   f"{environ.get('NSYS_PROFILING_SESSION_ID')} is running")
  return holders


def _jax_trace_active() -> bool:
  from ...backend import compat
  return compat.jax_profiler_session_active()


# --- Proton's output ---------------------------------------------------------------------------

def parse_hatchet(data) -> tuple[dict[str, KernelTimes], dict[str, Any]]:
  """Kernel name -> launches, total time, devices; from Proton's tree JSON
  ([tree, device info]). The same kernel under several scopes is summed."""
  if isinstance(data, list):
    tree = data[0] if data else {}
    devices = data[1] if len(data) > 1 and isinstance(data[1], dict) else {}
  else:
    tree, devices = data, {}
  kernels: dict[str, KernelTimes] = {}

  def visit(node):
    frame = node.get("frame", {})
    metrics = node.get("metrics", {})
    name = frame.get("name")
    time_ns = metrics.get("time (ns)")
    count = metrics.get("count")
    if name and name != "ROOT" and time_ns is not None and count and "device_id" in metrics:
      k = kernels.setdefault(name, KernelTimes(name, 0, 0.0, []))
      k.launches += int(count)
      k.total_ns += float(time_ns)
      dev = int(metrics["device_id"])
      if dev not in k.device_ids:
        k.device_ids.append(dev)
    for child in node.get("children", []):
      visit(child)

  visit(tree)
  return kernels, devices


def parse_chrome_traces(text: str, device_count: int) -> tuple[dict[str, KernelTimes], list[str]]:
  """Kernel name -> launches and time per device, from Proton's Chrome-trace output
  (one JSON document per CUDA stream, each stream's GPU told by its device marks:
  devicemarks.py)."""
  from .devicemarks import NAME as MARKER, device_of_document
  kernels: dict[str, KernelTimes] = {}
  notes: list[str] = []
  for doc in _json_documents(text):
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    launches = [e for e in events if isinstance(e, dict) and "dur" in e and e.get("name")]
    marks = sum(1 for e in launches if e["name"] == MARKER)
    device = device_of_document(marks, device_count)
    if device is None:
      notes.append(f"{len(launches) - marks} launch(es) on a CUDA stream with {marks} device "
                   "mark(s): counted, but on no particular GPU")
    for e in launches:
      if e["name"] == MARKER:
        continue
      # Chrome-trace times are in microseconds (Proton writes displayTimeUnit "us")
      kernels.setdefault(e["name"], KernelTimes(e["name"], 0, 0.0, [])).add(
          float(e["dur"]) * 1e3, device)
  return kernels, notes


def _json_documents(text: str):
  decoder = json.JSONDecoder()
  i = 0
  while True:
    while i < len(text) and text[i].isspace():
      i += 1
    if i >= len(text):
      return
    doc, i = decoder.raw_decode(text, i)
    yield doc


def visible_gpus() -> int:
  try:
    from .. import driver
    driver.init()
    return driver.device_count()
  except Exception:  # noqa: BLE001 - no driver: Proton will say so
    return 0


# --- the capture ------------------------------------------------------------------------------

class capture:
  """Context manager: records the kernels the program launches inside it."""

  def __init__(self, directory: str | None = None, keep: bool = False,
               devices: int | None = None):
    self.directory = directory
    self.keep = keep or directory is not None
    self.devices = devices          # visible GPUs (None: ask the driver)
    self.result: InsituResult | None = None
    self._session = None
    self._proton = None
    self._tmp = None
    self._data = "tree"
    self._mark_error = ""

  def __enter__(self) -> "capture":
    holders = cupti_holders()
    if holders:
      raise CuptiBusy("in-situ kernel times need CUPTI, which allows one subscriber per "
                      "process, and " + "; ".join(holders) + ". Stop that tool (or run "
                      "pallas-prof without it) to capture in-situ times.")
    try:
      import triton.profiler as proton
    except Exception as e:  # noqa: BLE001 - libproton may fail to load without CUDA
      raise InsituUnavailable(f"Triton's Proton profiler is unavailable: {e}") from None
    self._proton = proton
    self._tmp = self.directory or tempfile.mkdtemp(prefix="pallas-prof-insitu-")
    os.makedirs(self._tmp, exist_ok=True)
    name = os.path.join(self._tmp, "insitu")
    if self.devices is None:
      self.devices = visible_gpus()
    # a tree per kernel on one GPU; on several, a trace with device marks (devicemarks.py)
    self._data = "trace" if self.devices > 1 else "tree"
    try:
      self._session = proton.start(name, backend="cupti", context="shadow", data=self._data)
    except Exception as e:  # noqa: BLE001
      raise _explain(e) from e
    if self._session is None:
      raise InsituUnavailable("Proton ignored start(): profiling is disabled "
                              "(TRITON_PROTON_DISABLE) or proton's command line is running")
    return self

  def __exit__(self, exc_type, exc, tb) -> None:
    if self._session is None:
      return None
    trace = self._data == "trace"
    if trace:
      self._mark_streams()
    try:
      self._proton.finalize(self._session, "chrome_trace" if trace else "hatchet")
    except Exception as e:  # noqa: BLE001
      if exc_type is None:
        raise _explain(e) from e
      return None
    path = _output_file(self._tmp)
    notes = [self._mark_error] if self._mark_error else []
    try:
      with open(path) as f:
        if trace:
          kernels, more = parse_chrome_traces(f.read(), self.devices)
          devices: dict[str, Any] = {}
          notes += more
        else:
          kernels, devices = parse_hatchet(json.load(f))
    except (OSError, ValueError) as e:
      kernels, devices = {}, {}
      notes.append(f"could not read Proton's output {path}: {e}")
    if not kernels:
      notes.append("CUPTI recorded no kernel: nothing ran on the GPU inside the capture, or "
                   "another tool took CUPTI (a jax.profiler trace started inside it?)")
    self.result = InsituResult(kernels, devices, path if self.keep else None, notes)
    if not self.keep:
      shutil.rmtree(self._tmp, ignore_errors=True)
    return None


  def _mark_streams(self) -> None:
    from .devicemarks import mark_jax_devices
    try:
      why_not = mark_jax_devices()
    except Exception as e:  # noqa: BLE001 - the capture goes on, without per-device counts
      why_not = f"{type(e).__name__}: {e}"
    if why_not:
      self._mark_error = f"launches not attributed to GPUs: could not mark XLA's streams ({why_not})"


def _output_file(directory: str) -> str:
  names = sorted(n for n in os.listdir(directory) if n.startswith("insitu"))
  known = [n for n in names if n.endswith((".hatchet", ".chrome_trace"))]
  return os.path.join(directory, (known or names or ["insitu.hatchet"])[0])


def _explain(error: Exception) -> ProfilerError:
  text = str(error)
  if "MULTIPLE_SUBSCRIBERS" in text.upper() or "subscriber" in text.lower():
    return CuptiBusy("CUPTI refused Proton: another subscriber (jax.profiler, ncu, nsys) holds "
                     f"it in this process ({text})")
  return InsituUnavailable(f"Proton failed: {type(error).__name__}: {text}")


def match(result: InsituResult, records, device: int | None = None) -> dict[str, InsituStats]:
  """Record label -> its in-situ stats, matched by kernel name (on `device` alone
  when given and the capture told devices apart). Records that share a name
  share the numbers (listed in shared_name_with)."""
  by_name: dict[str, list[str]] = {}
  for rec in records:
    by_name.setdefault(rec.name, []).append(rec.label)
  out = {}
  for rec in records:
    others = [label for label in by_name[rec.name] if label != rec.label]
    stats = result.stats_for(rec.name, others, device)
    if stats is not None:
      out[rec.label] = stats
  return out
