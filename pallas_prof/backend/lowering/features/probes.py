"""Probes: the profiling variant of a kernel that timestamps its top-level equations.

`lower_kernel(..., probes=True)` (or a ProbeOptions) emits, besides the usual
code, one more pointer parameter (PARAM, a uint64 buffer the profiler's replay
allocates) and a few lines at the kernel's entry, after its prologue, after
every top-level equation that generated code, and at its end. Only the
profiler's replay launches this variant; the user's program and the headline
runtime run the kernel lowered without probes, whose source does not change.

Why probes of our own and not Proton's instrumentation mode: Proton needs
Triton's own launcher and its own profile-scratch buffer (jaxlib's custom call
passes a null one); an instrumented launch took thousands of times the plain
one's wall time on the H200, and its buffer for a 65,536-program grid was
refused, over its size limit (bench/results/archive/comment_figures.md). Here a probe is a few PTX instructions
in `tl.inline_asm_elementwise` (the same code on every Triton the project
supports), the buffer is sized by sampling (at most options.MAX_PROGRAMS programs,
MAX_WARPS warps of each), and the launch is the replay's own cuLaunchKernel.

Per sampled (program, warp) one row of `row_words` uint64 words:

    [0] header: program id + 1 (low 32 bits; 0 = row never written), %smid (high 32)
    [1] %globaltimer (ns) at the program's entry   [2] %globaltimer at its end
    [3 + k] %clock64 (SM cycles) at boundary k: 0 at entry, k after region k

Rows are ordered by sampled program (`program // program_stride`), then by
sampled warp (`warp // warp_stride`). Region k's cycles are word 3+k minus
word 3+k-1. The globaltimer readings place the program on a shared clock (the
SMs' cycle counters are not synchronised) and give the ns per cycle.

Lane 0 of each sampled warp writes its row (one predicated store per probe);
every thread reads the clock. The asm is volatile (`is_pure=False`), so
LLVM keeps the probes in order with each other and with loads and stores; it
may still move pure arithmetic across them, and a probe reads the clock when
the warp issues it: a load's wait lands in the region of the instruction that
first uses the value. So a run of loads gets a region of its own only behind a
probe that first waits for their data (`wait_asm`: a never-taken store of each
loaded value, whose operands the warp must have before it reads the clock), and
only where that costs little: at most MAX_LIVE_VALUES loaded values per thread.
Bigger loads share a region with the top-level equation that first uses them
(ProbeEmitter.after_equation).
What is measured is what the probed code did; `distortion` in the profiler
says how far it is from the plain kernel.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

# the buffer's layout and what the options ask of it live with LoweringOptions (their records
# are held by the options and the GeneratedKernel, which may not import the lowering); the
# profiler and the tests still import them from here
from ...options import (HEADER_WORDS, PARAM, ProbeLayout, ProbeOptions,  # noqa: F401
                       ProbeRegion)
from .. import triton_names as tl

MAX_REGIONS = 64             # boundaries past this merge into the last region
# an equation whose result holds more values per thread than this joins the next region
# unless it is a load, store, dot, loop or conditional: a probe after it would keep the
# whole result live in registers across the probe, where the compilers would stream it
# element by element into what follows (a copy of 256 values per thread ran markedly slower
# with probes between its multiply, add and store on the H200); a quarter of the 255
# registers a thread can have
MAX_LIVE_VALUES = 64

# the kinds a region's label names (the primitive otherwise)
_KINDS = {"get": "load", "load": "load", "swap": "store", "store": "store",
          "masked_load": "load", "masked_swap": "store", "dot_general": "dot",
          "scan": "loop", "while": "loop", "cond": "conditional"}
# equations that only rename registers: no boundary after them (they join the next region)
_VIEWS = frozenset({"broadcast_in_dim", "reshape", "squeeze", "expand_dims"})


# --- the PTX of a probe ----------------------------------------------------------------------
# Each is one asm block of scalar operands (every thread runs it once); registers
# declared inside the braces are local to it. One line: the builder comments lines.

def _asm(*statements: str) -> str:
  return "{ " + " ".join(statements) + " }"


def row_address_asm(warp_stride: int) -> str:
  """$0 = this thread's row address if it writes one (lane 0 of a sampled warp of a
  sampled program), else 0. $1: the program's first row, $2: sampled (0/1), $3: row bytes."""
  return _asm(".reg .u32 %ppt<5>;", ".reg .u64 %ppd<2>;", ".reg .pred %ppp<3>;",
              "mov.u32 %ppt0, %tid.x;", "and.b32 %ppt1, %ppt0, 31;", "shr.u32 %ppt2, %ppt0, 5;",
              f"rem.u32 %ppt3, %ppt2, {warp_stride};", f"div.u32 %ppt4, %ppt2, {warp_stride};",
              "or.b32 %ppt1, %ppt1, %ppt3;", "setp.eq.u32 %ppp0, %ppt1, 0;",
              "setp.ne.u32 %ppp1, $2, 0;", "and.pred %ppp2, %ppp0, %ppp1;",
              "mul.wide.u32 %ppd0, %ppt4, $3;", "add.u64 %ppd1, $1, %ppd0;",
              "selp.b64 $0, %ppd1, 0, %ppp2;")


