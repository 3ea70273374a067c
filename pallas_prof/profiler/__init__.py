"""pallas-prof's profiler: static IR correlation, replay timing, NVML, ceilings, CUPTI, ncu.

    report = pallas_prof.profile()          # every kernel this process lowered
    print(report.to_json(indent=1))

On a machine without an NVIDIA GPU the report says so and still carries the
static correlation (per-equation instruction weights from the PTX and SASS).
See schema.py for the report's fields.
"""
from __future__ import annotations

from .schema import (AnnotatedLine, Ceilings, DeviceInfo, EquationProfile, InsituStats,  # noqa: F401
                     KernelProfile, NcuResult, NvmlWindow, ProfileReport, Rates, RuntimeStats,
                     StaticProfile, ThrottleStats, TimingStats, WorkModel)


def profile(*args, **kwargs):
  """See pallas_prof.profiler.api.profile."""
  from .api import profile as _profile
  return _profile(*args, **kwargs)


def annotated_listing(ck, stage: str):
  """Lines of a compile stage paired with (equation, user file:line, weight)."""
  from .correlate import annotated_listing as _listing
  return _listing(ck, stage)


__all__ = ["profile", "annotated_listing", "ProfileReport", "KernelProfile", "StaticProfile",
           "EquationProfile", "WorkModel", "RuntimeStats", "NvmlWindow", "Rates", "Ceilings",
           "DeviceInfo", "InsituStats", "NcuResult", "AnnotatedLine", "TimingStats",
           "ThrottleStats"]
