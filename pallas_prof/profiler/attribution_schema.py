"""Where a kernel's time goes (report.json: kernels[i].attribution, and ncu.attribution),
as types: the equations and user lines it is charged to, the stall reasons, the memory
waits charged to the loads that caused them, and how the PC samples were taken.

Made by sampling/attribution.py (from CUPTI's PC samples, ncu's source counters or, with
no GPU, the static instruction shares); read back from report.json by type
(pallas_prof/serial.py decodes by these annotations). The rest of the report is
schema.py's.
"""
from __future__ import annotations

import dataclasses

from ..serial import Record


@dataclasses.dataclass
class StallShare(Record):
  """Samples of one stall reason (CUPTI's name without its prefix, e.g.
  "long_scoreboard"), and what it means to a kernel author."""
  reason: str
  words: str                    # "waiting for global memory"
  samples: float
  share: float                  # of the samples it is counted among (0..1)


@dataclasses.dataclass
class WaitCharge(Record):
  """Memory waits seen at a consumer's instructions, charged to the load whose
  value it waited for (attribution.py: the register the consumer reads, back to
  the load that wrote it)."""
  consumer: int | None          # the equation that first used the loaded value
  consumer_primitive: str | None
  consumer_line: int | None     # the user's line of that equation
  reason: str                   # long_scoreboard, short_scoreboard
  words: str
  samples: float


@dataclasses.dataclass
class EquationWeight(Record):
  """One equation's share of the kernel's time (measured) or instructions (static).
  samples: at its own instructions (exclusive); inclusive_samples: with every
  equation nested in it (a loop's or a conditional's body). weight = (samples -
  charged_out + charged_in - contended_out + contended_in) / total: memory waits move
  from the instruction that waited to the load that caused them, waits for an issue
  slot or a full pipe to the instructions that were issuing."""
  index: int
  primitive: str
  path: str
  parent: int | None
  user_file: str | None
  user_line: int | None
  samples: float
  inclusive_samples: float
  weight: float
  inclusive_weight: float
  share_at: float               # samples / total: where the warps stood, before charging
  charged_in: float = 0.0       # waits at consumers charged to this equation's loads
  charged_out: float = 0.0      # waits at this equation charged to loads elsewhere
  contended_in: float = 0.0     # issue-slot and pipe-queue waits of other equations' warps
  contended_out: float = 0.0    # ... of this equation's warps, charged to the issuers
  time_s: float | None = None   # weight x the replay's (unsampled) median
  inclusive_time_s: float | None = None
  # its stall reasons as its weight counts them: those at its instructions, less the
  # waits charged out, plus the waits charged in
  stalls: list[StallShare] = dataclasses.field(default_factory=list)
  waits: list[WaitCharge] = dataclasses.field(default_factory=list)    # charged to it


@dataclasses.dataclass
class LineWeight(Record):
  """One line of the user's kernel: the weights of its equations summed."""
  user_file: str
  user_line: int
  weight: float
  samples: float
  equations: list[int]
  top_stall: str | None         # words of the line's most frequent stall reason
  time_s: float | None = None
  # measured only: why the samples cannot rank this line against its neighbours (too few,
  # within the sampling noise, or CUPTI dropped more than tells them apart); None: ranked
  rank_note: str | None = None


@dataclasses.dataclass
class SamplingRun(Record):
  """How the PC samples were taken (a child process replaying the kernel)."""
  mechanism: str                # "CUPTI PC sampling API (libcupti via ctypes)"
  library: str                  # the libcupti loaded
  cupti_version: int | None
  period_cycles: int            # one sample per SM every this many cycles
  launches: int                 # sampled launches
  total_samples: int            # as CUPTI counted them
  dropped_samples: int
  other_function_samples: int   # samples of other kernels (none expected)
  unsampled_median_s: float | None   # the child's own launches before sampling started
  sampled_median_s: float | None     # and while sampling
  overhead_pct: float | None         # (sampled - unsampled) / unsampled x 100
  child_seconds: float               # wall time of the child process, start to exit
  # each sampling round (sampling_rounds.py: again at a longer period while CUPTI dropped
  # DROPPED_MAX or more): period_log2, launches, total_samples, dropped_samples; the last is this
  rounds: list[dict] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Attribution(Record):
  """Which equations and user lines cost the kernel's time.

  basis: "pc_sampling" (CUPTI PC sampling of a replay), "ncu" (Nsight Compute's
  source counters) or "static" (share of SASS instructions: no GPU, or sampling
  failed); description says so in words."""
  basis: str
  description: str
  unit: str                     # "samples" or "instructions"
  total: float
  unattributed: float           # samples/instructions on no equation (prologue, epilogue)
  equations: list[EquationWeight]   # heaviest first (by weight), zero weights left out
  lines: list[LineWeight]           # the user's lines, heaviest first
  stalls: list[StallShare] = dataclasses.field(default_factory=list)   # whole kernel
  instructions: list[list] = dataclasses.field(default_factory=list)
  # measured only: [SASS address, samples, top reason] per sampled instruction
  sampling: SamplingRun | None = None
  replay_median_s: float | None = None
  notes: list[str] = dataclasses.field(default_factory=list)

  def equation(self, index: int) -> EquationWeight | None:
    return next((e for e in self.equations if e.index == index), None)

