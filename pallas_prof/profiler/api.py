"""pallas_prof.profile(): one structured report for the kernels of this process."""
from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any, Callable

import numpy as np

from . import driver
from .driver import ProfilerError
from .options import ProfileOptions
from .probes import probing
from .sampling import attribution, pcsampling, sampling_rounds
from .sampling import ncu as ncu_mod
from .schema import KernelProfile, ProfileReport
from .static import correlate, cost
from .timing import ceilings as ceilings_mod
from .timing import nvml, runner
from .timing.insitu import match
from .timing.policy import random_range_text
from .verdict import Verdict
from ..backend import hooks, kernel_registry
from ..backend.artifacts import DEFAULT_TARGET, CompiledKernel
from ..backend.equation_text import Aval
from ..backend.lowering.features.probes import ProbeOptions

@dataclasses.dataclass
class _Target:
  """What profile() works on: a registry record or a bare CompiledKernel."""
  name: str
  label: str
  in_avals: tuple  # backend.equation_text.Aval each
  out_avals: tuple
  aliases: tuple[tuple[int, int], ...]
  cost_estimate: Any
  generated: Any
  compiled: Any
  relower: Any = None      # the registry record's: lowers the pallas_call again (probes)


def _targets(kernels) -> list[_Target]:
  # lazy: at the top it would load jax whenever this module is imported
  from ..backend.compiling.compile import assemble_cubin
  if kernels is None:
    items = kernel_registry.kernels()
  elif isinstance(kernels, str):
    items = kernel_registry.find(kernels)
    if not items:
      raise ProfilerError(f"no kernel named {kernels!r} in this process; have: "
                          + (", ".join(r.label for r in kernel_registry.kernels()) or "none"))
  else:
    items = list(kernels) if isinstance(kernels, (list, tuple)) else [kernels]
  out = []
  for item in items:
    compiled = item if isinstance(item, CompiledKernel) else item.compiled
    if compiled is not None:
      compiled = assemble_cubin(compiled)    # the GPU launch path defers the cubin
      if not isinstance(item, CompiledKernel):
        item.compiled = compiled             # the registry's record: the report shows its figures
    if isinstance(item, CompiledKernel):
      gk = item.generated
      out.append(_Target(item.name, f"{item.name}#{item.key[:6]}",
                         tuple(Aval(tuple(p.shape), p.dtype) for p in gk.inputs) if gk else (),
                         tuple(Aval(tuple(p.shape), p.dtype) for p in gk.outputs) if gk else (),
                         (), None, gk, compiled))
    else:
      out.append(_Target(item.name, item.label, tuple(item.in_avals), tuple(item.out_avals),
                         tuple(tuple(a) for a in item.input_output_aliases), item.cost_estimate,
                         item.generated, item.compiled, item.relower))
  return out


def _observed(fn):
  """profile()'s `profile <kernel>` spans go through the backend's hook, as lowering and
  compile spans do (events.Observer.profiled: no OpenTelemetry here). Each kernel's span
  covers the profile() call: the profiler works on all kernels in phases (static, replay,
  rates), not one kernel after another."""
  @functools.wraps(fn)
  def profile_and_tell(*args, **kwargs):
    start_ns = time.time_ns()
    report = fn(*args, **kwargs)
    obs = hooks.observer()
    if obs.enabled:
      end_ns = time.time_ns()
      for kp in report.kernels:
        obs.profiled(kp, start_ns, end_ns, report.device)
    return report
  return profile_and_tell


