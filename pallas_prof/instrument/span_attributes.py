"""What each span says: the attributes of the spans observer.py opens, made from the
records the backend, the profiler, the tuner and the advice send (events.py,
event_payloads.py), under the keys conventions.py names (docs/tracing.md lists them).

Plain functions from a record to a dict of attributes: no span, no OpenTelemetry.
"""
from __future__ import annotations

from typing import Any

from . import conventions as cv


def equation_attributes(eqn) -> dict[str, Any]:
  """The attributes of a `lower <primitive>` span (docs/tracing.md, the spans)."""
  attributes = {
      cv.JAXPR_EQN: eqn.text, cv.JAXPR_EQN_INDEX: eqn.index, cv.JAXPR_EQN_PATH: eqn.path,
      cv.JAXPR_PRIMITIVE: eqn.primitive, cv.JAXPR_IN_AVALS: [str(a) for a in eqn.in_avals],
      cv.JAXPR_OUT_AVALS: [str(a) for a in eqn.out_avals], cv.JAXPR_REGION: eqn.region,
  }
  if eqn.parent is not None:
    attributes[cv.JAXPR_PARENT_EQN_INDEX] = eqn.parent
  if eqn.file is not None:
    attributes[cv.CODE_FILEPATH] = eqn.file
    attributes[cv.CODE_LINENO] = int(eqn.line)
    if eqn.function:
      attributes[cv.CODE_FUNCTION] = eqn.function
  return attributes


def wait_attributes(record) -> dict[str, Any]:
  """How long a compile waited for the compile worker, and why (its start-up, compiles ahead)."""
  attrs = record.attributes or {}
  out = {cv.PALLAS_KERNEL: record.kernel}
  for key, name in cv.COMPILE_WAIT_KEYS.items():
    if attrs.get(key) is not None:
      out[name] = float(attrs[key])
  return out


def compile_attributes(record) -> dict[str, Any]:
  attributes: dict[str, Any] = {cv.PALLAS_KERNEL: record.kernel, cv.TRITON_TARGET: record.target,
                                cv.TRITON_CACHE: record.cache, cv.TRITON_COMPILE_KEY: record.key}
  if record.source_key:
    attributes[cv.PALLAS_SOURCE_KEY] = record.source_key
  attributes.update(resource_attributes(record.attributes))
  attributes.update({k: v for k, v in wait_attributes(record).items() if k != cv.PALLAS_KERNEL})
  if record.stages:
    attributes[cv.TRITON_STAGES] = [s.stage for s in record.stages]
  notes = (record.attributes or {}).get("workarounds")
  if notes:
    attributes[cv.PALLAS_WORKAROUNDS] = list(notes)
  return attributes


def failure_attributes(error) -> dict[str, Any]:
  """A CompileError's diagnosis as span attributes (nothing for other errors)."""
  d = getattr(error, "diagnosis", None)
  if d is None:
    return {}
  out = {cv.PALLAS_COMPILE_FAULT: d.fault,
         cv.PALLAS_COMPILE_FAILED_EQNS: [int(i) for i in d.equations]}
  for key, value in ((cv.TRITON_FAILED_PASS, d.failing_pass), (cv.TRITON_ASSERTION, d.assertion),
                     (cv.PALLAS_COMPILE_FAILED_OP, d.op_kind),
                     (cv.PALLAS_COMPILE_REPRODUCER,
                      (getattr(error, "reproducer", None) or {}).get("script"))):
    if value:
      out[key] = value
  return out


def resource_attributes(resources: dict[str, Any]) -> dict[str, Any]:
  out = {}
  for key, value in (resources or {}).items():
    name = cv.RESOURCES.get(key)
    if name is not None and value is not None:
      out[name] = value
  stores, loads = resources.get("spill_stores"), resources.get("spill_loads")
  if stores is not None or loads is not None:
    out[cv.TRITON_SPILLS] = (stores or 0) + (loads or 0)
  return out


