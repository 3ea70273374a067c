"""libcupti's PC sampling API (cupti_pcsampling.h) through ctypes: the structs, the
library found, and a sampler on one context (enable, start, stop, read), every result
checked. pcsampling.py's child process drives it.

Why this mechanism. CUPTI's PC sampling API hands back every sampled program
counter (the byte offset in the kernel's function) with its samples per stall
reason. pallas-prof maps those offsets itself, through the cubin's line info,
to the SASS instruction, its PTX line's inlining chain, the generated line,
the equation and the user's line; and it follows the SASS register
dependencies of a stalled instruction back to the load it waits for. Proton's
pcsampling mode (in the triton wheel) aggregates the same samples per source
line with CUPTI's own line lookup (no inlining chain, no PCs), so neither step
is possible on its output; cupti-python (PyPI) binds the activity, callback,
PM-sampling and profiler-host APIs but not PC sampling. So libcupti is called
through ctypes (the struct layouts below are those of cupti_pcsampling.h, the
same in CUDA 12.8 and 13.0), from the libcupti in the triton wheel (the one
Proton runs with), else the nvidia-cuda-cupti wheel's, else the CUDA toolkit's.

Standard library only (and settings.py): the sampling child loads it without JAX.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import sys

from ... import settings

COLLECT_PCS = 16384           # PCs per read of the sampling buffer
STALL_NAME_SIZE = 128


class CuptiUnavailable(RuntimeError):
  pass


# --- cupti_pcsampling.h ---------------------------------------------------------------------

class _StallReason(ctypes.Structure):
  _fields_ = [("pcSamplingStallReasonIndex", ctypes.c_uint32), ("samples", ctypes.c_uint32)]


class _PCData(ctypes.Structure):          # PACKED_ALIGNMENT: packed, then aligned to 8
  _pack_ = 1
  _fields_ = [("size", ctypes.c_size_t), ("cubinCrc", ctypes.c_uint64),
              ("pcOffset", ctypes.c_uint64), ("functionIndex", ctypes.c_uint32),
              ("pad", ctypes.c_uint32), ("functionName", ctypes.c_char_p),
              ("stallReasonCount", ctypes.c_size_t),
              ("stallReason", ctypes.POINTER(_StallReason)),
              ("correlationId", ctypes.c_uint32), ("_align", ctypes.c_uint32)]


class _SamplingData(ctypes.Structure):
  _pack_ = 1
  _fields_ = [("size", ctypes.c_size_t), ("collectNumPcs", ctypes.c_size_t),
              ("totalSamples", ctypes.c_uint64), ("droppedSamples", ctypes.c_uint64),
              ("totalNumPcs", ctypes.c_size_t), ("remainingNumPcs", ctypes.c_size_t),
              ("rangeId", ctypes.c_uint64), ("pPcData", ctypes.POINTER(_PCData)),
              ("nonUsrKernelsTotalSamples", ctypes.c_uint64),
              ("hardwareBufferFull", ctypes.c_uint8), ("_align", ctypes.c_uint8 * 7)]


class _StallData(ctypes.Structure):
  _fields_ = [("count", ctypes.c_size_t), ("indices", ctypes.POINTER(ctypes.c_uint32))]


class _AttributeData(ctypes.Union):
  _fields_ = [("data", ctypes.c_uint64 * 3), ("u32", ctypes.c_uint32),
              ("size", ctypes.c_size_t), ("stall", _StallData), ("ptr", ctypes.c_void_p)]


class _ConfigInfo(ctypes.Structure):
  _fields_ = [("attributeType", ctypes.c_int), ("attributeStatus", ctypes.c_int),
              ("attributeData", _AttributeData)]


class _CtxParams(ctypes.Structure):      # Enable, Disable, Start, Stop
  _fields_ = [("size", ctypes.c_size_t), ("pPriv", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


class _ConfigParams(ctypes.Structure):
  _fields_ = [("size", ctypes.c_size_t), ("pPriv", ctypes.c_void_p), ("ctx", ctypes.c_void_p),
              ("numAttributes", ctypes.c_size_t),
              ("pPCSamplingConfigurationInfo", ctypes.POINTER(_ConfigInfo))]


class _GetDataParams(ctypes.Structure):
  _fields_ = [("size", ctypes.c_size_t), ("pPriv", ctypes.c_void_p), ("ctx", ctypes.c_void_p),
              ("pcSamplingData", ctypes.c_void_p)]


class _NumStallParams(ctypes.Structure):
  _fields_ = [("size", ctypes.c_size_t), ("pPriv", ctypes.c_void_p), ("ctx", ctypes.c_void_p),
              ("numStallReasons", ctypes.POINTER(ctypes.c_size_t))]


class _StallNamesParams(ctypes.Structure):
  _fields_ = [("size", ctypes.c_size_t), ("pPriv", ctypes.c_void_p), ("ctx", ctypes.c_void_p),
              ("numStallReasons", ctypes.c_size_t),
              ("stallReasonIndex", ctypes.POINTER(ctypes.c_uint32)),
              ("stallReasons", ctypes.POINTER(ctypes.c_char_p))]


ATTR_PERIOD, ATTR_STALL, ATTR_SCRATCH, ATTR_HW_BUFFER, ATTR_MODE, ATTR_START_STOP, \
    ATTR_FORMAT, ATTR_DATA_BUFFER = range(1, 9)
MODE_CONTINUOUS = 1
FORMAT_PARSED = 1


def library_candidates() -> list[str]:
  """libcupti paths, best first: PALLAS_PROF_CUPTI, the triton wheel's (Proton's),
  the nvidia-cuda-cupti wheel's, the CUDA toolkit's."""
  out = []
  if settings.value("PALLAS_PROF_CUPTI"):
    out.append(settings.value("PALLAS_PROF_CUPTI"))
  spec = importlib.util.find_spec("triton")
  if spec and spec.origin:
    out += sorted(glob.glob(os.path.join(os.path.dirname(spec.origin), "backends", "nvidia",
                                         "lib", "cupti", "libcupti.so*")))[:1]
  for entry in sys.path:
    out += sorted(glob.glob(os.path.join(entry, "nvidia", "*", "lib", "libcupti.so*")))
  out += sorted(glob.glob("/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so*"))
  out += sorted(glob.glob("/usr/local/cuda*/lib64/libcupti.so*"))
  return list(dict.fromkeys(out))


class Cupti:
  """libcupti's PC sampling API, every result checked."""

  def __init__(self, path: str | None = None):
    errors = []
    for candidate in ([path] if path else library_candidates()):
      try:
        self.lib = ctypes.CDLL(candidate)
        self.path = candidate
        break
      except OSError as e:
        errors.append(f"{candidate}: {e}")
    else:
      raise CuptiUnavailable("no libcupti could be loaded: " + ("; ".join(errors) or
                             "none found (triton wheel, nvidia-cuda-cupti, /usr/local/cuda)"))
    version = ctypes.c_uint32(0)
    ok = self.lib.cuptiGetVersion(ctypes.byref(version)) == 0
    self.version = version.value if ok else None

  def check(self, name: str, params) -> None:
    result = getattr(self.lib, name)(ctypes.byref(params))
    if result != 0:
      text = ctypes.c_char_p()
      self.lib.cuptiGetResultString(result, ctypes.byref(text))
      message = text.value.decode() if text.value else ""
      raise CuptiUnavailable(f"{name} failed: CUPTI error {result} {message}")