@_observed
def profile(kernels=None, *, device: int = 0, replay: bool = True, min_launches: int = 100,
            min_seconds: float = 0.2, nvml: bool = True, ceilings: Any = True,
            refresh_ceilings: bool = False, ncu: bool = False, insitu=None,
            reference: str | Callable | dict | None = None, tolerance=None,
            top: int = 5, mode: str = "both", sample: bool = True,
            keep_samples: str | None = None, probes=False) -> ProfileReport:
  """Profiles the kernels pallas-prof lowered in this process.

  kernels: None (all of kernel_registry.kernels()), a name or label, or a list of
    KernelRecords / CompiledKernels.
  device: CUDA device index to replay on (a bad index raises BadDevice).
  replay: time each kernel with the replay runner (GPU only).
  mode: the replay's timing modes, "cold", "sustained" or "both" (runner.py): the
    cold median (L2 cold, unthrottled GPU) is the headline when timed.
  nvml: sample the GPU's clocks, power, temperature and throttle reasons during timing.
  ceilings: True (measure or load the cached ceilings), False, or a Ceilings object.
  ncu: also run Nsight Compute on each kernel's replay (slow; needs ncu).
  insitu: an insitu.InsituResult (from `with insitu.capture() as cap: ...; cap.result`)
    whose kernel times are matched to the kernels by name.
  reference: "interpreter", a function of the inputs, or {label: function}: checks
    the replay's outputs.
  tolerance: (atol, rtol) or {label: (atol, rtol)} for that check (default by dtype).
  sample: PC-sample each replayed kernel (CUPTI, in a child process: pcsampling.py)
    and weigh its equations by the samples (attribution.py); the runtime stays the
    unsampled replay's.
  keep_samples: a directory to keep each kernel's raw samples in (<label>.samples.json).
  probes: True (or a backend.probes.ProbeOptions): also replay each kernel's probed
    variant (timestamps around each top-level equation: probing.py) and report cycles
    per region, each sampled CTA on its SM, the distortion and the reconciliation with
    the PC samples (KernelProfile.probes). GPU only; the runtime stays the plain kernel's.

  Without a GPU the report says so plainly and carries the static correlation
  (per-equation weights from PTX/SASS compiled for sm_90) and the work model.
  """
  options = ProfileOptions(
      device=device, replay=replay, min_launches=min_launches, min_seconds=min_seconds,
      nvml=nvml, ceilings=ceilings, refresh_ceilings=refresh_ceilings, ncu=ncu, insitu=insitu,
      reference=reference, tolerance=tolerance, top=top, mode=mode, sample=sample,
      keep_samples=keep_samples, probes=probes)
  return _profile(_targets(kernels), options)


def _profile(targets: list[_Target], options: ProfileOptions) -> ProfileReport:
  notes: list[str] = []
  present, reason = driver.gpu_status()
  info = None
  if present:
    info = driver.device_info(options.device)         # BadDevice for a bad index
  cc = info.compute_capability if info else DEFAULT_TARGET[1]
  profiles = [_static(t, cc, options.top) for t in targets]
  if not present:
    message = (f"no NVIDIA GPU: {reason.rstrip('.')}. The kernels ran under Triton's "
               f"interpreter; compiled for sm_{cc}, they show their code, registers and each "
               "equation's share of the instructions (counted, not timed). Runtimes, the "
               "roofline and measured hot lines need a GPU.")
    for t, p in zip(targets, profiles, strict=True):
      _attribute_statically(t, p, "no GPU")
      p.verdict = _static_verdict(p)
    if options.probes:
      notes.append("probes: not run, they need a GPU (the probed variant is launched by the "
                   "replay)")
    return ProfileReport(gpu_present=False, message=message, device=None, ceilings=None,
                         kernels=profiles, notes=notes, created=time.time())
  handle = _nvml_handle(info, notes) if options.nvml else None
  if options.replay:
    for t, p in zip(targets, profiles, strict=True):
      _replay_one(t, p, options, handle)
  ceil = _ceilings(info, options, notes)
  for t, p in zip(targets, profiles, strict=True):
    if p.runtime is not None:
      p.rates = ceilings_mod.rates(p.work, p.runtime.median_s, ceil)
  if options.insitu is not None:
    matched = match(options.insitu, targets, options.device)
    for p in profiles:
      p.insitu = matched.get(p.label)
    notes += list(options.insitu.notes)
    notes += replay_against_program(targets, profiles)
  if options.ncu:
    _run_ncu(targets, profiles, options.device)
  for t, p in zip(targets, profiles, strict=True):
    _attribute(t, p, options)
    if options.probes:
      _probe(t, p, options)
    p.verdict = _verdict(p)
  timed = sum(1 for p in profiles if p.runtime is not None)
  if options.nvml and handle is None:
    notes.append("NVML readings unavailable (see notes above)")
  message = (f"replayed {timed} of {len(profiles)} kernel(s) on GPU {options.device} "
             f"({info.name})")
  return ProfileReport(gpu_present=True, message=message, device=info, ceilings=ceil,
                       kernels=profiles, notes=notes, created=time.time())


