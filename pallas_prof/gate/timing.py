"""The kernels of a test profiled: static figures everywhere, replay time on a GPU.

Both come from pallas_prof.profile(), as `pallas-prof run` gets them. On a GPU the
replay is repeated (each repeat a full replay of its own: launches, median, p10, p90)
and the gate keeps the median of the repeats' medians with a noise: the larger of the
spread between the repeats' medians and half the launches' p10..p90 spread. A later
run is slower only past both runs' noise.
"""
from __future__ import annotations

import statistics

from .. import profiler
from .figures import KernelFigures, Runtime, kernel_figures


def noise_us(medians_us: list[float], spreads_us: list[float]) -> float:
  """How far apart two timings of the same kernel may be by chance: the range of the
  repeats' medians, or half the launch-to-launch p10..p90 spread, whichever is larger."""
  between = max(medians_us) - min(medians_us) if medians_us else 0.0
  within = statistics.median(spreads_us) / 2 if spreads_us else 0.0
  return max(between, within)


def runtime_of(profiles_by_repeat: list) -> Runtime | None:
  """One kernel's Runtime from its KernelProfile in each repeat (None if never timed)."""
  timed = [p.runtime for p in profiles_by_repeat if p is not None and p.runtime is not None]
  if not timed:
    return None
  medians = [r.median_s * 1e6 for r in timed]
  spreads = [(r.p90_s - r.p10_s) * 1e6 for r in timed]
  return Runtime(repeats=len(timed), launches=min(r.launches for r in timed),
                 median_us=statistics.median(medians), noise_us=noise_us(medians, spreads),
                 medians_us=medians)


def measure(records, *, repeats: int, launches: int, profile=None
            ) -> tuple[list[KernelFigures], str | None]:
  """(each record's figures, why nothing was timed or None). `profile` is
  pallas_prof.profile unless given (the tests give a stand-in for a GPU)."""
  if profile is None:
    profile = profiler.profile
  first = profile(records, replay=True, min_launches=launches, nvml=False, ceilings=False)
  if not first.gpu_present:
    return [kernel_figures(p, r) for p, r in zip(first.kernels, records, strict=True)], \
        "no GPU: " + first.message.split(".")[0].removeprefix("no NVIDIA GPU: ")
  reports = [first] + [profile(records, replay=True, min_launches=launches, nvml=False,
                               ceilings=False, sample=False)
                       for _ in range(max(0, repeats - 1))]
  out = []
  for i, (p, record) in enumerate(zip(first.kernels, records, strict=True)):
    runtime = runtime_of([r.kernels[i] for r in reports])
    out.append(kernel_figures(p, record, runtime))
  untimed = None if any(k.runtime for k in out) else "the replay timed no kernel"
  return out, untimed
