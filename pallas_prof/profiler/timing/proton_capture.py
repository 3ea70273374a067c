"""In-situ kernel times through Triton's Proton: never chosen on its own any more.

Proton was pallas-prof's first in-situ source (it ships in the triton wheel). Run over
jitted functions whose CUDA graphs XLA made before the capture began (any function that
ran before), it fails on every Triton release tried on the H200: on triton 3.9 it ends
the process (`std::out_of_range ... map::at` thrown on a CUPTI thread), and on triton
3.6 it lives but loses the kernels launched from those graphs (most captures counted
a backward kernel once where it ran three times; bench/results/README.md, "In-situ
capture"). So the capture never picks it (PROVEN_SAFE is empty); it stays
reachable as `capture(source="proton")` so that the probe can show the defect on a
new release, and a release shown safe that way can be added here.

Proton writes its results to a file: a tree per kernel on one GPU (hatchet), or, on
several, one Chrome trace per CUDA stream whose GPU is told by device marks
(devicemarks.py).
"""
from __future__ import annotations

import json
import os
from typing import Any

from ...backend.compiling import triton_compat
from . import devicemarks

# Triton releases (major.minor) on which many captures over jitted functions whose CUDA
# graphs were made before the capture both left the process alive and counted every
# launch (bench/probes/capture_abort_probe.sh): the condition for choosing Proton at all
PROVEN_SAFE: tuple[str, ...] = ()


def triton_release() -> str:
  return ".".join(str(n) for n in triton_compat.triton_version())


def why_unsafe() -> str | None:
  """None where Proton may capture here; else why not, in words."""
  release = triton_release()
  if release in PROVEN_SAFE:
    return None
  return (f"Triton's Proton is not used on triton {release}: over CUDA graphs made before the "
          "capture it ends the process (triton 3.9) or loses their launches (triton 3.6)")


def parse_hatchet(data, kernel_times) -> tuple[dict, dict[str, Any]]:
  """Kernel name -> launches, total time, devices; from Proton's tree JSON
  ([tree, device info]). The same kernel under several scopes is summed.
  `kernel_times(name)` makes an empty record."""
  if isinstance(data, list):
    tree = data[0] if data else {}
    devices = data[1] if len(data) > 1 and isinstance(data[1], dict) else {}
  else:
    tree, devices = data, {}
  kernels: dict = {}

  def visit(node):
    frame = node.get("frame", {})
    metrics = node.get("metrics", {})
    name = frame.get("name")
    time_ns = metrics.get("time (ns)")
    count = metrics.get("count")
    if name and name != "ROOT" and time_ns is not None and count and "device_id" in metrics:
      k = kernels.setdefault(name, kernel_times(name))
      k.launches += int(count)
      k.total_ns += float(time_ns)
      dev = int(metrics["device_id"])
      if dev not in k.device_ids:
        k.device_ids.append(dev)
    for child in node.get("children", []):
      visit(child)

  visit(tree)
  return kernels, devices


def parse_chrome_traces(text: str, device_count: int, kernel_times) -> tuple[dict, list[str]]:
  """Kernel name -> launches and time per device, from Proton's Chrome-trace output
  (one JSON document per CUDA stream, each stream's GPU told by its device marks)."""
  kernels: dict = {}
  notes: list[str] = []
  for doc in _json_documents(text):
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    launches = [e for e in events if isinstance(e, dict) and "dur" in e and e.get("name")]
    marks = sum(1 for e in launches if e["name"] == devicemarks.NAME)
    device = devicemarks.device_of_document(marks, device_count)
    if device is None:
      notes.append(f"{len(launches) - marks} launch(es) on a CUDA stream with {marks} device "
                   "mark(s): counted, but on no particular GPU")
    for e in launches:
      if e["name"] == devicemarks.NAME:
        continue
      # Chrome-trace times are in microseconds (Proton writes displayTimeUnit "us")
      kernels.setdefault(e["name"], kernel_times(e["name"])).add(float(e["dur"]) * 1e3, device)
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


class ProtonSession:
  """One Proton session writing into `folder`; stop() reads its output back."""

  def __init__(self, folder: str, devices: int):
    self.folder, self.devices = folder, devices
    self.trace = devices > 1
    self._proton = None
    self._session = None
    self._mark_error = ""

  def start(self) -> None:
    # lazy: keeps triton out of this module's import (start-up time)
    import triton.profiler as proton
    self._proton = proton
    data = "trace" if self.trace else "tree"
    self._session = proton.start(os.path.join(self.folder, "insitu"), backend="cupti",
                                 context="shadow", data=data)
    if self._session is None:
      raise RuntimeError("Proton ignored start(): profiling is disabled (TRITON_PROTON_DISABLE) "
                         "or proton's command line is running")

  def stop(self, kernel_times) -> tuple[dict, dict[str, Any], list[str], str]:
    """(kernels, Proton's device info, notes, the output file)."""
    if self.trace:
      self._mark_streams()
    self._proton.finalize(self._session, "chrome_trace" if self.trace else "hatchet")
    path = _output_file(self.folder)
    notes = [self._mark_error] if self._mark_error else []
    devices: dict[str, Any] = {}
    try:
      with open(path) as f:
        if self.trace:
          kernels, more = parse_chrome_traces(f.read(), self.devices, kernel_times)
          notes += more
        else:
          kernels, devices = parse_hatchet(json.load(f), kernel_times)
    except (OSError, ValueError) as e:
      kernels = {}
      notes.append(f"could not read Proton's output {path}: {e}")
    return kernels, devices, notes, path

  def _mark_streams(self) -> None:
    try:
      why_not = devicemarks.mark_jax_devices()
    except Exception as e:  # noqa: BLE001 - the capture goes on, without per-device counts
      why_not = f"{type(e).__name__}: {e}"
    if why_not:
      self._mark_error = f"launches not attributed to GPUs: could not mark XLA's streams ({why_not})"


def _output_file(directory: str) -> str:
  names = sorted(n for n in os.listdir(directory) if n.startswith("insitu"))
  known = [n for n in names if n.endswith((".hatchet", ".chrome_trace"))]
  return os.path.join(directory, (known or names or ["insitu.hatchet"])[0])
