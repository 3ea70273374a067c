"""pallas-prof's span names and attribute keys, in one place (docs/tracing.md lists the spans).

In the style of OpenTelemetry's semantic-convention modules: a constant per
attribute key, a function per span name. Keys of OpenTelemetry's own
conventions (code.*) are used where they mean the same thing.

The backend sets a few keys itself through its hook (backend/hooks.py); knowing
nothing of instrument/, it takes them from pallas_prof/events.py, which defines
them (BACKEND_KEYS lists them) and this module re-exports; so are the keys of where a
run happened, which the saved-run readers (cli/summary.py) use without loading instrument/.
tests/instrument/test_conventions.py fails when a span carries a key that is
not declared here; tests/test_structure.py when a module of the package spells out a key
as a string instead of using its name from here (or events.py).
"""
from __future__ import annotations

# --- span names -----------------------------------------------------------------------------

def pallas_call(kernel: str) -> str:
  """One kernel's lowering."""
  return f"pallas_call {kernel}"


def lower(primitive: str) -> str:
  """One equation's lowering rule."""
  return f"lower {primitive}"


def compile_kernel(kernel: str) -> str:
  """One kernel's compile, parent of its stages."""
  return f"compile {kernel}"


def compile_stage(stage: str) -> str:
  """One Triton stage: ttir, ttgir, llir, ptx, cubin."""
  return f"compile {stage}"


COMPILE_WAIT = "compile wait"        # the compile waited for the compile worker


def profile(kernel: str) -> str:
  """The profiler's figures for one kernel."""
  return f"profile {kernel}"


def tune(kernel: str) -> str:
  """One kernel's (or tuned function's) tuning, or its cached choice."""
  return f"tune {kernel}"


def tune_candidate(kernel: str, label: str) -> str:
  """One candidate of a tuning: its outputs checked, then timed."""
  return f"tune {kernel} {label}"


def advise(kernel: str) -> str:
  """The advice for one kernel: its diagnoses and ranked actions (measured where tried)."""
  return f"advise {kernel}"


def root(script: str | None = None) -> str:
  """The span around a traced region (`pallas-prof run` names the script)."""
  return f"pallas-prof {script}" if script else "pallas-prof"


SPAN_PREFIXES = ("pallas_call ", "lower ", "compile ", "profile ", "tune ", "advise ",
                 "pallas-prof")

# --- attributes: the kernel -------------------------------------------------------------------

# the keys the backend sets itself (pallas_prof/events.py defines them: backend/ cannot
# import this module)
from ..events import (BACKEND_KEYS, PALLAS_GENERATED_LINES, PALLAS_GRID,  # noqa: E402,F401
                      PALLAS_KERNEL, PALLAS_LOWERING_GC_MS, PALLAS_NUM_STAGES, PALLAS_NUM_WARPS,
                      PALLAS_SOURCE, PALLAS_SOURCE_KEY)
PALLAS_FAILED_EQN_INDEX = "pallas.failed_eqn_index"
PALLAS_LINK = "pallas.link"                      # on a span link: "lowering", "failing equation"
PALLAS_SCRIPT = "pallas.script"                  # root span of `pallas-prof run`
PALLAS_ARGV = "pallas.argv"

# --- attributes: the equation -----------------------------------------------------------------

JAXPR_EQN = "jaxpr.eqn"
JAXPR_EQN_INDEX = "jaxpr.eqn_index"
JAXPR_EQN_PATH = "jaxpr.eqn_path"
JAXPR_PRIMITIVE = "jaxpr.primitive"
JAXPR_IN_AVALS = "jaxpr.in_avals"
JAXPR_OUT_AVALS = "jaxpr.out_avals"
JAXPR_REGION = "jaxpr.region"
JAXPR_PARENT_EQN_INDEX = "jaxpr.parent_eqn_index"
CODE_FILEPATH = "code.filepath"                  # OpenTelemetry's code.* conventions
CODE_LINENO = "code.lineno"
CODE_FUNCTION = "code.function"

# --- attributes: the compile ------------------------------------------------------------------

TRITON_TARGET = "triton.target"
TRITON_CACHE = "triton.cache"
TRITON_COMPILE_KEY = "triton.compile_key"
TRITON_STAGES = "triton.stages"
TRITON_STAGE = "triton.stage"
TRITON_STAGE_BYTES = "triton.stage_bytes"
TRITON_DURATION_MS = "triton.duration_ms"
TRITON_LIBDEVICE_LINK = "triton.libdevice_link"
TRITON_SPILLS = "triton.spills"
# a failed compile, read (backend/compiling/failures/compile_diagnostics.py), and the lowering
# that got around it
TRITON_FAILED_PASS = "triton.failed_pass"
TRITON_ASSERTION = "triton.assertion"
PALLAS_COMPILE_FAULT = "pallas.compile.fault"            # triton | kernel | pallas-prof
PALLAS_COMPILE_FAILED_OP = "pallas.compile.failed_op"    # the kind of op that failed: tt.scan
PALLAS_COMPILE_FAILED_EQNS = "pallas.compile.failed_eqn_indices"   # every equation it points at
PALLAS_COMPILE_REPRODUCER = "pallas.compile.reproducer"  # the script that reproduces it
PALLAS_WORKAROUNDS = "pallas.workarounds"    # what was lowered otherwise (Triton failed on it)
COMPILE_WAIT_KEYS = {"worker_queue_ms": "pallas.compile.worker_queue_ms",
                     "worker_startup_ms": "pallas.compile.worker_startup_ms"}