def _ceilings(info, options: ProfileOptions, notes: list[str]):
  """The ceilings the rates are of: measured or loaded (True), given, or none (False)."""
  if options.ceilings is True:
    try:
      return ceilings_mod.get(info, refresh=options.refresh_ceilings)
    except Exception as e:  # noqa: BLE001
      notes.append(f"ceilings: {type(e).__name__}: {e}")
      return None
  return options.ceilings or None


def _run_ncu(targets, profiles, device: int) -> None:
  for t, p in zip(targets, profiles, strict=True):
    if t.compiled is None:
      continue
    try:
      p.ncu = ncu_mod.run(t.compiled, device=device, aliases=t.aliases,
                          replay_median_s=p.runtime.median_s if p.runtime else None,
                          instructions=True)
      _attach_counters(p)
    except Exception as e:  # noqa: BLE001
      p.errors.append(f"ncu: {type(e).__name__}: {e}")


REPLAY_DISAGREES = 1.5      # program / replay time outside [1/1.5, 1.5]: say why it may be


def replay_against_program(targets, profiles) -> list[str]:
  """A note for each kernel whose replayed time and time in the program (CUPTI) differ by
  more than REPLAY_DISAGREES: the replay runs on its own random inputs, integers among
  them small (policy.random_values), and a kernel whose work follows its integer inputs
  (lengths, page tables, indices) does other work on them than in the program."""
  notes = []
  for t, p in zip(targets, profiles, strict=True):
    if p.runtime is None or not p.runtime.median_s or p.insitu is None or not p.insitu.launches:
      continue
    ratio = p.insitu.mean_s / p.runtime.median_s
    if 1 / REPLAY_DISAGREES <= ratio <= REPLAY_DISAGREES:
      continue
    drawn = [f"input {i} ({a.array_text()}) {text}" for i, a in enumerate(t.in_avals)
             if (text := _random_text(a))]
    cache = "a cold L2" if p.runtime.mode == "cold" else "a warm L2"
    why = ("the replay's " + "; ".join(drawn) + ": where such inputs steer the kernel's work "
           "(lengths, page tables, indices), the program's time is the one to trust" if drawn else
           f"the replay runs on random inputs with {cache}; a program that launches it on data "
           "in another cache state, or on inputs that change its work, differs")
    notes.append(f"{p.label}: in the program {p.insitu.mean_s * 1e6:.1f} µs a launch, "
                 f"replayed {p.runtime.median_s * 1e6:.1f} µs ({ratio:.2f}x): {why}")
  return notes


def _random_text(aval) -> str | None:
  """What the replay drew for an input of this aval (a backend.equation_text.Aval), for
  integer and bool inputs; None for the others."""
  # lazy: keeps ml_dtypes out of this module's import (start-up time)
  import ml_dtypes
  if aval.dtype is None:
    return None
  try:
    dtype = np.dtype(getattr(ml_dtypes, aval.dtype, aval.dtype))
  except TypeError:
    return None
  return random_range_text(dtype)


def _static(t: _Target, cc: int, top: int) -> KernelProfile:
  p = KernelProfile(label=t.label, name=t.name, in_avals=list(t.in_avals),
                    out_avals=list(t.out_avals), static=None, work=None)
  if t.generated is None:
    p.errors.append("static: no GeneratedKernel")
    return p
  try:
    if t.compiled is None or t.compiled.target[1] != cc:
      # lazy: at the top it would load jax whenever this module is imported
      from ..backend.compiling.failures.workarounds import compile_working_around
      t.compiled = compile_working_around(t.generated, ("cuda", cc), t.relower)
    p.static = correlate.correlate(t.compiled, top=top).profile
  except Exception as e:  # noqa: BLE001 - a report must survive one bad kernel
    p.errors.append(f"static correlation: {type(e).__name__}: {e}")
  try:
    p.work = cost.work_model(t.generated, t.cost_estimate)
  except Exception as e:  # noqa: BLE001
    p.errors.append(f"work model: {type(e).__name__}: {e}")
  return p


