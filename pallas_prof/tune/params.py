"""Tuning compiler parameters: `CompilerParams(autotune=True)`, `Autotune(configs=..., budget_s=...)`
or `PALLAS_PROF_AUTOTUNE=1`.

When a kernel is lowered for the GPU with tuning asked for, each candidate
configuration (num_warps, num_stages, launch_group, tma: KEYS) is lowered, and
all are compiled at once by children of the compile worker (one per core,
Triton already imported in each), launched by the profiler's replay runner on
the same seeded random inputs as the default, and kept only if its outputs equal the
default's (bit for bit for integers, else within the dtype's rounding); the
kept ones are timed with the runner's cold method (L2 flushed before each
launch, median of launches) and the fastest is compiled into the program. The
choice is cached on disk, keyed by the kernel's content, its shapes (part of
that content), the GPU, and the versions of JAX, Triton and pallas-prof: a new
process uses it without timing.

What tuning found is kept in `results()` (the CLI's report and `pallas-prof tune`
read it): per kernel, every candidate's median, the choice and the time spent;
and observers (tracing) get a `tune <kernel>` span with one child per candidate.
A cached choice costs a JSON read, and when it is not the default a lowering
and a compile from pallas-prof's disk cache: it imports neither Triton nor the
profiler's CUDA code beyond the device's name (bench/cost/tune_cost.py measures it).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import statistics
import threading
import time
from typing import Any, Callable, Sequence

from .. import safe_files, serial
from .. import settings as variables   # (settings() is this module's own)
from ..backend.compiling import triton_compat
from ..backend.options import TUNED_FIELDS, TunedSettings
from ..profiler import driver
from ..version import __version__
from . import records, tuned_file, validate
from .choice import MIN_GAIN, cache_path, kernel_dot_rtol, keep_default_within, same_outputs, store
from .tuned_file import TUNED_ENV, choice as tuned_file_choice  # noqa: F401 - the reader's names

ENV = "PALLAS_PROF_AUTOTUNE"
BUDGET_ENV = "PALLAS_PROF_AUTOTUNE_BUDGET_S"   # seconds per kernel when the environment asks
# 4: settings by name (TunedSettings); 3 kept them as (num_warps, num_stages, launch_group,
# tma). A cache of another version is tuned again and rewritten (its identity names the
# pallas-prof that wrote it, so a release never finds an older one: nothing to migrate)
CACHE_VERSION = 4
# warps x stages, and the default's warps and stages launched in groups (a grid of one
# dimension has no grouped order: those candidates are left out there). TMA ({"tma": 1})
# is tried only where a config asks for it: it has run on the H200 (bench/cost/tma.py), but a
# candidate that faulted there would take the user's CUDA context down with it.
# TMA candidates are left out below sm_90, and where no load or store can use TMA.
# Loops pipelined by Triton's per-loop stages ({"loop_stages": 3}): tried where a kernel has a
# loop that loads and has no dot (elsewhere the candidate lowers to the default's kernel), also
# with fewer warps, since Triton copies ahead only loads of 4 bytes or more a thread (JAX's
# norms' dw/db loads 16x16 bfloat16 blocks with 8 warps: 2 bytes a thread). They come first:
# where the budget runs out, the later candidates go untimed.
DEFAULT_CONFIGS = ({"loop_stages": 3}, {"num_warps": 4, "loop_stages": 3}) + \
    tuple({"num_warps": w, "num_stages": s} for w in (4, 8) for s in (2, 3, 4)) + \
    tuple({"launch_group": g} for g in (4, 8)) + \
    tuple({"num_warps": w, "loop_stages": 3} for w in (1, 2))
KEYS = TUNED_FIELDS          # a config names some of these LoweringOptions fields


@dataclasses.dataclass(frozen=True)
class Autotune:
  """What to try: configs of {"num_warps": int, "num_stages": int, "launch_group": int,
  "tma": 0 or 1, "persistent": int, "loop_stages": int} (each key optional: the default's
  value otherwise; default configs: 4 and 8 warps by 2, 3 and 4 stages, launch groups of 4
  and 8, and loops pipelined in 2 and 3 stages; TMA and persistent programs only where a
  config names them) and the seconds a kernel's tuning may take. launch_group:
  CompilerParams.launch_group (0: the plain order); tma: CompilerParams.tma; persistent:
  CompilerParams.persistent (0: one program a point); loop_stages:
  CompilerParams.loop_stages (0: loops as written)."""
  configs: tuple = DEFAULT_CONFIGS
  budget_s: float = 30.0
  min_launches: int = 20
  min_seconds: float = 0.05
  min_gain: float = MIN_GAIN        # another config replaces the default only when this much faster

  def __post_init__(self):
    # kept as tuples of (name, value) pairs: CompilerParams must hash (JAX keys its caches on it)
    configs = tuple(dict(c) for c in self.configs)
    for c in configs:
      unknown = set(c) - set(KEYS)
      if unknown or not c:
        raise ValueError(f"Autotune config {c}: give num_warps, num_stages, launch_group, "
                         f"tma, persistent and/or loop_stages (unknown: {sorted(unknown)})"
                         if unknown else "Autotune config {}: give num_warps, num_stages, "
                         "launch_group, tma, persistent and/or loop_stages")
      if "tma" in c and c["tma"] in (False, True):
        c["tma"] = int(c["tma"])         # a bool is one spelling of 0 or 1
      # the checker the disk's choices pass: a config tuned is one a cache may hold
      problem = next(filter(None, (validate.field_problem(k, v) for k, v in c.items())), None)
      if problem:
        raise ValueError(f"Autotune config {c}: {problem}")
    object.__setattr__(self, "configs", tuple(tuple(sorted(c.items())) for c in configs))

  def config_dicts(self) -> list[dict]:
    return [dict(c) for c in self.configs]


@dataclasses.dataclass(frozen=True)
class Candidate(serial.Saved):
  settings: TunedSettings           # what it tried
  median_s: float | None
  error: str | None = None
  compile_s: float | None = None    # its compile (in parallel with the others')
  start_ns: int = 0                 # its check and timing
  end_ns: int = 0

  @property
  def label(self) -> str:
    return self.settings.label


def config_label(settings: TunedSettings) -> str:
  """"8w 3s", "8w 3s g8", "8w 3s tma"."""
  return settings.label


def _candidate(options, median_s, error=None, compile_s=None, start_ns=0,
               end_ns=0) -> Candidate:
  """A candidate of these LoweringOptions (or TunedSettings)."""
  tried = options if isinstance(options, TunedSettings) else options.settings
  return Candidate(tried, median_s, error, compile_s, start_ns, end_ns)


@dataclasses.dataclass(frozen=True)
class KernelTuning(serial.Saved):
  kernel: str
  default: TunedSettings                  # the kernel's own (its LoweringOptions.settings)
  best: TunedSettings
  candidates: tuple[Candidate, ...]
  tuning_s: float
  from_cache: bool = False
  identity: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)
  start_ns: int = dataclasses.field(default=0, compare=False, repr=False)
  end_ns: int = dataclasses.field(default=0, compare=False, repr=False)
  source_key: str | None = dataclasses.field(default=None, compare=False, repr=False)
  code_key: str | None = dataclasses.field(default=None, compare=False, repr=False)

  @property
  def speedup(self) -> float | None:
    times = {c.settings: c.median_s for c in self.candidates}
    d, b = times.get(self.default), times.get(self.best)
    return d / b if d and b else None


_results: list[KernelTuning] = []
_lock = threading.Lock()


def results() -> list[KernelTuning]:
  with _lock:
    return list(_results)


def clear_results() -> None:
  with _lock:
    _results.clear()


def settings(compiler_params) -> Autotune | None:
  """The tuning asked for by CompilerParams(autotune=...) or PALLAS_PROF_AUTOTUNE=1; None if none."""
  asked = getattr(compiler_params, "autotune", None)
  if isinstance(asked, Autotune):
    return asked
  if asked is True:
    return Autotune()
  if asked is False:                 # said no explicitly: the environment does not override
    return None
  if variables.value(ENV):
    # a bad budget was said (pallas_prof/settings.py): the default's
    seconds = variables.value(BUDGET_ENV)
    return Autotune() if seconds is None else Autotune(budget_s=seconds)
  return None


def select(ck, gk, compiler_params, relower, target, *, compile_fn, aliases=(), zeroed=(),
           device_name: str | None = None):
  """What the GPU path launches: the default compile, a tuned one (tuning asked
  for), or the choice a tuning file (PALLAS_PROF_TUNED) names for this kernel."""
  asked = settings(compiler_params)
  if asked is not None:
    return tune_kernel(gk, ck, relower, target, asked, compile_fn=compile_fn, aliases=aliases,
                       zeroed=zeroed, device_name=device_name)
  path = variables.value(TUNED_ENV)
  if path:
    best = tuned_file.choice(path, gk, target, device_name or _device_name(0))
    if best is not None and best != default_config(gk):
      chosen = _compiled_choice(best, gk, relower, compile_fn)
      if isinstance(chosen, Exception):
        validate.warn_once(f"{TUNED_ENV}={path}: {gk.name}'s entry {config_label(best)} did not "
                           f"build ({type(chosen).__name__}: {str(chosen)[:200]}); the kernel "
                           f"runs with its default config. Delete the entry, or "
                           f"{tuned_file.REWRITE}.")
        return ck
      return chosen
  return ck


def _compiled_choice(best, gk, relower, compile_fn):
  """The kernel compiled with a choice read from disk, or why it could not be: a choice
  that passed every check can still fail to build here (another Triton, a kernel whose
  shared memory does not fit those stages), and that must not fail the user's call."""
  try:
    return compile_fn(relower(gk.options.with_settings(best)))
  except Exception as e:  # noqa: BLE001 - reported by the caller, the default runs instead
    return e