# CompiledKernel.resources() -> attribute
RESOURCES = {
    "shared_bytes": "triton.shared_bytes", "registers": "triton.registers",
    "spill_stores": "triton.spill_stores", "spill_loads": "triton.spill_loads",
    "stack_bytes": "triton.stack_bytes", "num_warps": "triton.num_warps",
    "num_stages": "triton.num_stages", "target": "triton.target",
}

# --- attributes: tuning ----------------------------------------------------------------------

TUNE_KIND = "pallas.tune.kind"                   # "params" (warps, stages) or "blocks" (autotune)
TUNE_DEFAULT = "pallas.tune.default"             # the default config, as a label ("4w 3s")
TUNE_BEST = "pallas.tune.best"                   # the config chosen
TUNE_FROM_CACHE = "pallas.tune.from_cache"
TUNE_SPEEDUP = "pallas.tune.speedup"             # default's time / best's time
TUNE_CANDIDATES = "pallas.tune.candidates"       # how many were tried
TUNE_CLOCK = "pallas.tune.clock"                 # what timed them: "gpu" (CUPTI), "wall", "replay"
TUNE_CONFIG = "pallas.tune.config"               # a candidate's config, as a label
TUNE_MEDIAN_US = "pallas.tune.median_us"         # a candidate's median time
TUNE_COMPILE_MS = "pallas.tune.compile_ms"       # a candidate's compile (in parallel with others)
TUNE_CHOSEN = "pallas.tune.chosen"
TUNE_ERROR = "pallas.tune.error"                 # why a candidate was dropped

# --- attributes: the advice (pallas_prof/advice) ------------------------------------------------

ADVICE_SUMMARY = "pallas.advice.summary"         # one line: the top diagnosis and action
ADVICE_AT_ROOF = "pallas.advice.at_roof"         # at its roofline bound: no advice
ADVICE_DIAGNOSES = "pallas.advice.diagnoses"     # each diagnosis in words, with its line
ADVICE_TOP_ACTION = "pallas.advice.top_action"   # the best-ranked action's title
ADVICE_TOP_KIND = "pallas.advice.top_kind"       # a, b, c or d (advice/schema.py KINDS)
ADVICE_SAVING_PCT = "pallas.advice.saving_pct"   # its measured saving (tried on the GPU)
ADVICE_ESTIMATE_PCT = "pallas.advice.estimate_pct"   # else the work model's estimate
ADVICE_OUTPUTS_EQUAL = "pallas.advice.outputs_equal"
ADVICE_MEASURED = "pallas.advice.measured"       # "measured" or "not measured: <why>"

# --- attributes: the profile ------------------------------------------------------------------

PROFILE_PREFIX = "profile."          # + a RuntimeStats headline or a Rates field
NVML_PREFIX = "nvml."                # + an NvmlWindow field
PROFILE_RUNTIME = ("median_s", "p10_s", "p90_s", "min_s", "launches", "mode")
PROFILE_SUSTAINED_MEDIAN_S = "profile.sustained_median_s"
PROFILE_VERDICT = "profile.verdict"
# + flops, bytes, transcendentals, exact: the work model's cost of one launch (XProf's roofline
# takes no cost for a Triton custom call: in a profile, pallas-prof's plane carries it)
PROFILE_WORK_PREFIX = "profile.work."
PROFILE_WORK = ("flops", "bytes", "transcendentals", "exact")
PROFILE_WEIGHT_BASIS = "profile.weight_basis"
PROFILE_WEIGHTS = "profile.weights"  # the attribution's description (what the weights are)
PROFILE_HOT_EQUATIONS = "profile.hot_equations"
PROFILE_PROBES = "profile.probes"    # with --probes: each region's share of the probed cycles
PROFILE_PROBES_DISTORTION_PCT = "profile.probes.distortion_pct"
PALLAS_DEVICE = "pallas.device"      # "index: name" of the GPU profiled on

# --- attributes: the process (resource attributes; the JAX process also on each span once
# jax.distributed is up, since tracing may start before it) -------------------------------

PALLAS_PROF_VERSION = "pallas_prof.version"
# process.pid, host.name and the JAX process are also report.json's "origin" (events.py)
from ..events import (HOST_NAME, JAX_PROCESS_COUNT, JAX_PROCESS_INDEX,  # noqa: E402,F401
                      PROCESS_PID)
SERVICE_NAME = "service.name"                    # OpenTelemetry's resource conventions

# --- the keys of the files made of the spans ------------------------------------------------

# trace.perfetto.json: an ERROR span's status, beside its attributes in the slice's args
OTEL_STATUS = "otel.status"
OTEL_STATUS_DESCRIPTION = "otel.status_description"
# the XPlane's equation line (xplane.py): the op of the launch, and a region's share of it
PALLAS_HLO_OP = "pallas.hlo_op"
PALLAS_SHARE = "pallas.share"



def declared(key: str) -> bool:
  """Whether an attribute key is one of pallas-prof's conventions."""
  if key.startswith((PROFILE_PREFIX, NVML_PREFIX)):
    return True
  return key in _DECLARED


_DECLARED = frozenset(v for k, v in globals().items()
                      if k.isupper() and isinstance(v, str) and "." in v) \
    | frozenset(RESOURCES.values()) | frozenset(COMPILE_WAIT_KEYS.values()) | BACKEND_KEYS
