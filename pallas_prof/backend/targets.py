"""A GPU a kernel compiles for: NVIDIA's by compute capability, AMD's by gfx name.

Target("cuda", 90) is sm_90 and Target("hip", "gfx942") an MI300X. A Target is a
tuple (backend, arch), so the ("cuda", 90) pairs kept in caches, run directories and
tuning files compare equal to it and read back as one (as_target). The warp size
follows from the arch as Triton's backends decide it: 32 on NVIDIA, 64 on AMD's
CDNA parts (gfx9), 32 on RDNA (gfx10 and later), which also sets how many threads
num_warps stands for. Nothing here imports Triton.
"""
from __future__ import annotations

import difflib
import re
from typing import NamedTuple, Union

# the binary each backend's compile ends in, and the stages before it, in order
CUDA_STAGES = ("ttir", "ttgir", "llir", "ptx", "cubin")
HIP_STAGES = ("ttir", "ttgir", "llir", "amdgcn", "hsaco")

# the targets pallas-prof names and compiles for (bench/targets/matrix.py compiles each
# on a CPU machine); a well-formed name outside these is refused with this list
KNOWN_CUDA = (75, 80, 86, 87, 89, 90, 100, 103, 120)
KNOWN_HIP = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1200", "gfx1201")


class UnknownTarget(ValueError):
  """Text that names no GPU pallas-prof compiles for."""


class Target(NamedTuple):
  backend: str            # "cuda" or "hip", Triton's names for the two
  arch: Union[int, str]   # a compute capability (90) or a gfx name ("gfx942")

  @property
  def warp_size(self) -> int:
    if self.backend == "cuda":
      return 32
    return 64 if _gfx_major(str(self.arch)) < 10 else 32

  @property
  def name(self) -> str:
    """As people write it: "sm_90", "gfx942"."""
    return f"sm_{self.arch}" if self.backend == "cuda" else str(self.arch)

  @property
  def text(self) -> str:
    """As reports, spans and cache keys write it: "cuda:90", "hip:gfx942"."""
    return f"{self.backend}:{self.arch}"

  @property
  def stages(self) -> tuple[str, ...]:
    return CUDA_STAGES if self.backend == "cuda" else HIP_STAGES

  @property
  def assembly_stage(self) -> str:
    """The text stage the binary is assembled from ("ptx", "amdgcn")."""
    return self.stages[-2]

  @property
  def binary_stage(self) -> str:
    """The binary stage ("cubin", "hsaco")."""
    return self.stages[-1]

  def triton(self) -> tuple[str, Union[int, str], int]:
    """GPUTarget's three fields (backend, arch, warp_size), as plain data for the worker."""
    return (self.backend, self.arch, self.warp_size)


def _gfx_major(arch: str) -> int:
  """gfx942 -> 9, gfx1100 -> 11: the digits less the last two (minor, stepping)."""
  digits = arch[3:]
  return int(digits[:-2], 16) if len(digits) > 2 else 0


KNOWN = tuple(Target("cuda", a) for a in KNOWN_CUDA) + tuple(Target("hip", a) for a in KNOWN_HIP)

_CUDA_FORMS = re.compile(r"^(?:sm_?|cuda:|compute_)(\d{2,3})a?$")
_HIP_FORMS = re.compile(r"^(?:hip:|rocm:)?(gfx[0-9a-f]{3,4})$")


def parse_target(text: str) -> Target:
  """A target from what a user writes: "sm_80", "sm80", "cuda:80", "gfx942",
  "hip:gfx942" (any case). UnknownTarget names the known ones, and the nearest
  one to a typo."""
  cleaned = str(text).strip().lower()
  cuda = _CUDA_FORMS.match(cleaned)
  hip = _HIP_FORMS.match(cleaned)
  target = Target("cuda", int(cuda.group(1))) if cuda else \
      Target("hip", hip.group(1)) if hip else None
  if target is not None and target in KNOWN:
    return target
  raise UnknownTarget(_unknown_message(str(text), target))


def _unknown_message(text: str, parsed: Target | None) -> str:
  names = [t.name for t in KNOWN]
  near = _nearest(parsed.name if parsed else text.strip().lower(), names)
  what = "is not a GPU target pallas-prof compiles for" if parsed else \
      "is not a GPU target (write sm_80, cuda:80, gfx942 or hip:gfx942)"
  guess = f"; did you mean {near[0]}?" if near else ""
  return f"{text!r} {what}{guess} Known targets: {', '.join(names)}."


def _nearest(text: str, names: list[str]) -> list[str]:
  """The known name most like `text` (the first in the list of those alike: sm_81 and
  sm_8O are nearest sm_80, not sm_89), if any is much like it."""
  scores = [difflib.SequenceMatcher(None, text, n).ratio() for n in names]
  best = max(scores)
  return [names[scores.index(best)]] if best >= 0.6 else []


def as_target(value) -> Target:
  """A Target from a Target, a ("cuda", 90) pair (a saved one may be a list, its arch
  a string), Triton's GPUTarget, or text (parse_target)."""
  if isinstance(value, Target):
    return value
  if isinstance(value, str):
    return parse_target(value)
  if hasattr(value, "backend") and hasattr(value, "arch"):   # Triton's GPUTarget
    value = (value.backend, value.arch)
  pair = tuple(value) if isinstance(value, (tuple, list)) else ()
  if len(pair) == 2 and pair[0] == "cuda" and isinstance(pair[1], (int, str)) and \
      str(pair[1]).isdigit():
    return Target("cuda", int(pair[1]))
  if len(pair) == 2 and pair[0] == "hip" and isinstance(pair[1], str) and \
      _HIP_FORMS.match(pair[1]):
    return Target("hip", pair[1])
  raise UnknownTarget(f"{value!r} is not a GPU target: pallas-prof compiles for "
                      f"('cuda', <compute capability>) or ('hip', '<gfx name>')")


# what kernels compile for when no GPU names a target (CPU runs, the static figures);
# equal to the ("cuda", 90) pair it always was
DEFAULT_TARGET = Target("cuda", 90)


def target_text(target) -> str:
  """A compile target, ("cuda", 90), as reports, spans and cache keys write it: "cuda:90"
  ("hip:gfx942" for AMD's)."""
  return as_target(target).text


def saved_target(saved, where: str) -> Target:
  """compiled.json's target, ["cuda", 90] or ["hip", "gfx942"], as the Target it names."""
  shape_ok = isinstance(saved, list) and len(saved) == 2 and (
      (saved[0] == "cuda" and isinstance(saved[1], int) and not isinstance(saved[1], bool))
      or (saved[0] == "hip" and isinstance(saved[1], str)))
  try:
    if shape_ok:
      return as_target(saved)
  except UnknownTarget:
    pass
  raise ValueError(f"{where} is {saved!r} where a target like [\"cuda\", 90] or "
                   f"[\"hip\", \"gfx942\"] belongs")
