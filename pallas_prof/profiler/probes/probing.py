"""`--probes`: the kernel's probed variant, replayed; its figures, distortion and
reconciliation with the PC samples.

The probed variant (backend/lowering/features/probes.py) is lowered again from the pallas_call
(the registry record's `relower`) with the compiled kernel's LoweringOptions (its
num_warps, num_stages, launch order, TMA use, workarounds), compiled through the normal path, and launched only here, by
the replay, with a probe buffer the replay allocates. The headline runtime and
the user's program keep running the kernel without probes.

Alone: the probed variant is launched once more with one CTA per SM (it asks for
all the shared memory a block may have), so each region's cycles are its own
work and waits, without other CTAs' warps competing for the SM's pipes, issue
slots and memory requests. A region that takes much longer beside the others
than alone spends the difference waiting for what it shares; the shares of the
alone reading are the split of the work.

Distortion: the probed and the plain kernel are timed here alternately (twice each),
the same way (cold: L2 flushed before each launch); registers from ptxas, SASS
instructions from nvdisasm. Above DISTRUST_PCT the report says which figures
not to trust.

Reconciliation: each region's share of the probed cycles beside the share of
the PC samples at the same equations (inclusive of what they contain) before
any charging, which is what a clock read at a region's ends sees too, and
beside the charged weight the report shows; the probed CTAs' span beside the
replay's time. Differences above DISAGREE_POINTS are listed, not smoothed over.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import probe_results
from ..driver import ProfilerError
from ..launchspec import LaunchSpec
from ..static.correlate import correlate
from ..timing.replayer import Replayer
from ..timing.throttle import ThrottleGuard
from ..probe_schema import (Distortion, ProbeResult, ReconciledRegion, Reconciliation,
                            RegionPlacement)

DISTRUST_PCT = 10.0        # distortion above this: the report names the figures to distrust
DISAGREE_POINTS = 10.0     # probe and sampling shares further apart than this are listed
MOVED_PCT = 10.0           # a region with more of its code moved than this gets a note


def variant(target, options=None):
  """(GeneratedKernel, CompiledKernel) of the probed variant, cubin assembled."""
  # lazy: at the top it would load jax whenever this module is imported
  from ...backend.compiling.compile import assemble_cubin, compile_kernel
  relower = target.relower
  ck = target.compiled
  if relower is None:
    raise ProfilerError(f"kernel {target.name}: probes need the pallas_call it came from "
                        "(kernels lowered by pallas-prof in this process); this one has none")
  if ck.generated is not None and 0 in ck.generated.launch_grid:
    grid = tuple(ck.generated.grid)
    raise ProfilerError(f"kernel {target.name}: its grid {grid} has no programs (a dimension "
                        "of 0), so nothing runs and there is nothing to probe; give every "
                        "grid dimension at least one program (pl.cdiv(size, block))")
  plain = ck.generated
  gk = relower(plain.options.replace(probes=options or True))
  return gk, assemble_cubin(compile_kernel(gk, ck.target))


def sass_counts(ck) -> tuple[int | None, int | None]:
  """(SASS instructions, those from the probes' source lines: `pp_...`)."""
  corr = correlate(ck)
  if corr.sass_error is not None or not corr.sass:
    return None, None
  lines = ck.generated.source.splitlines() if ck.generated is not None else []
  probe_lines = {n + 1 for n, text in enumerate(lines) if text.lstrip().startswith("pp_")}
  return len(corr.sass), sum(1 for i in corr.sass if i.generated_line in probe_lines)


def static_distortion(plain, probed) -> Distortion:
  """Registers and SASS instructions with and without probes (no GPU needed)."""
  sp, _ = sass_counts(plain)
  sq, own = sass_counts(probed)
  return Distortion(runtime_plain_s=None, runtime_probed_s=None, runtime_pct=None,
                    registers_plain=plain.registers, registers_probed=probed.registers,
                    sass_plain=sp, sass_probed=sq,
                    sass_pct=100.0 * (sq / sp - 1) if sp and sq else None,
                    sass_probe_instructions=own,
                    sass_kernel_pct=100.0 * ((sq - own) / sp - 1) if sp and sq else None)


def placement(gk, ck) -> tuple[list[RegionPlacement], list[str]]:
  """Per region, how much of its equations' SASS lies between its two clock reads (the
  k-th `CS2R ... SR_CLOCKLO` is boundary k), and sentences for regions above MOVED_PCT."""
  layout = gk.probe_layout
  sass = correlate(ck).sass
  bounds = [n for n, ins in enumerate(sass) if "SR_CLOCKLO" in ins.text]
  if len(bounds) != len(layout.regions) + 1:
    return [], [f"placement unknown: {len(bounds)} clock reads in the SASS for "
                f"{len(layout.regions) + 1} boundaries"]
  region_of = {i: k for k, r in enumerate(layout.regions) for i in r.eqns}
  owner = [region_of.get(_top_level(gk, ins.eqn)) if ins.eqn is not None else None
           for ins in sass]
  out, notes = [], []
  for k, region in enumerate(layout.regions):
    inside = range(bounds[k] + 1, bounds[k + 1])
    mine = sum(1 for n in inside if owner[n] == k)
    foreign = sum(1 for n in inside if owner[n] is not None and owner[n] != k)
    moved = sum(1 for n, o in enumerate(owner) if o == k and n not in inside)
    out.append(RegionPlacement(region.label, mine, moved, foreign))
    if (moved + foreign) > MOVED_PCT / 100 * max(mine + moved, 1) and (moved or foreign):
      notes.append(f"{region.label}: {moved} of its {mine + moved} SASS instructions lie "
                   f"outside its probes, {foreign} of other regions' inside them")
  return out, notes


def _top_level(gk, index: int) -> int:
  while gk.eqns[index].parent is not None:
    index = gk.eqns[index].parent
  return index


def measure(target, device: int = 0, options=None, *, min_launches: int = 100,
            min_seconds: float = 0.2) -> ProbeResult:
  """Replays the probed variant: one launch read back, then the plain and the probed
  kernel timed alike for the distortion."""
  gk, probed = variant(target, options)
  layout = gk.probe_layout
  spec = LaunchSpec.from_compiled(probed, target.aliases)
  plain_spec = LaunchSpec.from_compiled(target.compiled, target.aliases)
  with Replayer(spec, device) as r, Replayer(plain_spec, device) as p:
    r.prepare()
    p.prepare()
    for s in range(3):              # warm: module, instruction cache, clocks
      r.launch(s)
    r.zero_param("probes", 0)
    r.launch(0)
    words = r.read_param("probes", 0)
    # alternately, half the launches each time, so a GPU heating or throttling
    # meanwhile slows both alike
    times = {"plain": [], "probed": []}
    for _ in range(2):
      for name, rep in (("plain", p), ("probed", r)):
        timing = rep.time_cold(max(min_launches // 2, 10), min_seconds / 2,
                               ThrottleGuard.off("paired with the other variant"))
        times[name] += timing["times_s"]
    try:
      plain_ctas = p.ctas_per_sm()
      alone = _alone(r, layout)
    except Exception as e:  # noqa: BLE001 - the reading beside the others stands without it
      alone = f"no 'alone' reading: {type(e).__name__}: {str(e)[:200]}"
  plain_s, probed_s = _median(times["plain"]), _median(times["probed"])
  result = probe_results.summarize(probe_results.parse(words, layout), layout)
  if not isinstance(alone, str):
    try:
      rows, beside, shared = alone
      probe_results.add_alone(result, rows, layout, beside, shared, plain_ctas)
    except probe_results.ProbeBufferError as e:
      alone = f"no 'alone' reading: {e}"
  if isinstance(alone, str):
    result.notes.append(alone)
  d = static_distortion(target.compiled, probed)
  d.runtime_plain_s, d.runtime_probed_s = plain_s, probed_s
  d.runtime_pct = 100.0 * (probed_s / plain_s - 1) if plain_s else None
  d.distrust = distrust(d)
  result.distortion, result.distortion_pct = d, d.runtime_pct
  result.notes.append(_LOAD_NOTE if any(r.waits for r in result.regions) else _JOINED_NOTE)
  result.placement, moved = placement(gk, probed)
  result.notes += [f"code moved across probes: {m}" for m in moved]
  return result


def _alone(r, layout):
  """The probed variant once more with one CTA per SM (Replayer.isolate): (the rows, CTAs
  per SM as it runs, the shared memory asked for), or why there is no such reading."""
  sms = r.ctx.attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")
  if layout.programs <= sms:
    return (f"the grid's {layout.programs} CTAs fit on the {sms} SMs at once: they run alone "
            "already (no 'alone' reading)")
  beside, alone = r.isolate()
  if beside <= 1:
    return ("the kernel runs one CTA per SM already: its figures are the regions' own "
            "(no 'alone' reading)")
  if alone != 1:
    return (f"asking for {r.shared} bytes of shared memory left {alone} CTAs per SM, not "
            "one: no 'alone' reading")
  r.launch(0)
  r.zero_param("probes", 0)
  r.launch(0)
  return probe_results.parse(r.read_param("probes", 0), layout), beside, r.shared


_LOAD_NOTE = ("a probe reads the clock when its warp issues it, and a warp waits for loaded "
              "data where it first uses it: a region of loads ends with a probe that first "
              "uses every loaded value, so it holds the loads' wait (a load of more than 64 "
              "values per thread shares its first use's region instead)")
_JOINED_NOTE = ("a probe reads the clock when its warp issues it: a load's wait shows where the "
                "value is first used, so a load of more than 64 values per thread shares its "
                "region with its first use")


def _median(times: list[float]) -> float:
  return float(np.median(times))


def distrust(d: Distortion) -> list[str]:
  """Which figures the distortion makes unreliable, in words."""
  out = []
  if d.runtime_pct is not None and abs(d.runtime_pct) > DISTRUST_PCT:
    out.append(f"the probed kernel runs {d.runtime_pct:+.1f}% against the plain one: distrust "
               "the per-region ns and the CTA timeline's absolute times; the shares of "
               "short regions most")
  if d.sass_kernel_pct is not None and abs(d.sass_kernel_pct) > DISTRUST_PCT:
    out.append(f"around the probes the compilers changed the kernel's own SASS by "
               f"{d.sass_kernel_pct:+.1f}% instructions: distrust the shares of regions whose "
               "code changed (placement)")
  if d.registers_plain and d.registers_probed and d.registers_probed != d.registers_plain:
    change = 100.0 * (d.registers_probed / d.registers_plain - 1)
    if abs(change) > DISTRUST_PCT:
      out.append(f"registers {d.registers_plain} -> {d.registers_probed} ({change:+.0f}%): "
                 "occupancy and so the CTA timeline may differ from the plain kernel's")
  return out


def reconcile(result: ProbeResult, attribution: Any, basis: str,
              replay_median_s: float | None) -> Reconciliation:
  """Each region's probe share beside two sampling shares of the same equations (with
  what is nested in them): where the sampled warps stood (`share_at`, before any
  charging: what a clock read at the region's ends also sees) and the weight the report
  shows (waits charged to loads, contention to issuers). Disagreement is judged against
  the first; the second differs by design wherever waits were charged elsewhere."""
  stood, charged = {}, {}
  if attribution is not None:
    parent = {e.index: e.parent for e in attribution.equations}
    for e in attribution.equations:
      top = e.index
      while parent.get(top) is not None:
        top = parent[top]
      stood[top] = stood.get(top, 0.0) + float(e.share_at or 0.0)
      if e.parent is None:
        charged[top] = e.inclusive_weight or e.weight
  rows, disagreements = [], []
  measured = basis in ("pc_sampling", "ncu")
  # a region of loads that ends in a wait holds the wait the samples see at the first
  # use; the charged weight moves those waits to the loads, as the probes do
  compared = "charged" if any(r.waits for r in result.regions) else "stood"
  for region in result.regions:
    at = sum(stood.get(i, 0.0) for i in region.eqns) if region.eqns else None
    weight = sum(charged.get(i, 0.0) for i in region.eqns) if region.eqns else None
    diff = None
    other = weight if compared == "charged" else at
    if other is not None and measured:
      diff = 100.0 * (region.share - other)
      if abs(diff) > DISAGREE_POINTS:
        disagreements.append(
            f"{region.label}: probes {100 * region.share:.1f}%, {basis} {100 * other:.1f}% "
            + ("as charged (waits charged to loads)" if compared == "charged"
               else "where the warps stood") + f" ({diff:+.1f} points; "
            + (f"where they stood {100 * at:.1f}%)" if compared == "charged"
               else f"charged weight {100 * weight:.1f}%)"))
    rows.append(ReconciledRegion(region.label, region.share, weight, diff, at))
  span = result.span_ns * 1e-9 if result.span_ns else None
  if span and replay_median_s:
    ratio = span / replay_median_s
    if result.program_stride == 1 and not 0.8 <= ratio <= 1.25:
      disagreements.append(f"the probed CTAs span {span * 1e6:.1f} us, the replay's median is "
                           f"{replay_median_s * 1e6:.1f} us ({ratio:.2f}x)")
  if not measured:
    disagreements.append(f"no measured weights to set beside the probes (basis: {basis})")
  return Reconciliation(basis=basis, regions=rows, probed_span_s=span,
                        replay_median_s=replay_median_s, disagreements=disagreements,
                        compared_with=compared)
