"""Plugging pallas-prof into pl.pallas_call.

Importing this module (which pallas_prof.CompilerParams and pallas_prof.install do)
registers one lowering rule for pallas_call on CPU, CUDA and ROCm (running/rocm.py).
The rule lowers with pallas-prof when the call asks for it
(`compiler_params=pallas_prof.CompilerParams(...)`) or when `install()` is in
effect (then also for JAX's own Triton CompilerParams and for calls without
params); everything else (interpret=True, Mosaic GPU params) goes to JAX's own
rule unchanged. `uninstall()` ends the takeover.
"""
from __future__ import annotations

import dataclasses
import numbers
import os
from typing import Any

from .. import settings
from . import builtin_triton, compat, hooks, kernel_registry, triton_primitives
from .compiling.compile import compile_kernel
from .compiling.failures.workarounds import compile_working_around
from .equation_text import Aval
from .errors import LoweringError
from .lowering import coverage
from .lowering.features import bounds
from .lowering.lower import kernel_name_of, lower_kernel, pallas_call_info
from .options import DEFAULT_NUM_STAGES, DEFAULT_NUM_WARPS, LoweringOptions, option_problem
from .running import bounds_errors, rocm, runtime_errors, xla_names
from .running.launch import cpu_call, gpu_custom_call, no_programs
from .tma_note import TmaFallbackWarning


@dataclasses.dataclass(frozen=True)
class CompilerParams:
  """Selects pallas-prof for a pl.pallas_call and tunes its Triton kernel.

  Attributes:
    num_warps: warps per program (default 4).
    num_stages: software-pipelining stages for loops (default 3).
    compute_capability: compile for this capability instead of the device's
      (e.g. 90 for sm_90); useful to inspect code for another GPU.
    zero_outputs: indices of outputs to zero before the launch (accumulating
      kernels); outputs written with atomics are zeroed automatically.
    enable_fp_fusion: let Triton contract a multiply and an add into one FMA
      (Triton's own default). Off by default: XLA and JAX's built-in backend
      round the two separately, and pallas-prof computes what they compute.
    autotune: True or pallas_prof.Autotune(configs=..., budget_s=...) to time
      num_warps/num_stages candidates on the GPU and run the fastest whose outputs
      equal the default's (pallas_prof/tune/params.py); None: PALLAS_PROF_AUTOTUNE=1
      decides; False: never.
    launch_group: > 1 launches the programs of a 2-D (or wider) grid in groups of
      this many along the first dimension (Triton's matmul-tutorial order), for
      operand blocks shared in L2 by programs that run together; the same
      results. Ignored where the grid does not allow it (pallas_prof/backend/lowering/grid.py).
      The tuner tries 4 and 8 by default.
    tma: True loads dense blocks of the inputs, and stores an output's one block,
      through Hopper's TMA (Triton tensor descriptors made in the kernel) where that
      provably moves the same elements; other accesses stay plain, and a
      TmaFallbackWarning says why (pallas_prof/backend/lowering/features/tma.py).
      sm_90 or newer; needs jax >= 0.11 on the GPU (global scratch). Checked under
      Triton's interpreter and compiled for sm_90, NOT YET RUN ON A GPU; the tuner
      tries it only where an Autotune config names it ({"tma": 1}).
  """
  num_warps: int | None = None
  num_stages: int | None = None
  compute_capability: int | None = None
  zero_outputs: tuple[int, ...] = ()
  enable_fp_fusion: bool = False
  autotune: Any = None
  launch_group: int | None = None
  tma: bool | None = None

  # JAX's CompilerParams protocol wants a backend tag
  BACKEND = "triton"

  def __post_init__(self):
    # checked here, at the user's line: Triton would refuse these deep in a GPU compile
    # (num_warps not a power of two), or compile a block CUDA cannot launch (over 1024
    # threads), or the value would be ignored without a word
    def bad(field, value, want):
      raise ValueError(f"CompilerParams({field}={value!r}): {want}")
    for name in ("num_warps", "num_stages", "launch_group"):
      value = getattr(self, name)
      if value is not None and option_problem(name, value):
        bad(name, value, option_problem(name, value))
    cc = self.compute_capability
    if cc is not None and (not _is_int(cc) or cc < 70):
      bad("compute_capability", cc, "must be an integer like 80 or 90 (sm_80, sm_90), "
          "70 or more")
    if any(not _is_int(i) or i < 0 for i in self.zero_outputs):
      bad("zero_outputs", self.zero_outputs, "must be output indices (integers >= 0)")