def stage_attributes(stage, record) -> dict[str, Any]:
  attributes = {cv.TRITON_STAGE: stage.stage, cv.TRITON_STAGE_BYTES: int(stage.size),
                cv.TRITON_DURATION_MS: (stage.end_ns - stage.start_ns) / 1e6,
                cv.PALLAS_KERNEL: record.kernel}
  attributes.update(resource_attributes(record.attributes))
  link = (record.attributes or {}).get("libdevice_link")
  if stage.stage == "llir" and link:
    # how libdevice was linked (libdevice_link.py): "prepared-new" stages include
    # preparing the library once
    attributes[cv.TRITON_LIBDEVICE_LINK] = link
  return attributes


def advice_attributes(advice) -> dict[str, Any]:
  """The attributes of an `advise <kernel>` span, from an advice.schema.KernelAdvice."""
  out: dict[str, Any] = {cv.PALLAS_KERNEL: advice.label, cv.ADVICE_SUMMARY: advice.summary,
                         cv.ADVICE_AT_ROOF: bool(advice.at_roof),
                         cv.ADVICE_MEASURED: advice.measured or "",
                         cv.ADVICE_DIAGNOSES: [f"{d.text} ({d.location})" if d.location else d.text
                                               for d in advice.diagnoses]}
  if advice.actions:
    top = advice.actions[0]
    out[cv.ADVICE_TOP_ACTION] = top.title
    out[cv.ADVICE_TOP_KIND] = top.kind
    if top.trial is not None and top.trial.saving_pct is not None:
      out[cv.ADVICE_SAVING_PCT] = float(top.trial.saving_pct)
      out[cv.ADVICE_OUTPUTS_EQUAL] = bool(top.trial.outputs_equal)
    elif top.estimate_pct is not None:
      out[cv.ADVICE_ESTIMATE_PCT] = float(top.estimate_pct)
  return out


def profile_attributes(kp, device=None) -> dict[str, Any]:
  """The attributes of a `profile <kernel>` span, from a profiler.schema.KernelProfile
  and the DeviceInfo of the GPU it ran on (None: no GPU)."""
  out: dict[str, Any] = {cv.PALLAS_KERNEL: kp.label, cv.PROFILE_VERDICT: str(kp.verdict)}
  if device is not None:        # which GPU of the process (a merged report's rows)
    out[cv.PALLAS_DEVICE] = f"{device.index}: {device.name}"
  basis = kp.weight_basis
  if basis:
    out[cv.PROFILE_WEIGHT_BASIS] = basis
  att = kp.attribution
  if att is not None:           # the heaviest equations, as the report shows them
    out[cv.PROFILE_WEIGHTS] = att.description
    out[cv.PROFILE_HOT_EQUATIONS] = [f"[{e.index}] {e.primitive} @ {e.user_line}: "
                                     f"{100 * e.weight:.1f}%" for e in att.equations[:5]]
  probes = kp.probes
  if probes is not None:
    out[cv.PROFILE_PROBES] = [f"{r.label}: {100 * r.share:.1f}%" for r in probes.regions]
    if probes.distortion_pct is not None:
      out[cv.PROFILE_PROBES_DISTORTION_PCT] = probes.distortion_pct
  work = kp.work
  for key in cv.PROFILE_WORK if work is not None else ():
    if getattr(work, key) is not None:
      out[cv.PROFILE_WORK_PREFIX + key] = getattr(work, key)
  rt = kp.runtime
  if rt is not None:
    for key in cv.PROFILE_RUNTIME:
      try:
        value = getattr(rt, key, None)
      except (ValueError, AttributeError):     # no headline timing
        value = None
      if value is not None:
        out[cv.PROFILE_PREFIX + key] = value
    if rt.sustained is not None:
      out[cv.PROFILE_SUSTAINED_MEDIAN_S] = rt.sustained.median_s
  for prefix, part in ((cv.PROFILE_PREFIX, kp.rates), (cv.NVML_PREFIX, kp.nvml)):
    if part is None:
      continue
    for key, value in part.to_dict().items():
      # the roofline's own verdict is where the kernel's begins (which goes on: throttling,
      # the heaviest equations): it must not take the kernel's key
      if key == "verdict" and prefix == cv.PROFILE_PREFIX:
        continue
      if isinstance(value, (int, float, str, bool)):
        out[prefix + key] = value
  return out