class PcSampler:
  """PC sampling on one context: enable() before the module loads, then start(),
  launches, stop(), read()."""

  def __init__(self, cupti: Cupti, context: int):
    self.cupti, self.ctx = cupti, context
    self.names: dict[int, str] = {}
    self.buffers = []

  def _ctx_call(self, name: str) -> None:
    self.cupti.check(name, _CtxParams(ctypes.sizeof(_CtxParams), None, self.ctx))

  def enable(self, period_log2: int) -> None:
    self._ctx_call("cuptiPCSamplingEnable")
    count = ctypes.c_size_t(0)
    self.cupti.check("cuptiPCSamplingGetNumStallReasons", _NumStallParams(
        ctypes.sizeof(_NumStallParams), None, self.ctx, ctypes.pointer(count)))
    n = count.value
    indices = (ctypes.c_uint32 * n)()
    names = [ctypes.create_string_buffer(STALL_NAME_SIZE) for _ in range(n)]
    name_ptrs = (ctypes.c_char_p * n)(*[ctypes.cast(b, ctypes.c_char_p) for b in names])
    self.cupti.check("cuptiPCSamplingGetStallReasons", _StallNamesParams(
        ctypes.sizeof(_StallNamesParams), None, self.ctx, n, indices, name_ptrs))
    self.names = {int(indices[i]): names[i].value.decode() for i in range(n)}
    self.indices = indices
    self.data = self._buffer(COLLECT_PCS, n)
    infos = (_ConfigInfo * 7)()
    settings = [(ATTR_STALL, "stall", _StallData(n, indices)),
                (ATTR_PERIOD, "u32", period_log2),
                (ATTR_SCRATCH, "size", 16 * 2**20),
                (ATTR_DATA_BUFFER, "ptr", ctypes.cast(ctypes.pointer(self.data), ctypes.c_void_p)),
                (ATTR_START_STOP, "u32", 1),
                (ATTR_MODE, "u32", MODE_CONTINUOUS),
                (ATTR_FORMAT, "u32", FORMAT_PARSED)]
    for info, (kind, field, value) in zip(infos, settings, strict=True):
      info.attributeType = kind
      setattr(info.attributeData, field, value)
    self.cupti.check("cuptiPCSamplingSetConfigurationAttribute", _ConfigParams(
        ctypes.sizeof(_ConfigParams), None, self.ctx, len(settings), infos))

  def _buffer(self, pcs: int, reasons: int) -> _SamplingData:
    records = (_PCData * pcs)()
    for r in records:
      stall = (_StallReason * reasons)()
      self.buffers.append(stall)
      r.stallReason = stall
    self.buffers.append(records)
    return _SamplingData(size=ctypes.sizeof(_SamplingData), collectNumPcs=pcs,
                         pPcData=records)

  def start(self) -> None:
    self._ctx_call("cuptiPCSamplingStart")

  def stop(self) -> None:
    self._ctx_call("cuptiPCSamplingStop")

  def disable(self) -> None:
    self._ctx_call("cuptiPCSamplingDisable")

  def read(self, into: dict) -> None:
    """Drains CUPTI's buffer into `into` (see _accumulate)."""
    self._accumulate(into)            # what CUPTI already put there
    for _ in range(10_000):
      self.cupti.check("cuptiPCSamplingGetData", _GetDataParams(
          ctypes.sizeof(_GetDataParams), None, self.ctx,
          ctypes.cast(ctypes.pointer(self.data), ctypes.c_void_p)))
      self._accumulate(into)
      if not self.data.remainingNumPcs:
        break

  def _accumulate(self, into: dict) -> None:
    d = self.data
    into["total_samples"] = into.get("total_samples", 0) + int(d.totalSamples)
    into["dropped_samples"] = into.get("dropped_samples", 0) + int(d.droppedSamples)
    into["non_user_samples"] = into.get("non_user_samples", 0) + int(d.nonUsrKernelsTotalSamples)
    into["hardware_buffer_full"] = bool(into.get("hardware_buffer_full")) or bool(d.hardwareBufferFull)
    pcs = into.setdefault("pcs", {})
    for i in range(int(d.totalNumPcs)):
      pc = d.pPcData[i]
      name = pc.functionName.decode() if pc.functionName else "?"
      key = f"{name}\t{int(pc.pcOffset)}"
      reasons = pcs.setdefault(key, {})
      for j in range(int(pc.stallReasonCount)):
        s = pc.stallReason[j]
        idx = str(int(s.pcSamplingStallReasonIndex))
        reasons[idx] = reasons.get(idx, 0) + int(s.samples)
    d.totalNumPcs = 0
    d.totalSamples = d.droppedSamples = d.nonUsrKernelsTotalSamples = 0