def _is_int(value) -> bool:
  return isinstance(value, numbers.Integral) and not isinstance(value, bool)


_takeover = {"active": False}


def install(check_bounds: bool | None = None) -> None:
  """Routes every Triton-style pallas_call (GPU and CPU) through pallas-prof.

  `check_bounds=True`: the bounds-checked debug mode (also PALLAS_PROF_CHECK=bounds):
  every load and store checks its indices against its ref, an access outside
  raises BoundsError (after the kernel, naming the equation and your line)
  instead of reading or writing past the buffer, and outputs start poisoned
  (NaN, or all ones) so elements nothing writes show up. Slower; for debugging.

  A PALLAS_PROF_* variable with a value pallas-prof cannot use is said here, at your line
  (pallas_prof/settings.py), and goes on as if unset."""
  settings.warn_about_environment()
  _ensure_registered()
  _takeover["active"] = True
  if check_bounds is not None:
    bounds.set_check_bounds(bool(check_bounds))
  # asking JAX for devices creates its backends, after which the user's program can no
  # longer call jax.distributed.initialize(): before that, NVML says what the GPU is,
  # asked in the warm-up's thread (NVML's start is the driver's: install() need not wait)
  from .compiling.warmup import start_warmup
  start_warmup(compat.gpu_compute_capability() if compat.backends_initialized()
               else _nvml_capability)


def _nvml_capability() -> int | None:
  """The first GPU's compute capability through NVML (read-only; JAX untouched), or None."""
  try:
    import pynvml
    pynvml.nvmlInit()
  except Exception:  # noqa: BLE001 - no NVML, no GPU: no warm-up
    return None
  try:
    if pynvml.nvmlDeviceGetCount() < 1:
      return None
    major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(pynvml.nvmlDeviceGetHandleByIndex(0))
    return int(major) * 10 + int(minor)
  except Exception:  # noqa: BLE001
    return None
  finally:
    try:
      pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
      pass


def uninstall() -> None:
  """Restores JAX's own Pallas backends for calls that did not ask for pallas-prof (on a
  JAX without its Triton backend, a GPU call that would have gone there says so)."""
  _takeover["active"] = False


def installed() -> bool:
  return _takeover["active"]


_registered = {"done": False}
_compare_with_builtin = {"active": False}


def route_to_builtin(active: bool) -> None:
  """Benchmarking aid: send every Triton-style call, pallas-prof's own
  CompilerParams included, to JAX's built-in Triton backend (same num_warps
  and num_stages), to compare the two on the same program. A RuntimeError
  where this JAX has no such backend."""
  if active:
    _builtin_triton("route_to_builtin(True)")
  _compare_with_builtin["active"] = active


def _builtin_triton(what: str):
  """(CompilerParams class, pallas_call lowering) of JAX's own Triton backend, or an error
  saying that this JAX has none."""
  builtin = builtin_triton.lowering(triton_primitives)
  if builtin is None:
    import jax
    raise RuntimeError(
        f"{what} needs JAX's built-in Pallas Triton backend, which this JAX does not have "
        f"(jax {jax.__version__}: jax._src.pallas.triton cannot be imported; JAX "
        "deprecated it in 0.11). pallas-prof itself does not need it: pass "
        "compiler_params=pallas_prof.CompilerParams(...) or call pallas_prof.install()")
  return builtin


