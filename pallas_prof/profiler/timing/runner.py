"""Replay: launch a CompiledKernel's cubin on the GPU and time it.

The cubin Triton produced is loaded with cuModuleLoadData and launched with
cuLaunchKernel (cuda-bindings; no torch, no JAX in the loop), with the
kernel's parameters: one pointer per input, one per output, then Triton
3.6's global-scratch and profile-scratch pointers (null unless the kernel
asks for scratch).

What a replay does, in order:
  1. inputs drawn fresh at random per dtype, in enough sets (each with its
     own outputs) that their total exceeds twice the L2 cache; launches
     rotate through the sets so no launch finds its data in L2
  2. outputs poisoned twice (0xFF bytes, then 0x5A) and launched: an element
     equal to the poison both times was never written
  3. optional correctness: outputs of set 0 against the CPU interpreter or a
     reference function
  4. per timing mode, warm-up, then at least `min_launches` timed launches and
     `min_seconds` of them (or, past min_launches, `max_seconds` of wall
     time), CUDA events around each launch (on a stream of our own)
  5. median, p10, p90, min of the per-launch times, per mode

Two timing modes (after nvbench, which reports "cold" and "batch" GPU time):

  cold       the headline figure, and what Nsight Compute's gpu__time_duration
             measures (ncu flushes the caches before each launch and leaves
             idle gaps between launches). Before each timed launch a read-only
             Triton kernel reads twice the L2 size (l2flush.py), outside the
             events: the kernel starts with no data of its own in L2 and no
             dirty lines of a previous launch to write back. Rotating sets
             alone leave the previous launch's outputs dirty in L2 (up to ~50 MB
             of a 60 MB L2 for an 8192^2 f32 softmax); their write-back slowed
             the next launch against ncu. A throttle guard (throttle.py)
             checks the SM clock after each batch (policy.CHECK_INTERVAL_S)
             and has a throttled batch redone after a recovery sleep:
             back-to-back launches of an 8192^3 bf16 matmul power-capped an
             H200 and took longer than ncu's isolated launches. Once the GPU
             has throttled, the remaining cold launches are paced (one at a
             time, after an idle gap of ten kernel times, bounded:
             policy.pacing_gap), as ncu's isolated launches are.
  sustained  back-to-back launches, no flush, no guard: what a program's loop
             sees, power capping and write-back included.

`replay(mode="both")` (the default) times cold first, on a GPU the sustained
launches have not yet heated, then sustained.

Also a small command line for Nsight Compute to profile a replay in a
subprocess: `python -m pallas_prof.profiler.timing.runner SPEC_DIR --launches N`
(mode "plain": launches only, no flush, since ncu flushes the caches itself;
`--mode cold|sustained|both` times instead and prints the stats).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable

from .correctness import check
from ..launchspec import LaunchSpec
from .policy import MAX_SECONDS, MODES, check_mode, summarize
from .replayer import Replayer
from ..schema import RuntimeStats, TimingStats
from . import throttle as throttle_mod
from .throttle import ThrottleGuard


def replay(ck, *, device: int = 0, min_launches: int = 100, min_seconds: float = 0.2,
           mode: str = "both", aliases=(), zeroed_outputs=(),
           reference: str | Callable | None = None, tolerance: tuple[float, float] | None = None,
           sampler=None, seed: int | None = None, inputs=None, n_sets: int | None = None,
           throttle: ThrottleGuard | bool = True,
           max_seconds: float = MAX_SECONDS) -> RuntimeStats:
  """Times a CompiledKernel (or LaunchSpec) on GPU `device`.

  mode: "cold", "sustained" or "both" (see the module docstring); the result's
    median_s etc. are the cold mode's whenever it was timed.
  reference: None, "interpreter" (the CPU interpreter on the same inputs), or
    a function of the input arrays returning the outputs (e.g. a jnp version).
  sampler: an nvml.Sampler, started and stopped around the sustained window
    (the cold one when only cold is timed).
  inputs: optional list of sets, each a list of input arrays, instead of random ones.
  throttle: True (a guard on the device's NVML clocks, off where NVML is not),
    False (no guard), or a ThrottleGuard (e.g. throttle.for_device(device,
    threshold=0.95)); used by the cold mode only.
  max_seconds: wall-time cap per mode once min_launches are timed.
  """
  modes = check_mode(mode)
  spec = ck if isinstance(ck, LaunchSpec) else LaunchSpec.from_compiled(ck, aliases,
                                                                        zeroed_outputs)
  with Replayer(spec, device, seed, inputs) as r:
    r.prepare(n_sets)
    unwritten, outputs = r.poison_check()
    correctness = None
    if reference is not None:
      correctness = check(ck, r, outputs, reference, tolerance, aliases)
    guard = _guard(throttle, device) if "cold" in modes else None
    try:
      timings = _time_modes(r, modes, min_launches, min_seconds, guard, sampler, max_seconds)
    finally:
      if guard is not None and guard is not throttle:     # ours: release NVML
        guard.close()
    return _runtime_stats(r, device, timings, guard, unwritten, correctness)


def _guard(throttle, device: int) -> ThrottleGuard:
  if isinstance(throttle, ThrottleGuard):
    return throttle
  if not throttle:
    return ThrottleGuard.off("turned off by the caller")
  return throttle_mod.for_device(device)


def _time_modes(r: Replayer, modes, min_launches, min_seconds, guard, sampler,
                max_seconds) -> dict[str, dict]:
  """Each mode's timing; the sampler watches the last mode's window (sustained, when
  timed: where a throttled GPU shows; the cold mode has the guard)."""
  out = {}
  for m in modes:
    watch = sampler if m == modes[-1] else None
    on_window = ((lambda what, s=watch: s.start() if what == "start" else s.stop())
                 if watch is not None else None)
    if m == "cold":
      out[m] = r.time_cold(min_launches, min_seconds, guard, on_window=on_window,
                           max_seconds=max_seconds)
    else:
      out[m] = r.time_launches(min_launches, min_seconds, on_window=on_window,
                               max_seconds=max_seconds)
  return out


def timing_stats(timing: dict) -> TimingStats:
  return TimingStats(mode=timing["mode"], launches=len(timing["times_s"]),
                     warmup_launches=timing["warmup_launches"],
                     paced_gap_s=timing.get("pace_s") or 0.0,
                     timed_window_s=timing["window_s"], **summarize(timing["times_s"]))


def _runtime_stats(r: Replayer, device: int, timings: dict[str, dict], guard, unwritten,
                   correctness) -> RuntimeStats:
  per_mode = {m: timing_stats(t) for m, t in timings.items()}
  main = per_mode.get("cold") or per_mode["sustained"]
  notes = list(r.notes) + [f"random inputs seeded with {r.seed}"]
  bad = [f"output {i}: {n} elements never written" for i, n in enumerate(unwritten) if n]
  notes += bad
  throttle = guard.summary() if guard is not None else None
  if throttle is not None and throttle.note:
    notes.append(f"cold timing: {throttle.note}")
  return RuntimeStats(
      device_index=device, input_sets=r.n_sets, set_bytes=r.set_bytes, l2_bytes=r.l2_bytes,
      outputs_written=not bad, unwritten_elements=unwritten, mode=main.mode,
      cold=per_mode.get("cold"), sustained=per_mode.get("sustained"), correctness=correctness,
      notes=notes, throttle=throttle,
      l2_flush_bytes=r._flush.nbytes if r._flush is not None else None)


# --- command line for ncu ---------------------------------------------------------------------

def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description="Launch a saved kernel (LaunchSpec directory) N times; used under ncu.")
  parser.add_argument("spec_dir")
  parser.add_argument("--launches", type=int, default=5)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--device", type=int, default=0)
  parser.add_argument("--seed", type=int, default=None)
  parser.add_argument("--mode", choices=("plain",) + MODES, default="plain",
                      help="plain (default, what ncu runs): warm-up + N launches, no timing and "
                      "no L2 flush (ncu flushes the caches itself); cold / sustained / both: "
                      "time as replay() does, at least N timed launches, and print the stats")
  parser.add_argument("--min-seconds", type=float, default=0.2)
  args = parser.parse_args(argv)
  spec = LaunchSpec.load(args.spec_dir)
  if args.mode != "plain":
    stats = replay(spec, device=args.device, min_launches=args.launches,
                   min_seconds=args.min_seconds, mode=args.mode, seed=args.seed)
    print(json.dumps({"kernel": spec.name, **stats.to_dict()}))
    return 0
  with Replayer(spec, args.device, args.seed) as r:
    r.prepare()
    for i in range(args.warmup + args.launches):
      r.launch(i)
    r.synchronize()
  print(json.dumps({"kernel": spec.name, "launches": args.warmup + args.launches,
                    "input_sets": r.n_sets}))
  return 0


if __name__ == "__main__":
  sys.exit(main())