def _nvml_handle(info, notes):
  try:
    return nvml.device_handle(info.index)
  except Exception as e:  # noqa: BLE001
    notes.append(f"NVML: {e}")
    return None


def _replay_one(t: _Target, p: KernelProfile, options: ProfileOptions, handle) -> None:
  if t.compiled is None:
    return
  sampler = nvml.Sampler(handle) if handle is not None else None
  ref, tol = options.reference_for(t), options.tolerance_for(t)
  if tol is None and p.work is not None and p.work.dot_dtype == "tf32":
    tol = (1e-2, 1e-2)     # TF32 dots round operands to 10 mantissa bits
  try:
    p.runtime = runner.replay(t.compiled, device=options.device,
                              min_launches=options.min_launches,
                              min_seconds=options.min_seconds, aliases=t.aliases, reference=ref,
                              tolerance=tol, sampler=sampler, mode=options.mode)
    if sampler is not None:
      p.nvml = sampler.window()
  except Exception as e:  # noqa: BLE001
    p.errors.append(f"replay: {type(e).__name__}: {e}")


def _attach_counters(p: KernelProfile) -> None:
  if p.ncu is None or not p.ncu.source_counters or p.static is None:
    return
  for e in p.static.equations:
    counters = p.ncu.source_counters.get(str(e.index))
    if counters:
      e.hardware = counters


def _attribute_statically(t: _Target, p: KernelProfile, reason: str) -> None:
  if p.static is not None and t.generated is not None:
    p.attribution = attribution.static(t.generated, p.static, reason)
    p.weight_basis = "static"


def _dropped_text(run) -> str:
  """What CUPTI dropped (its buffers were full), where it dropped any: the shares are
  of the samples kept."""
  if not run.dropped_samples:
    return ""
  share = 100 * run.dropped_samples / max(run.total_samples, 1)
  share_text = "under 0.01" if share < 0.01 else f"{share:.2f}"
  return f" ({run.dropped_samples:,} of {run.total_samples:,} dropped by CUPTI, {share_text} %)"


def _attribute(t: _Target, p: KernelProfile, options: ProfileOptions) -> None:
  """The weights the report shows: PC samples of a replay when they could be taken,
  else Nsight Compute's source counters when it ran, else static instruction shares."""
  device, sample, keep_samples = options.device, options.samples_taken, options.keep_samples
  why = "PC sampling is off" if not sample else "the kernel was not replayed"
  median = p.runtime.median_s if p.runtime is not None else None
  gk = t.generated
  if sample and gk is not None and t.compiled is not None and p.runtime is not None:
    try:
      keep = os.path.join(keep_samples, f"{p.label}.samples.json") if keep_samples else None
      data, rounds = sampling_rounds.sample_until_kept(
          pcsampling.sample, ck=t.compiled, device=device, aliases=t.aliases, keep=keep,
          kernel_s=median)
      corr = correlate.correlate(t.compiled)
      samples, other = pcsampling.instruction_samples(data, data["kernel"])
      run = pcsampling.sampling_run(data, other)
      run.rounds = rounds
      if not samples:
        raise ProfilerError(f"CUPTI returned no samples of {data['kernel']} "
                            f"({run.total_samples} in all)")
      p.attribution = attribution.measured(
          gk, corr, samples, basis="pc_sampling", replay_median_s=median, sampling=run,
          description=f"CUPTI PC sampling, {sum(map(_total, samples.values())):,.0f} samples "
                      f"of {run.launches} replayed launches{_dropped_text(run)}")
      sampling_rounds.annotate(p.attribution, run.dropped_samples)
      if len(rounds) > 1:
        p.attribution.notes.append(sampling_rounds.rounds_text(rounds))
      p.weight_basis = "pc_sampling"
    except Exception as e:  # noqa: BLE001 - the static weights still stand, labelled
      why = f"PC sampling failed: {type(e).__name__}: {e}"
      p.errors.append(f"pc sampling: {type(e).__name__}: {e}")
  if p.ncu is not None and p.ncu.instruction_samples and gk is not None:
    corr = correlate.correlate(t.compiled)
    samples = {int(a, 16): r for a, r in p.ncu.instruction_samples.items()}
    p.ncu.attribution = attribution.measured(
        gk, corr, samples, basis="ncu", replay_median_s=median,
        description=f"Nsight Compute source counters, "
                    f"{sum(map(_total, samples.values())):,.0f} warp-stall samples")
    if p.attribution is None:
      p.attribution, p.weight_basis = p.ncu.attribution, "ncu"
  if p.attribution is None:
    _attribute_statically(t, p, why)