def start_asm() -> str:
  """Entry: header (with %smid), globaltimer, clock 0. $1: row address, $2: program + 1."""
  return _asm(".reg .pred %ppp;", ".reg .u64 %ppd<3>;", ".reg .u32 %pps;",
              "mov.u64 %ppd0, %globaltimer;", "mov.u64 %ppd1, %clock64;",
              "setp.ne.u64 %ppp, $1, 0;", "mov.u32 %pps, %smid;", "cvt.u64.u32 %ppd2, %pps;",
              "shl.b64 %ppd2, %ppd2, 32;", "or.b64 %ppd2, %ppd2, $2;",
              "@%ppp st.global.u64 [$1], %ppd2;", "@%ppp st.global.u64 [$1+8], %ppd0;",
              f"@%ppp st.global.u64 [$1+{8 * HEADER_WORDS}], %ppd1;", "mov.u32 $0, 0;")


def mark_asm(slot: int, end: bool = False) -> str:
  """Boundary `slot`: the clock (read first), and at the end the globaltimer too. $1: row."""
  parts = [".reg .pred %ppp;", ".reg .u64 %ppd<2>;", "mov.u64 %ppd0, %clock64;"]
  if end:
    parts.append("mov.u64 %ppd1, %globaltimer;")
  parts += ["setp.ne.u64 %ppp, $1, 0;",
            f"@%ppp st.global.u64 [$1+{8 * (HEADER_WORDS + slot)}], %ppd0;"]
  if end:
    parts.append("@%ppp st.global.u64 [$1+16], %ppd1;")
  return _asm(*parts, "mov.u32 $0, 0;")


# a bit pattern (a NaN's) the never-taken stores compare with: the store is taken only by
# a thread that writes a row, for a value of exactly this pattern, and then writes the
# clock word the boundary's own clock read overwrites next
_NEVER = {32: "0x7fc00123", 64: "0x7ff8000000000123"}


def wait_asm(slot: int, bits: int) -> str:
  """Consumes one loaded value ($1, `bits` wide) before boundary `slot`'s clock read: the
  compare needs the value, so the warp waits for the load here. $2: row address."""
  t = f"b{bits}"
  return _asm(".reg .pred %ppw<2>;", "setp.ne.u64 %ppw0, $2, 0;",
              f"setp.eq.and.{t} %ppw1, $1, {_NEVER[bits]}, %ppw0;",
              f"@%ppw1 st.global.{t} [$2+{8 * (HEADER_WORDS + slot)}], $1;", "mov.u32 $0, 0;")


def waited_operand(expr: str, dtype) -> tuple[str, int]:
  """(a Triton expression of the loaded value as a 32- or 64-bit integer, its bits)."""
  dtype = np.dtype(dtype)
  if dtype == np.bool_:
    return f"{expr}.to({tl.int32})", 32
  size = dtype.itemsize
  if size == 8:
    return f"{expr}.to({tl.int64}, bitcast=True)", 64
  if size == 4:
    return f"{expr}.to({tl.int32}, bitcast=True)", 32
  return f"{expr}.to({tl.signed_int(8 * size)}, bitcast=True).to({tl.int32})", 32