def default_config(gk) -> TunedSettings:
  """The settings the kernel runs with (its LoweringOptions')."""
  return gk.options.settings


def write_results(path: str) -> None:
  """Every tuning of this process, for `pallas-prof tune` (which runs it: read_results)."""
  safe_files.write_atomic(path, serial.to_json(results(), indent=1))


def read_results(path: str) -> tuple[KernelTuning, ...]:
  """What write_results wrote (the child process of `pallas-prof tune`, this version's);
  validate.Refused naming the file and the field for anything else."""
  try:
    return serial.decode(tuple[KernelTuning, ...], validate.read_json(path), path, strict=True)
  except serial.Misfit as e:
    raise validate.Refused(e.describe()) from None


@dataclasses.dataclass(frozen=True)
class CachedTuning(serial.Saved):
  """A kernel's tuning in the cache (params-<digest>.json): the identity it is for, its
  choice and every candidate; _cached checks one read back."""
  version: int
  identity: dict[str, Any]
  best: TunedSettings
  tuning_s: float
  candidates: tuple[Candidate, ...]


def _identity(gk, target, settings: Autotune, device_name: str) -> dict:
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  return {"kernel": gk.name, "source": gk.key,
          "target": list(target), "gpu": device_name, "jax": jax.__version__,
          # the wheel's version, without importing Triton
          "triton": triton_compat.triton_release(), "pallas_prof": __version__,
          "configs": settings.config_dicts()}