def _lower_with_builtin(ctx, in_nodes, params, platform: str = "cuda"):
  cp = params.get("compiler_params")
  options = lowering_options(cp, platform) if platform == "rocm" else None
  warps, stages = (options.num_warps, options.num_stages) if options else _num_warps_stages(cp)
  params_cls, lowering = _builtin_triton("comparing with JAX's built-in backend")
  params = dict(params, compiler_params=params_cls(num_warps=warps, num_stages=stages))
  return lowering(ctx, *in_nodes, **params)


def _ensure_registered() -> None:
  if _registered["done"]:
    return
  compat.register_platform_lowering(compat.pallas_call_p, _lower_cpu, "cpu")
  compat.register_platform_lowering(compat.pallas_call_p, _lower_cuda, "cuda")
  compat.register_platform_lowering(compat.pallas_call_p, _lower_rocm, "rocm")
  compat.register_backend_lowering_rule(CompilerParams, _lower_cuda_explicit, "gpu")
  # the lowering's frames are not the user's: out of JAX's filtered tracebacks
  compat.hide_frames_in_tracebacks(os.path.dirname(os.path.abspath(__file__)))
  # a kernel's failure in a host callback reaches the caller as itself
  runtime_errors.install()
  _registered["done"] = True


def _wants_us(params: dict) -> bool:
  if params.get("interpret"):
    return False
  cp = params.get("compiler_params")
  if isinstance(cp, CompilerParams):
    return True
  if not _takeover["active"]:
    return False
  if cp is None:
    return params.get("mesh") is None
  return _is_builtin_triton_params(cp)


def _is_builtin_triton_params(cp) -> bool:
  builtin = builtin_triton.compiler_params_class()      # None: JAX's never imported
  return builtin is not None and isinstance(cp, builtin)


def _num_warps_stages(cp) -> tuple[int, int]:
  warps = getattr(cp, "num_warps", None) if cp is not None else None
  stages = getattr(cp, "num_stages", None) if cp is not None else None
  return (DEFAULT_NUM_WARPS if warps is None else int(warps),
          DEFAULT_NUM_STAGES if stages is None else int(stages))


def lowering_options(cp, platform: str, check_bounds: bool = False,
                     debug: bool = False) -> LoweringOptions:
  """What the call's CompilerParams (pallas-prof's, JAX's Triton ones or None) and the
  process's modes ask of its lowering."""
  num_warps, num_stages = _num_warps_stages(cp)
  if platform == "rocm" and getattr(cp, "num_stages", None) is None:
    num_stages = rocm.ROCM_DEFAULT_NUM_STAGES      # what JAX's built-in backend takes there
  ours = isinstance(cp, CompilerParams)
  cc = cp.compute_capability if ours else None
  if platform == "cuda":
    cc = cc or compat.gpu_compute_capability() or 90
  else:
    cc = cc or 90
  return LoweringOptions(num_warps=num_warps, num_stages=num_stages, compute_capability=cc,
                         enable_fp_fusion=bool(getattr(cp, "enable_fp_fusion", False)),
                         launch_group=int(cp.launch_group or 0) if ours else 0,
                         tma=bool(cp.tma) if ours and platform != "rocm" else False,
                         check_bounds=check_bounds,
                         debug=debug)


