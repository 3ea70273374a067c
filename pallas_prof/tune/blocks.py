"""Tuning block sizes: `pallas_prof.autotune(configs=[...], key=[...])`.

For a function that builds its pallas_calls from parameters (block sizes, warps,
splits), as jax-triton's and Triton's @autotune do: the first call with a new
key runs every config, keeps those whose outputs equal the first config's (the
default: bit for bit for integers, within the dtype's tolerance for floats,
since a different block size may change a reduction's order), times each whole
call (after a warm-up, batches of back-to-back calls, the configs taking turns,
medians; on a GPU by the GPU's clock, CUPTI's kernel durations, else by the wall
clock: tune/calltime.py) and uses the fastest from then on. The choice is kept in
memory and on disk,
keyed by the function's source, the key's shapes, dtypes and values, the device
and the versions of JAX, Triton and pallas-prof: a new process uses it without
timing.

    @pallas_prof.autotune(configs=[dict(bm=128, bn=128), dict(bm=64, bn=256)], key=["a", "b"])
    def matmul(a, b, bm=128, bn=128): ...

Tuning runs the function on real arrays, so call it outside jax.jit (it may jit
inside). Under a trace there is nothing to time: a tuned choice already known is
used, else the first config, with a warning that says so.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import json
import os
import time
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from .. import serial
from ..backend import kernel_registry
from ..backend.compiling import triton_compat
from ..version import __version__
from . import calltime, records, validate
from .choice import (MIN_GAIN, cache_path, kernel_dot_rtol, keep_default_within, leaves,
                     same_outputs, store)

# 2: choices made on a GPU are timed by the GPU's clock (version 1's wall clock
# measured jaxlib's dispatch of short kernels, which differs between configs)
CACHE_VERSION = 2


@dataclasses.dataclass(frozen=True)
class Candidate(serial.Saved):
  config: dict[str, Any]
  seconds: float | None          # median seconds per call (Tuning.clock's); None when not timed
  error: str | None = None       # why it was dropped (an exception, or outputs that differ)
  start_ns: int = serial.field(saved=False, default=0)    # its run, check and timing
  end_ns: int = serial.field(saved=False, default=0)


def config_label(config: dict) -> str:
  return " ".join(f"{k}={v}" for k, v in config.items()) or "(defaults)"


@dataclasses.dataclass(frozen=True)
class Tuning(serial.Saved):
  """What tuning one key found: every candidate, the choice, the time it took."""
  function: str
  key: str
  best: dict[str, Any]
  default_seconds: float | None
  best_seconds: float | None
  candidates: tuple[Candidate, ...]
  tuning_seconds: float
  from_cache: bool = serial.field(saved=False, default=False)     # read back: True
  clock: str = "wall"            # what timed the candidates: "gpu" (CUPTI) or "wall"
  clock_note: str | None = None  # why the wall clock, on a machine with a GPU
  # config label -> the registry labels its first call lowered (not saved: this process's)
  kernels: dict = serial.field(saved=False, default_factory=dict, compare=False, repr=False)

  @property
  def speedup(self) -> float | None:
    if self.default_seconds and self.best_seconds:
      return self.default_seconds / self.best_seconds
    return None



@dataclasses.dataclass(frozen=True)
class CachedChoice(serial.Saved):
  """A function's tuning in the cache: the identity it is for and what tuning found;
  _cached_tuning checks one read back."""
  version: int
  identity: dict[str, Any]
  tuning: Tuning


# --- keys and the disk cache ---------------------------------------------------------------------

def _is_array(value) -> bool:
  return getattr(value, "shape", None) is not None and getattr(value, "dtype", None) is not None


def _describe(value) -> Any:
  """A key part: an array by its shape and dtype, anything else by its repr."""
  if isinstance(value, (tuple, list)):
    return "(" + ", ".join(map(_describe, value)) + ")"
  shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
  if shape is not None and dtype is not None:
    return f"{np.dtype(dtype).name}{list(shape)}"
  return repr(value)


@functools.lru_cache(maxsize=None)
def _environment_items() -> tuple:
  return tuple(_environment_now().items())


def _environment() -> dict:
  return dict(_environment_items())


def _environment_now() -> dict:
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  triton_version = triton_compat.triton_release()
  if triton_version == "?":
    triton_version = None       # no Triton installed (as before: recorded as null)
  dev = jax.devices()[0]
  return {"device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}", "jax": jax.__version__,
          "triton": triton_version, "pallas_prof": __version__}


def _source_digest(fn) -> str:
  try:
    text = inspect.getsource(fn)
  except (OSError, TypeError):
    text = getattr(fn, "__qualname__", repr(fn))
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _load(digest: str, identity: dict, configs: list) -> Tuning | None:
  """The cached tuning of this identity, if its file holds a valid one; a file that does
  not (damaged, edited, another function's, a `best` that is not one of `configs`) is
  dropped with one warning, and the caller tunes again and rewrites it."""
  path = cache_path(digest)
  if not os.path.lexists(path):
    return None
  try:
    return _cached_tuning(validate.read_json(path), identity, configs)
  except validate.Refused as e:
    validate.warn_once(
        f"pallas_prof.autotune: the cached choice {path} for {identity['function']} "
        f"({identity['key'] or 'no key'}) is not used: {e}. The function is tuned again and "
        "the file rewritten; if this repeats, delete the file.", stacklevel=3)   # the user's call
    return None


def _cached_tuning(data, identity: dict, configs: list) -> Tuning:
  """The Tuning in a cache file's JSON, checked by validate.cached_choice (the one checker
  of both tuners' caches), its configs the caller's own objects (nothing of the file
  reaches the call but which of them won); Refused if any part is not valid."""
  t, best = validate.cached_choice(data, _LAYOUT, identity, configs)
  ours = {validate.canonical(c): c for c in configs}
  candidates = tuple(Candidate(ours[validate.canonical(c["config"])], c["seconds"], c["error"])
                     for c in t["candidates"])
  return Tuning(t["function"], t["key"], ours[validate.canonical(best)], t["default_seconds"],
                t["best_seconds"], candidates, t["tuning_seconds"], True, t["clock"],
                t.get("clock_note"))


_LAYOUT = validate.CacheLayout(
    version=CACHE_VERSION, body="tuning", what="function", config="config", seconds="seconds",
    same_as_identity=("key",), every_config=True,
    fields={"function": validate.is_text, "key": validate.is_text, "best": validate.an_object,
            "default_seconds": validate.maybe_seconds, "best_seconds": validate.maybe_seconds,
            "tuning_seconds": validate.seconds,
            "clock": validate.described("'gpu' or 'wall'")(lambda v: v in ("gpu", "wall")),
            "candidates": validate.a_list},
    optional={"clock_note": validate.maybe_text},
    candidate_fields={"config": validate.an_object, "seconds": validate.maybe_seconds,
                      "error": validate.maybe_text})


def _save(digest: str, tuning: Tuning, identity: dict) -> None:
  """Whole or not at all, in the cache or the process's stand-in for it (choice.store);
  where no folder can take it, it costs the next process a tuning, never this call: one
  warning says why."""
  path = cache_path(digest)
  if store(path, CachedChoice(CACHE_VERSION, identity, tuning)) is None:
    validate.warn_once(f"pallas_prof.autotune: the choice for {identity['function']} was not "
                       f"cached ({path} could not be written, nor a temporary folder); this "
                       "process uses it, the next one tunes again. Free the disk or set "
                       "PALLAS_PROF_CACHE_DIR to a writable folder.", stacklevel=3)  # the user's call


# --- running and comparing candidates ------------------------------------------------------------

def tune(fn: Callable, configs: Sequence[dict], args: tuple, kwargs: dict, *,
         budget_s: float = 30.0, repeats: int = 10, warm_up: int = 2, name: str = "",
         key: str = "", min_gain: float = MIN_GAIN) -> Tuning:
  """Runs every config on (args, kwargs) and returns the Tuning; configs[0] is the default,
  kept unless another is faster by more than `min_gain` (a fraction of its time)."""
  start = time.perf_counter()
  start_ns = time.time_ns()
  candidates: list[Candidate] = []
  lowered: dict[str, tuple] = {}
  timers: dict[int, calltime.CallTimer] = {}       # candidate index -> its warmed-up call
  reference = None
  for i, config in enumerate(configs):
    began = time.time_ns()
    if i and time.perf_counter() - start > budget_s:
      candidates.append(Candidate(dict(config), None, f"not tried: the {budget_s:g} s budget was spent",
                                  began, began))
      continue
    call = functools.partial(fn, *args, **kwargs, **config)
    try:
      with _lowered_by(lowered, config_label(config)):
        outputs = leaves(call())
      if reference is not None:
        differs = same_outputs(outputs, reference, _dot_rtol(lowered))
        if differs:
          candidates.append(Candidate(dict(config), None, differs, began, time.time_ns()))
          continue
      timer = calltime.CallTimer(call, warm_up)
    except Exception as e:  # noqa: BLE001 - a config that fails to build is dropped, and says why
      candidates.append(Candidate(dict(config), None, f"{type(e).__name__}: {str(e)[:300]}",
                                  began, time.time_ns()))
      if i == 0:
        raise TuningError(f"the default config {config} of {name} failed: {e}") from e
      continue
    if reference is None:
      reference = outputs
    timers[len(candidates)] = timer
    candidates.append(Candidate(dict(config), None, None, began, time.time_ns()))
  # one clock for every candidate: the GPU's where it works on the default's call
  clock, clock_note = calltime.pick_clock(next(iter(timers.values())).call) if timers \
      else ("wall", None)
  for timer in timers.values():
    timer.clock = clock
  # every config that built and agreed, timed in turns (drift falls on all alike), within
  # what is left of the budget and about a second per config
  left = max(0.05, budget_s - (time.perf_counter() - start))
  try:
    medians = calltime.time_in_turns(list(timers.values()), repeats,
                                     min(float(len(timers)), left))
  except calltime.ClockError as e:       # the GPU's clock failed part way: all again by the wall clock
    clock, clock_note = "wall", f"the GPU's clock failed while timing ({str(e)[:200]})"
    for timer in timers.values():
      timer.clock, timer.samples, timer.error = "wall", [], None
    medians = calltime.time_in_turns(list(timers.values()), repeats,
                                     min(float(len(timers)), left))
  for (index, timer), seconds in zip(timers.items(), medians, strict=True):
    candidates[index] = dataclasses.replace(candidates[index], seconds=seconds,
                                            error=timer.error, end_ns=timer.end_ns)
  if candidates[0].seconds is None and candidates[0].error is not None:
    raise TuningError(f"the default config {configs[0]} of {name} failed: "
                      f"{candidates[0].error}")
  best = keep_default_within(candidates[0], [c for c in candidates if c.seconds is not None],
                             lambda c: c.seconds, min_gain)
  tuning = Tuning(name, key, best.config, candidates[0].seconds, best.seconds, tuple(candidates),
                  time.perf_counter() - start, clock=clock,
                  clock_note=clock_note if clock_note and not clock_note.startswith("no GPU")
                  else None, kernels=lowered)
  _notify(tuning, start_ns, time.time_ns(), configs[0])
  return tuning


def _notify(tuning: Tuning, start_ns: int, end_ns: int, default: dict) -> None:
  """Observers (tracing) get `tune <function>` with a child per config (tune/records.py)."""
  records.notify(records.TuningRecord(
      kind="blocks", name=tuning.function, start_ns=start_ns, end_ns=end_ns,
      default=config_label(default), best=config_label(tuning.best),
      from_cache=tuning.from_cache, clock=tuning.clock,
      candidates=tuple(records.CandidateRecord(
          config_label(c.config), c.start_ns, c.end_ns, c.seconds, c.error,
          chosen=c.config == tuning.best) for c in tuning.candidates)))


class TuningError(ValueError):
  pass


def _is_tracer(x) -> bool:
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  tracer = getattr(jax.core, "Tracer", None)
  if tracer is not None:
    return isinstance(x, tracer)
  return isinstance(x, jax.Array) and not hasattr(x, "addressable_shards")


# --- calls kept for the advice (pallas_prof/advice: actions of kind b) -----------------------

RECORDING = {"on": False}     # the advice's recipes.capture() turns it on while a script runs


@dataclasses.dataclass
class TunedCall:
  """A call of an autotuned function: what the advice needs to try other configs of it."""
  fn: Callable
  name: str
  configs: list
  best: dict
  args: tuple
  kwargs: dict
  kernels: tuple                 # registry labels the call's chosen config lowered


_calls: list[TunedCall] = []


def tuned_calls() -> list[TunedCall]:
  return list(_calls)


def clear_tuned_calls() -> None:
  _calls.clear()


def _dot_rtol(lowered: dict) -> float:
  """choice.dot_rtol over the kernels the configs' calls lowered so far (where their dots
  round their inputs to TF32, float32 outputs are compared to that precision)."""
  labels = {label for labels in lowered.values() for label in labels}
  return kernel_dot_rtol(r.generated for r in kernel_registry.kernels() if r.label in labels)


@contextlib.contextmanager
def _lowered_by(into: dict, label: str):
  """Notes in `into[label]` the registry labels lowered meanwhile."""
  before = {r.label: r.lowerings for r in kernel_registry.kernels()}
  try:
    yield
  finally:
    into[label] = tuple(r.label for r in kernel_registry.kernels()
                        if before.get(r.label) != r.lowerings)


def _recorded_call(fn, configs, tuning, args, kwargs, name):
  lowered: dict = {}
  with _lowered_by(lowered, "call"):
    out = fn(*args, **kwargs, **tuning.best)
  labels = lowered["call"] or tuning.kernels.get(config_label(tuning.best), ())
  if labels:
    _calls.append(TunedCall(fn, name, configs, dict(tuning.best), args, dict(kwargs), labels))
  return out


# --- the decorator -------------------------------------------------------------------------------

def autotune(configs: Sequence[dict], key: Sequence[str] = (), *, budget_s: float = 30.0,
             repeats: int = 10, warm_up: int = 2, cache: bool = True, name: str | None = None,
             min_gain: float = MIN_GAIN):
  """Decorator: tune `configs` (keyword arguments of the function; the first is the
  default) per distinct `key` (argument names: arrays by shape and dtype, other
  values by value; empty: every array argument), as the module docstring says.
  name: tells apart functions that share their source (closures made in a loop)."""
  configs = [dict(c) for c in configs]
  if not configs:
    raise TuningError("autotune needs at least one config (the first is the default)")
  names = {k for c in configs for k in c}

  def decorate(fn):
    signature = inspect.signature(fn)
    unknown = [n for n in names if n not in signature.parameters
               and not any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values())]
    if unknown:
      raise TuningError(f"configs of {fn.__qualname__} name {sorted(unknown)}, which it does not take")
    source = _source_digest(fn)
    chosen: dict[str, Tuning] = {}

    def key_of(args, kwargs) -> str:
      bound = signature.bind_partial(*args, **kwargs)
      parts = [f"{n}={_describe(v)}" for n, v in bound.arguments.items()
               if (n in key if key else _is_array(v) or (isinstance(v, (tuple, list))
                                                          and any(map(_is_array, v))))]
      return ", ".join(parts)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
      # lazy: keeps jax out of this module's import (start-up time)
      import jax
      k = key_of(args, kwargs)
      tuning = chosen.get(k)
      if tuning is None:              # once per key and process: the disk, else tuning
        identity = {"function": name or f"{fn.__module__}.{fn.__qualname__}", "source": source,
                    "key": k, "configs": configs, **_environment()}
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str)
                                .encode()).hexdigest()[:24]
        if cache:
          began = time.time_ns()
          tuning = _load(digest, identity, configs)
          if tuning is not None:
            _notify(tuning, began, time.time_ns(), configs[0])
      if tuning is None:
        if any(_is_tracer(x) for x in jax.tree_util.tree_leaves((args, kwargs))):
          warnings.warn(f"pallas_prof.autotune: {fn.__qualname__} is called under a JAX trace "
                        f"(jit, grad, vmap) for key ({k}) that was never tuned: using the first "
                        "config. Call it once on real arrays outside jit to tune it.",
                        stacklevel=2)
          return fn(*args, **kwargs, **configs[0])
        tuning = tune(fn, configs, args, kwargs, budget_s=budget_s, repeats=repeats,
                      warm_up=warm_up, name=name or fn.__qualname__, key=k, min_gain=min_gain)
        if cache and not (tuning.clock == "wall" and tuning.clock_note):
          # a GPU's choice timed by the wall clock (CUPTI was taken) is not kept on disk:
          # the next process times it by the GPU's clock
          _save(digest, tuning, identity)
      chosen[k] = tuning
      wrapper.last_tuning = tuning
      if not RECORDING["on"]:
        return fn(*args, **kwargs, **tuning.best)
      return _recorded_call(fn, configs, tuning, args, kwargs, name or fn.__qualname__)

    wrapper.tunings = chosen
    wrapper.last_tuning = None
    wrapper.configs = configs
    return wrapper
  return decorate