def _device_name(device: int) -> str:
  """The GPU's name ("NVIDIA H200"): JAX's, which it has at hand while lowering for
  the GPU; the profiler's CUDA driver only without a JAX GPU backend (tests).
  Asking the driver first cost the first cached kernel of a process a visible delay on the
  H200 (its initialisation and imports)."""
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  try:
    return jax.local_devices(backend="gpu")[device].device_kind
  except (RuntimeError, IndexError):
    return driver.device_info(device).name


def _compile_all(gks: list, target) -> list:
  """Every candidate compiled at once by the compile worker's children, with its
  cubin (the replay runner launches it): a CompiledKernel or the LoweringError."""
  # lazy: at the top it would load jax whenever this module is imported
  from ..backend.compiling.compile import compile_kernels
  return compile_kernels(gks, tuple(target), need_cubin=True)


def _notify(tuning: KernelTuning) -> None:
  records.notify(records.TuningRecord(
      kind="params", name=tuning.kernel, start_ns=tuning.start_ns, end_ns=tuning.end_ns,
      default=tuning.default.label, best=tuning.best.label,
      from_cache=tuning.from_cache, source_key=tuning.source_key, clock="replay",
      candidates=tuple(records.CandidateRecord(
          c.label, c.start_ns, c.end_ns, c.median_s, c.error,
          chosen=c.settings == tuning.best, compile_seconds=c.compile_s)
          for c in tuning.candidates)))


def _cache_file(identity: dict) -> str:
  digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]
  return cache_path(f"params-{digest}")


