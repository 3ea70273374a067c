"""pallas-prof's profiler: static IR correlation, replay timing, NVML, ceilings, CUPTI, ncu.

    report = pallas_prof.profile()          # every kernel this process lowered
    print(report.to_json(indent=1))

On a machine without an NVIDIA GPU the report says so and still carries the
static correlation (per-equation instruction weights from the PTX and SASS).
See schema.py for the report's fields.

Its rooms, in the order profile() (api.py) runs them:

    static/     the compiled code read without a GPU: correlation, work model
    timing/     replay on the GPU, NVML, ceilings; in-situ runtimes (CUPTI)
    sampling/   PC samples and ncu counters -> the Attribution (where the time goes)
    probes/     the probed variant replayed -> cycles per region

At the top, shared by every room: schema.py, attribution_schema.py and probe_schema.py (the
report's types), driver.py (the CUDA driver), launchspec.py (what a launch needs). A room
imports those, never api.py; static/ and timing/ import no other room; sampling/ and
probes/ import static/ and timing/, not each other (tests/test_structure.py holds it).
"""
from __future__ import annotations

from .schema import (AnnotatedLine, Ceilings, DeviceInfo, EquationProfile, InsituStats,  # noqa: F401
                     KernelProfile, NcuResult, NvmlWindow, ProfileReport, Rates, RuntimeStats,
                     StaticProfile, ThrottleStats, TimingStats, WorkModel)


def __getattr__(name: str):
  # profile() loads on first use (PEP 562): api.py imports every room, which the readers of
  # a saved report (schema.py) do not need; given as it is, so help() shows its parameters
  if name == "profile":
    # lazy: at the top it would load numpy whenever this module is imported
    from .api import profile
    return profile
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def annotated_listing(ck, stage: str):
  """Lines of a compile stage paired with (equation, user file:line, weight)."""
  # lazy: breaks the circle: profiler.static.correlate imports this module
  from .static.correlate import annotated_listing as _listing
  return _listing(ck, stage)


__all__ = ["profile", "annotated_listing", "ProfileReport", "KernelProfile", "StaticProfile",
           "EquationProfile", "WorkModel", "RuntimeStats", "NvmlWindow", "Rates", "Ceilings",
           "DeviceInfo", "InsituStats", "NcuResult", "AnnotatedLine", "TimingStats",
           "ThrottleStats"]