@dataclasses.dataclass(frozen=True)
class PallasCall:
  """The pallas_call being lowered: what every lowering of it (the kernel the program
  runs, the tuner's candidates, the workarounds, the profiler's probed variant) shares."""
  jaxpr: Any
  grid_mapping: Any
  name: str | None
  call_site: Any            # JAX's source info of the equation: the user's line
  aliases: tuple[tuple[int, int], ...]
  platform: str

  @classmethod
  def of(cls, params: dict, platform: str) -> "PallasCall":
    # JAX lowers each equation inside its user context: the source info there
    # holds the pallas_call's traceback (the lowering context's own is None
    # for cached lowerings).
    return cls(params["jaxpr"], params["grid_mapping"], params.get("name"),
               compat.source_info_util.current(),
               tuple(tuple(a) for a in params.get("input_output_aliases", ())), platform)

  def lower(self, options: LoweringOptions):
    with compat.lowering_for(self.platform):
      return lower_kernel(self.jaxpr, self.grid_mapping, options, name=self.name,
                          call_site=self.call_site, input_output_aliases=self.aliases)

  def site(self, kernel_name: str | None = None):
    """The pallas_call as an equation record: errors and warnings point at the user's line."""
    kname = kernel_name or kernel_name_of(self.jaxpr, self.name)
    return pallas_call_info(self.call_site, self.jaxpr, kname, self.grid_mapping)

  def error(self, reason: str, hint: str | None) -> LoweringError:
    return LoweringError(reason, hint=hint, kernel=kernel_name_of(self.jaxpr, self.name),
                         rule="pallas_call", eqn=self.site())

  def relowerer(self, options: LoweringOptions):
    """The registry record's `relower(options=None, *, same_build=False, **changes)`: the
    call lowered again with `options` (the call's own when None) with `changes`.

    Variants measured in place of the kernel (the profiler's probed variant, the advice's
    trials) are of the kernel the program runs unchecked: never the bounds-checked build
    nor the debug print. A workaround is different: the GPU launches it in the kernel's
    place, with the kernel's operands (the checked build's starting values and bounds
    record among them), so it passes `same_build=True` and keeps both. Callers pass the
    compiled kernel's options (a tuner may have chosen another launch order or TMA use
    than the call's own, and workarounds)."""
    def relower(variant: LoweringOptions | None = None, *, same_build: bool = False,
                **changes):
      variant = (variant or options).replace(**changes)
      if not same_build:
        variant = variant.replace(check_bounds=False, debug=False)
      return self.lower(variant)
    return relower


def _lower(ctx, in_nodes, params, platform: str):
  call = PallasCall.of(params, platform)
  _refuse_unsupported(call, params)
  cp = params.get("compiler_params")
  check = bounds.check_bounds_enabled()
  options = lowering_options(cp, platform, check, debug=bool(params.get("debug")))
  gk = call.lower(options)
  uncovered = _warn_about(call, gk)
  rec = kernel_registry.record(kernel_registry.KernelRecord(
      name=gk.name, generated=gk, platform=platform,
      in_avals=tuple(map(Aval.of, ctx.avals_in)), out_avals=tuple(map(Aval.of, ctx.avals_out)),
      input_output_aliases=call.aliases, cost_estimate=params.get("cost_estimate"),
      uncovered_outputs=tuple(uncovered), relower=call.relowerer(options)))
  if platform == "cpu" or check:
    runtime_errors.callbacks_lowered()      # its failures come back through a host callback
  scope = xla_names.scope_name(rec.label, call.site(gk.name))
  if platform == "cpu":
    return _interpreted(xla_names.named(ctx, scope), in_nodes, rec, call)
  if 0 in gk.launch_grid:     # no program to run: CUDA refuses a launch of none
    return compat.lower_fun(no_programs(ctx.avals_out, call.aliases, poison=check),
                            multiple_results=True)(ctx, *in_nodes)
  zeroed = set(getattr(cp, "zero_outputs", ()) or ()) | set(gk.zeroed_outputs(call.aliases))
  with xla_names.located(ctx, scope):      # XProf names the kernel's op as the report does
    if platform == "rocm":
      return _launch_on_rocm(ctx, in_nodes, call, gk, zeroed, params)
    rec.compiled = _compiled_for_gpu(rec, call, cp, zeroed, tuned=not check)
    return _custom_call(ctx, in_nodes, rec, call, zeroed, params.get("metadata"))