def tune_kernel(gk, default_ck, relower: Callable[..., object], target, settings: Autotune,
                *, compile_fn: Callable, compile_all: Callable | None = None, aliases=(),
                zeroed=(), device: int = 0, device_name: str | None = None):
  """Returns the CompiledKernel to launch: the default's or the fastest correct candidate's.

  relower(options) lowers the kernel with other LoweringOptions (the candidates are the
  kernel's own, gk.options, with a config's fields replaced); compile_fn(gk) compiles
  one kernel (the cached choice); compile_all(gks) all candidates at once (default: in
  parallel by the compile worker's children)."""
  start_ns = time.time_ns()
  default = gk.options
  identity = _identity(gk, target, settings, device_name or _device_name(device))
  path = _cache_file(identity)
  wanted = [default] + [default.replace(**c) for c in settings.config_dicts()]
  cached = _load(path, identity, [o.settings for o in wanted], default.settings, target)
  if cached is not None:
    best, candidates = cached
    chosen = default_ck if best == default.settings else \
        _compiled_choice(best, gk, relower, compile_fn)
    if not isinstance(chosen, Exception):
      _record(KernelTuning(gk.name, default.settings, best, candidates, 0.0, from_cache=True,
                           identity=identity, start_ns=start_ns, end_ns=time.time_ns(),
                           source_key=gk.key, code_key=gk.code_key))
      return chosen
    _refused(path, gk.name, f"its choice {config_label(best)} did not build "
             f"({type(chosen).__name__}: {str(chosen)[:200]})")
  start = time.perf_counter()
  wanted = list(dict.fromkeys(o for o in wanted if not (o.tma and _below_hopper(target))))
  compiled = {default: default_ck}
  errors: dict = {}            # LoweringOptions -> why the candidate dropped out
  lowered = []
  for options in wanted[1:]:
    try:
      candidate = relower(options)
    except Exception as e:  # noqa: BLE001 - a candidate that does not lower is dropped
      errors[options] = f"{type(e).__name__}: {str(e)[:300]}"
      continue
    if (options.launch_group and not candidate.launch_group) or \
        (options.tma and not candidate.tma) or \
        (options.persistent and not candidate.persistent) or \
        (options.loop_stages and not candidate.loop_stages):
      # no grouped order, no load TMA can serve, no more points than programs, no loop to
      # pipeline: a repeat
      wanted.remove(options)
      continue
    lowered.append((options, candidate))
  gks = [g for _, g in lowered]
  compile_all = compile_all or (lambda gs: _compile_all(gs, target))
  for (w, _), ck in zip(lowered, compile_all(gks), strict=True):
    if isinstance(ck, Exception):   # a candidate that does not compile is dropped
      errors[w] = f"{type(ck).__name__}: {str(ck)[:300]}"
    else:
      compiled[w] = ck
  candidates = measure(compiled, wanted, default, settings, aliases, zeroed, device, start, errors)
  timed = [c for c in candidates if c.median_s is not None]
  best_c = keep_default_within(candidates[0], timed, lambda c: c.median_s,
                               settings.min_gain) if timed else None
  best = best_c.settings if best_c else default.settings
  tuning = KernelTuning(gk.name, default.settings, best, tuple(candidates),
                        time.perf_counter() - start,
                        identity=identity, start_ns=start_ns, end_ns=time.time_ns(),
                        source_key=gk.key, code_key=gk.code_key)
  _record(tuning)
  _save(path, identity, tuning)
  return compiled[default.with_settings(best)]


_below_hopper = validate.below_hopper     # TMA needs sm_90: its candidates are left out below


def measure(compiled: dict, order: Sequence, default, settings: Autotune, aliases, zeroed,
            device: int, start: float, errors: dict) -> list[Candidate]:
  """Each compiled candidate on the default's inputs: outputs compared, then cold-timed."""
  reference = None
  out = []
  for w in order:
    if w in errors or w not in compiled:
      out.append(_candidate(w, None, errors.get(w, "not compiled")))
      continue
    compile_s = compiled[w].compile_seconds
    if w != default and time.perf_counter() - start > settings.budget_s:
      out.append(_candidate(w, None, f"not timed: the {settings.budget_s:g} s budget was spent",
                            compile_s))
      continue
    began = time.time_ns()
    try:
      outputs, times, differs = replay_candidate(compiled[w], reference, aliases, zeroed, device,
                                                 settings.min_launches, settings.min_seconds)
      if differs:
        out.append(_candidate(w, None, differs, compile_s, began, time.time_ns()))
        continue
      reference = outputs if reference is None else reference
      out.append(_candidate(w, statistics.median(times), None, compile_s, began, time.time_ns()))
    except Exception as e:  # noqa: BLE001 - a candidate that fails to run is dropped, and says why
      if w == default:
        raise
      out.append(_candidate(w, None, f"{type(e).__name__}: {str(e)[:300]}", compile_s, began,
                            time.time_ns()))
  return out