def _call(asm: str, constraints: str, args: list[str], dtype: str, pure: bool) -> str:
  return (f'{tl.inline_asm_elementwise}("{asm}", "{constraints}", [{", ".join(args)}], '
          f"dtype={dtype}, is_pure={pure}, pack=1)")


# --- emission ---------------------------------------------------------------------------------

def _per_thread(value, num_warps: int) -> float:
  return math.prod(getattr(value, "padded", ()) or (1,)) / (32 * num_warps)


def plan(options: ProbeOptions, programs: int, num_warps: int) -> tuple[int, int]:
  """(program_stride, warp_stride): every stride-th one is sampled (at least 1: a grid
  of no programs samples none, and a stride of 0 would divide by zero)."""
  return max(1, -(-programs // options.max_programs)), max(1, -(-num_warps // options.max_warps))


class ProbeEmitter:
  """Emits the probes of one kernel as it is lowered; `layout()` says what it emitted."""

  def __init__(self, options: ProbeOptions, num_warps: int, top_level_eqns: int):
    self.options = options
    self.num_warps = num_warps
    # boundary 0 is the entry, then one per region: the prologue, each top-level
    # equation that generates code, the end; at most MAX_REGIONS regions
    self.capacity = min(top_level_eqns + 2, MAX_REGIONS)
    self.param = PARAM
    self.regions: list[ProbeRegion] = []
    self._carry: list[Any] = []          # equations since the last boundary
    # the values of the loads in the carry, to wait for before their own boundary;
    # None once a load too big to wait for joined it (the run then shares a region
    # with its first use)
    self._waits: list[Any] | None = []
    # the carry holds work that joined the next region (an elementwise result too big to
    # keep live across a probe): a run of loads after it shares that region, unwaited
    self._carry_work = False
    self.programs = 1
    self.program_stride = self.warp_stride = 1
    self._row = ""

  @property
  def row_words(self) -> int:
    return HEADER_WORDS + 1 + self.capacity

  def add_param(self, b) -> None:
    self.param = b.add_param(PARAM)

  def start(self, b, launch_grid: tuple[int, int, int]) -> None:
    """The entry: which row this thread writes (if any), then the header and clock 0."""
    gx, gy, _ = launch_grid
    self.programs = gx * gy * launch_grid[2]
    self.program_stride, self.warp_stride = plan(self.options, self.programs, self.num_warps)
    sampled_warps = -(-self.num_warps // self.warp_stride)
    with b.note("probe: this program's row in the probe buffer"):
      pid = b.assign("pp_program", f"{tl.program_id}(0) + {gx} * ({tl.program_id}(1) + {gy} * "
                     f"{tl.program_id}(2))")
      first_row = (f"({self.param} + ({pid} // {self.program_stride}) * "
                   f"{sampled_warps * self.row_words}).to({tl.int64})")
      sampled = f"({pid} % {self.program_stride} == 0).to({tl.int32})"
      self._row = b.assign("pp_row", _call(row_address_asm(self.warp_stride), "=l,l,r,r",
                                           [first_row, sampled, str(8 * self.row_words)],
                                           tl.int64, True))
    with b.note("probe: entry (sm id, global timer, clock)"):
      b.assign("pp_entry", _call(start_asm(), "=r,l,l", [self._row, f"({pid} + 1).to({tl.int64})"],
                                 tl.int32, False))

  def prologue_done(self, b) -> None:
    self._mark(b, ProbeRegion(slot=1, eqns=(), primitive="prologue", kind="prologue",
                              file=None, line=None))

  def before_equation(self, b, info, index_math: bool) -> None:
    """Before a top-level equation: where a run of loads ends (this equation is neither a
    load nor index math on scalars), the boundary that waits for their data, so the
    loads (issue and wait) are a region of their own."""
    if (not self._waits or _KINDS.get(info.primitive) == "load" or index_math
        or len(self.regions) + 1 >= self.capacity):
      return
    region = self._region(len(self.regions) + 1, self._carry, loads_only=True)
    with b.note(f"probe: wait for the data of {region.label}"):
      for value in self._waits:
        operand, bits = waited_operand(value.expr, value.dtype)
        b.assign("pp_wait", _call(wait_asm(region.slot, bits), f"=r,{'l' if bits == 64 else 'r'},l",
                                  [operand, self._row], tl.int32, False))
    self._mark(b, region)
    self._carry, self._waits, self._carry_work = [], [], False

  def after_equation(self, b, info, emitted: bool, scalar: bool = False,
                     values: int = 0, results: tuple = ()) -> None:
    """After a top-level equation: a boundary, if it generated code and is not one that
    goes with the equation after it: a view (a broadcast, a reshape), scalar arithmetic
    (program ids, index math), or a load (its boundary waits for its data and comes
    before the next equation that is not a load: `before_equation`; a load of more
    than MAX_LIVE_VALUES values per thread has none, and shares its first use's region,
    where its wait shows). Also an equation whose results hold more than
    MAX_LIVE_VALUES values per thread (`values`: their elements), unless it is a store,
    dot, loop or conditional. `scalar`: all its results are scalars; `results`: its
    Values."""
    if not emitted:
      return
    self._carry.append(info)
    kind = _KINDS.get(info.primitive)
    per_thread = values / (32 * self.num_warps)
    if kind == "load" and not scalar and self._waits is not None:
      loaded = [v for v in results if getattr(v, "shape", ())]
      # registers hold the padded block: count what Triton keeps live, not the elements
      held = sum(_per_thread(v, self.num_warps) for v in self._waits + loaded) \
          if loaded else per_thread
      small = held <= MAX_LIVE_VALUES and not self._carry_work
      self._waits = self._waits + loaded if small else None
    big = kind is None and not scalar and per_thread > MAX_LIVE_VALUES \
        and info.primitive not in _VIEWS
    joins_next = (info.primitive in _VIEWS or kind == "load"
                  or (kind is None and (scalar or per_thread > MAX_LIVE_VALUES)))
    if joins_next or len(self.regions) + 1 >= self.capacity:
      self._carry_work = self._carry_work or big
      return          # the last boundary is kept for the end
    self._mark(b, self._region(len(self.regions) + 1, self._carry))
    self._carry, self._waits, self._carry_work = [], [], False

  def end(self, b) -> None:
    slot = len(self.regions) + 1
    if self._carry:
      region = self._region(slot, self._carry)
    else:
      region = ProbeRegion(slot=slot, eqns=(), primitive="end", kind="epilogue", file=None,
                           line=None)
    self._mark(b, region, end=True)

  def _region(self, slot: int, infos: list, loads_only: bool = False) -> ProbeRegion:
    """A region of these equations, named after its last (the first where it is the
    last region, which collects what the limit cuts off, or where it holds a run of
    loads and their index math: named after the first load)."""
    if loads_only:
      main = next(i for i in infos if _KINDS.get(i.primitive) == "load")
    else:
      main = infos[-1] if len(self.regions) + 1 < self.capacity else infos[0]
    loads = () if loads_only else tuple(
        f"[{i.index}] {i.primitive}" + (f" @ {i.file.rsplit('/', 1)[-1]}:{i.line}"
                                        if i.file else "")
        for i in infos if i is not main and _KINDS.get(i.primitive) == "load")
    return ProbeRegion(slot=slot, eqns=tuple(i.index for i in infos), primitive=main.primitive,
                       kind=_KINDS.get(main.primitive, main.primitive), file=main.file,
                       line=main.line, main=main.index, loads=loads, waits=loads_only)

  def _mark(self, b, region: ProbeRegion, end: bool = False) -> None:
    self.regions.append(region)
    with b.note(f"probe: end of {region.label}"):
      b.assign("pp_mark", _call(mark_asm(region.slot, end), "=r,l", [self._row], tl.int32,
                                False))

  def layout(self) -> ProbeLayout:
    return ProbeLayout(regions=tuple(self.regions), programs=self.programs,
                       program_stride=self.program_stride, num_warps=self.num_warps,
                       warp_stride=self.warp_stride, row_words=self.row_words, param=self.param)