def _refuse_unsupported(call: PallasCall, params: dict) -> None:
  """What the call as a whole asks for that pallas-prof does not lower."""
  if params.get("mesh") is not None:
    raise call.error("pallas_call with a mesh", "use a grid instead of a mesh")
  if call.jaxpr.constvars:
    raise call.error("the kernel closes over array constants",
                     "pass arrays as pallas_call inputs")


def _warn_about(call: PallasCall, gk) -> list:
  """Warnings at the user's line: loads TMA was asked for and could not serve, outputs
  with elements no program writes. Returns those outputs (coverage.UncoveredOutput)."""
  if gk.tma_notes:
    warn_tma_fallbacks(gk)
  labels = [p.label for p in gk.params if p.role in ("input", "output")]
  uncovered = coverage.uncovered_outputs(call.grid_mapping, gk.grid, labels, call.aliases)
  if uncovered:
    coverage.warn_uncovered(uncovered, gk.name, call.site(gk.name))
  return uncovered


def _interpreted(ctx, in_nodes, rec, call: PallasCall):
  """The CPU path: the kernel under Triton's interpreter, in a host callback."""
  gk = rec.generated

  def on_launch(rec=rec):
    rec.launches += 1
  fn = cpu_call(gk, ctx.avals_out, call.aliases, on_launch, poison=gk.check_bounds)
  after = _after_kernel(gk)
  if after is not None:
    fn = lambda *args, call=fn: after(call(*args))   # noqa: E731
  return compat.lower_fun(fn, multiple_results=True)(ctx, *in_nodes)


def _compiled_for_gpu(rec, call: PallasCall, cp, zeroed, tuned: bool):
  """The CompiledKernel the GPU launches: the kernel, or where Triton fails on it
  another lowering of it; then the selector's choice (hooks.selector(): the tuner's) unless
  `tuned` is false (tuning the bounds-checked debug build would time the checks)."""
  gk = rec.generated
  target = ("cuda", gk.options.compute_capability)
  # jaxlib assembles the PTX
  ck = compile_working_around(gk, target, rec.relower, need_cubin=False)
  if not tuned:
    return ck
  # a cached choice: jaxlib assembles the PTX, as for the default
  return hooks.selector().select(ck, ck.generated or gk, cp, call.lower, target,
                                 compile_fn=lambda g: compile_kernel(g, target, need_cubin=False),
                                 aliases=call.aliases, zeroed=tuple(sorted(zeroed)))


def _launch_on_rocm(ctx, in_nodes, call: PallasCall, gk, zeroed, params):
  """The ROCm path: XLA's Triton custom call of the kernel's Triton IR, as JAX's built-in
  backend emits it (running/rocm.py); what that call cannot run is refused at the call."""
  return rocm.launch(ctx, in_nodes, gk, zeroed, aliases=call.aliases, error=call.error,
                     metadata=_metadata_json(params.get("metadata")),
                     debug=bool(params.get("debug")),
                     tma_asked_at=call.site(gk.name) if getattr(
                         params.get("compiler_params"), "tma", None) else None)


def _metadata_json(metadata) -> str:
  if not metadata:
    return ""
  import json
  return json.dumps(dict(metadata))


def _custom_call(ctx, in_nodes, rec, call: PallasCall, zeroed, metadata):
  """The GPU path: jaxlib's Triton custom call of the compiled kernel."""
  gk = rec.generated
  results = gpu_custom_call(ctx, in_nodes, rec.compiled, input_output_aliases=call.aliases,
                            zeroed_outputs=tuple(sorted(zeroed)),
                            metadata=_metadata_json(metadata))
  # check mode: the outputs started poisoned (gpu_custom_call aliases them to
  # poisoned starting values), as the interpreter's do
  after = _after_kernel(gk)
  if after is None:
    return results
  from .running.launch import check_avals
  avals = list(ctx.avals_out) + check_avals(gk)
  return compat.lower_fun(lambda *r: after(r), multiple_results=True)(
      ctx.replace(avals_in=avals), *results)