def _probe(t: _Target, p: KernelProfile, options: ProfileOptions) -> None:
  if t.compiled is None:
    return
  asked = options.probes
  try:
    p.probes = probing.measure(t, options.device, asked if isinstance(asked, ProbeOptions)
                               else None)
    p.probes.reconciliation = probing.reconcile(
        p.probes, p.attribution, p.weight_basis, p.runtime.median_s if p.runtime else None)
  except Exception as e:  # noqa: BLE001 - the rest of the report stands
    p.errors.append(f"probes: {type(e).__name__}: {e}")


def _total(reasons) -> float:
  return float(sum(reasons.values()))


def _top_text(p: KernelProfile, n: int = 3) -> str:
  if p.attribution is None:
    return ""
  parts = []
  for e in p.attribution.equations[:n]:
    where = f"{e.user_file.rsplit('/', 1)[-1]}:{e.user_line}" if e.user_file else "?"
    parts.append(f"[{e.index}] {e.primitive} @ {where} {100 * e.weight:.0f}%")
  return ", ".join(parts)


def _static_verdict(p: KernelProfile) -> Verdict:
  return Verdict(static_only=True, heaviest_basis="share of instructions",
                 heaviest=_top_text(p))


def _throttle_text(p: KernelProfile) -> list[str]:
  rt = p.runtime
  parts = []
  if rt is not None and rt.mode == "cold" and rt.sustained is not None:
    parts.append(f"back-to-back in a loop: {rt.sustained.median_s * 1e6:.1f} us per launch "
                 f"({100 * (rt.sustained.median_s / rt.median_s - 1):+.1f}% against cold)")
  if p.nvml is not None and p.nvml.throttled:
    if rt is not None and rt.mode == "cold":
      parts.append(f"the GPU throttled during the sustained launches ({p.nvml.summary})")
    else:
      parts.append(f"the GPU throttled during the timed launches ({p.nvml.summary}): the time "
                   "is slower than the GPU's unthrottled best")
  th = rt.throttle if rt is not None else None
  if th is not None and th.recoveries:
    parts.append(f"cold timing redid {th.discarded_launches} throttled launches after "
                 f"{th.recoveries} recovery pause(s)")
  return parts


def _verdict(p: KernelProfile) -> Verdict:
  parts = []
  if p.rates is not None:
    parts.append(p.rates.verdict)
  elif p.runtime is None:
    parts.append("not timed")
  parts += _throttle_text(p)
  if p.runtime is not None:
    if not p.runtime.outputs_written:
      parts.append("SOME OUTPUT ELEMENTS WERE NEVER WRITTEN")
    if p.runtime.correctness is not None and not p.runtime.correctness.passed:
      parts.append(f"OUTPUTS DIFFER from the {p.runtime.correctness.reference}")
  basis = {"pc_sampling": "by PC samples", "ncu": "by ncu warp-stall samples"}.get(
      p.weight_basis, "by share of instructions")
  return Verdict(findings=tuple(parts), heaviest_basis=basis, heaviest=_top_text(p))


__all__ = ["profile"]