SEED = 1234       # every candidate replays the same inputs


def replay_candidate(ck, reference, aliases, zeroed, device: int, min_launches: int,
                     min_seconds: float):
  """One compiled kernel on the seeded inputs: (outputs, cold times or None, why they
  differ from `reference` or None). Raises where an output element is never written.
  The advice's trials time their variants through this as the tuner does."""
  # lazy: the compile and the profiler's replay (jax with them) load only when a kernel is tuned
  from ..backend.compiling.compile import assemble_cubin
  from ..profiler.launchspec import LaunchSpec
  from ..profiler.timing.replayer import Replayer
  ck = assemble_cubin(ck)                 # the GPU path deferred the default's cubin
  spec = LaunchSpec.from_compiled(ck, aliases, zeroed)
  with Replayer(spec, device, SEED) as r:
    r.prepare(1)
    unwritten, outputs = r.poison_check()
    if any(unwritten):
      raise ValueError(f"{sum(n or 0 for n in unwritten)} output elements never written")
    if reference is not None:
      differs = same_outputs(outputs, reference, kernel_dot_rtol([ck.generated]))
      if differs:
        return outputs, None, differs
    timing = r.time_cold(min_launches, min_seconds, None)
    return outputs, timing["times_s"], None


def _record(tuning: KernelTuning) -> None:
  with _lock:
    _results.append(tuning)
  _notify(tuning)


def _load(path: str, identity: dict, tried: list, default: TunedSettings, target):
  """(best, candidates) of the cached tuning at `path`, if the file holds a valid one for
  this identity; a file that does not is dropped with one warning (the kernel is tuned
  again and the file rewritten)."""
  if not os.path.lexists(path):
    return None
  try:
    return _cached(validate.read_json(path), identity, tried, default, target, path)
  except validate.Refused as e:
    _refused(path, identity["kernel"], str(e))
    return None


def _refused(path: str, kernel: str, problem: str) -> None:
  validate.warn_once(f"pallas-prof: the cached tuning {path} of kernel {kernel} is not used: "
                     f"{problem}. The kernel is tuned again and the file rewritten; if this "
                     "repeats, delete the file.")


def _cached(data, identity: dict, tried: list, default: TunedSettings, target,
            where: str = "cache") -> tuple[TunedSettings, tuple[Candidate, ...]]:
  """The cached tuning's (best, candidates), checked by validate.cached_choice (the one
  checker of both tuners' caches) before a record is made of it."""
  body, best = validate.cached_choice(
      data, _LAYOUT, identity, [serial.plain(t) for t in tried], default=serial.plain(default),
      config_problem=validate.settings_problem,
      best_problem=lambda v: validate.settings_problem(v, target))
  return serial.load(TunedSettings, best, f"{where}.best"), tuple(
      serial.load(Candidate, c, f"{where}.candidates[{i}]")
      for i, c in enumerate(body["candidates"]))


_LAYOUT = validate.CacheLayout(
    version=CACHE_VERSION, what="kernel", config="settings", seconds="median_s",
    fields={"best": validate.saved_settings, "tuning_s": validate.seconds,
            "candidates": validate.a_list},
    candidate_fields={"settings": validate.saved_settings, "median_s": validate.maybe_seconds,
                      "error": validate.maybe_text, "compile_s": validate.maybe_seconds,
                      "start_ns": validate.an_int, "end_ns": validate.an_int})


def _save(path: str, identity: dict, tuning: KernelTuning) -> None:
  """Whole or not at all, in the cache or the process's stand-in for it (choice.store);
  where no folder can take it, it costs the next process a tuning, never this launch: one
  warning says why."""
  if store(path, CachedTuning(CACHE_VERSION, identity, tuning.best, tuning.tuning_s,
                             tuning.candidates)) is None:
    validate.warn_once(f"pallas-prof: the tuning of kernel {tuning.kernel} was not cached ({path} "
                       "could not be written, nor a temporary folder); this process uses it, the "
                       "next one tunes again. Free the disk or set PALLAS_PROF_CACHE_DIR to a "
                       "writable folder.")