def warn_tma_fallbacks(gk) -> None:
  """One warning per load that TMA was asked for and could not serve, at the user's line."""
  import warnings
  for note in gk.tma_notes:
    warnings.warn_explicit(f"kernel `{gk.name}`: TMA not used for {note}; that access stays "
                           "a plain one (same results)", TmaFallbackWarning,
                           note.file or "an unknown line", note.line or 0)


def _after_kernel(gk):
  """Bounds-checked mode: a function of the kernel's results (the flag buffer
  last) that reads the flag back in a host callback raising BoundsError.
  None when there is nothing to do (check mode off)."""
  if not any(p.role == "check" for p in gk.params):
    return None
  import functools
  import jax
  raise_if = functools.partial(bounds_errors.raise_if_violated, sites=gk.bounds_sites,
                               kernel_name=gk.name, eqns=tuple(gk.eqns),
                               jaxpr_text=gk.jaxpr_text, ref_names=gk.ref_names)

  def after(results):
    results = list(results)
    jax.debug.callback(raise_if, results.pop())
    return results

  return after


def _delegate(ctx, in_nodes, params):
  if params.get("interpret"):
    _note_interpreted_by_jax(params)
  return compat.default_pallas_call_lowering()(ctx, *in_nodes, **params)


def _note_interpreted_by_jax(params: dict) -> None:
  """Keeps the kernel's name and the user's line of a call JAX's interpreter runs, for the
  run to say why it is missing. What JAX does is left as it is: a call this cannot
  describe goes unsaid rather than fail the user's program."""
  try:
    call = PallasCall.of(params, "cpu")
    site = call.site()
    where = f"{site.file}:{site.line}" if site.file else "an unknown line"
    kernel_registry.note_interpreted_by_jax(kernel_name_of(call.jaxpr, call.name), where)
  except Exception:  # noqa: BLE001 - a note, never the user's failure
    pass


def _lower_cpu(ctx, *in_nodes, **params):
  if not _wants_us(params):
    return _delegate(ctx, in_nodes, params)
  return _lower(ctx, in_nodes, params, "cpu")


def _lower_cuda(ctx, *in_nodes, **params):
  return _lower_gpu(ctx, in_nodes, params, "cuda")


def _lower_rocm(ctx, *in_nodes, **params):
  return _lower_gpu(ctx, in_nodes, params, "rocm")


def _lower_gpu(ctx, in_nodes, params, platform: str):
  if _compare_with_builtin["active"] and not params.get("interpret") and _is_triton_style(params):
    return _lower_with_builtin(ctx, in_nodes, params, platform)
  if not _wants_us(params):
    try:
      return _delegate(ctx, in_nodes, params)
    except Exception:
      # a plain call after uninstall() on a JAX without its Triton backend: say so
      # rather than JAX's words (which ask for a GPU jaxlib)
      if (params.get("compiler_params") is None and not params.get("interpret")
          and builtin_triton.lowering() is None):
        _builtin_triton("a pl.pallas_call without compiler_params, pallas-prof not installed,")
      raise
  return _lower(ctx, in_nodes, params, platform)


def _lower_cuda_explicit(ctx, *in_nodes, **params):
  if _compare_with_builtin["active"]:
    return _lower_with_builtin(ctx, in_nodes, params)
  return _lower(ctx, in_nodes, params, "cuda")


def _is_triton_style(params: dict) -> bool:
  cp = params.get("compiler_params")
  if cp is None or isinstance(cp, CompilerParams):
    return params.get("mesh") is None
  return _is_builtin_triton_params(cp)


# JAX knows the rule as soon as CompilerParams can be had, by whichever import: the package
# used to register it when imported, but it no longer imports this module (JAX is heavy)
_ensure_registered()
