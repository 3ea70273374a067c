"""A 16-bit float scan in the order a GPU sums it, for the fuzzer's reference.

A cumsum or cumprod of float16 rounds after every step, so its result depends on the
order of the steps (pallas-prof scans bfloat16 in float32, rounding once; the order
there is emulated too, and matches only where it makes no difference). XLA's CPU (the
fuzzer's reference) cuts a long axis into windows of XLA_CPU_WINDOW elements, sums each
element's window from that element outward, then adds the scan of the windows' totals
(xla_cpu_scan). Triton's interpreter (pallas-prof on the CPU) steps through the axis one
element after another from the scan's start (interpreter_scan). Triton's scan on the GPU
combines lanes as a warp does: in segments of 32 lanes, each lane takes the lane 1, 2, 4,
8 and 16 before it (Hillis and Steele), then each segment takes the total of the segments
before it. All three orders are right. Through an ill-conditioned step after the scan (sin
of a value in the tens, a clip and a product over 33 elements, the square of a double
cumsum that cancels), their last-bit differences become differences a tolerance cannot
take.

The H200 fuzz run of 2026-12-03 at d875290 (seed 20261218) found two such programs, and
this order reproduced the GPU's numbers bit for bit: float16[5, 1] `cumsum` then
`sin(v @ v.T)` (v = [1.096, -0.746, -4.42, -8.28, -5.78] on the GPU, -4.418 and -5.773
one element at a time), and float16[33] `cumsum(reverse)`, clip, `cumprod(reverse)`
(1.063 where XLA gives 1.097).

    warp_scan(x, axis, reverse, "add" | "mul")   the scan in that order, in x's dtype
    namespace_with_warp_scans(scope)              the fuzzer's namespace with jnp's and
                                                  lax's cumsum and cumprod in that order
    interpreter_scan(x, axis, reverse, op)        the scan as Triton's interpreter runs
                                                  pallas-prof's kernel on the CPU
    namespace_with_scans(scope, scan)             the namespace with any of these
    xla_cpu_scan(x, axis, reverse, op)            the reference's own order (numpy), to
                                                  explain a difference, not to excuse one

The CPU fuzz at 6bd886f (seed 20261225) found a float16 double reverse cumsum over 64
rows, clipped and squared, at 242.2 where XLA gave 248.2 (the program in float64 gives
232.9): interpreter_scan gives pallas-prof's output and xla_cpu_scan XLA's, each bit
for bit (tests/fuzz/test_interpreter_scan_order.py).

The reference with these is run op by op (not jitted), so every step rounds to the
dtype as the GPU's does.

float32 scans follow the kernel's own layouts. A layout fixes the order: how many
consecutive elements of the axis a thread holds and how many lanes of a warp lie along
it (chunk_scan). scan_layouts reads them off the kernel's TTGIR, compiled as the GPU
compiles it. With them, and exp and sin rounded from float64 (testkit/fuzz/rounded.py),
the H200's float32 findings of seeds 20261222 and 20261223 come out: cumsums into sin or
cos of values in the thousands. All five printed numbers of the first, and four of the
five of the second, are reproduced (tests/fuzz/test_scan_order.py).

    chunk_scan(x, axis, reverse, op, per_thread, lanes)   the scan in that order
    scan_layouts(ttgir)                                  a kernel's scans and layouts
    namespace_with_triton_scans(scope, layouts)          jnp's and lax's cumsum and
                                                         cumprod in those orders
"""
from __future__ import annotations

import dataclasses
import re

import jax.numpy as jnp
import numpy as np
from jax import lax

from .proxy import ModuleProxy

LANES = 32
LOW_FLOATS = (jnp.float16, jnp.bfloat16)


def warp_scan(x, axis: int = 0, reverse: bool = False, op: str = "add", lanes: int = LANES):
  """A 16-bit scan in a warp's order (one element a lane; other dtypes: XLA's own)."""
  x = jnp.asarray(x)
  if x.dtype not in LOW_FLOATS:
    return (lax.cumsum if op == "add" else lax.cumprod)(x, axis=axis, reverse=reverse)
  return chunk_scan(x, axis, reverse, op, 1, lanes)


def chunk_scan(x, axis: int = 0, reverse: bool = False, op: str = "add",
               per_thread: int = 1, lanes: int = LANES):
  """x's scan along `axis` in the order Triton's GPU code combines it (ScanOpToLLVM), for a
  layout that gives each thread `per_thread` consecutive elements of the axis and a warp
  `lanes` threads along it, in x's dtype, every step rounded:

  - each thread scans its own elements, one after another;
  - the lanes combine their threads' totals as Hillis and Steele (the lane 1, 2, 4, ...
    before), within chunks of per_thread * lanes elements (a warp's, or a repetition's);
  - each chunk takes the total of the chunks before it, one chunk after another;
  - a thread's other elements take the inclusive total of the lane before (with the
    chunk's carry) in front of their own prefix.
  """
  x = jnp.asarray(x)
  combine = jnp.add if op == "add" else jnp.multiply
  identity = 0 if op == "add" else 1
  x = jnp.moveaxis(x, axis, -1)
  n = x.shape[-1]
  chunk = per_thread * lanes
  m = -(-n // chunk) * chunk
  # the padded lanes hold the identity, after the elements, as the kernel's block does
  x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, m - n)], constant_values=identity)
  if reverse:
    x = jnp.flip(x, -1)
  lead = x.shape[:-1]
  x = x.reshape(lead + (m // chunk, lanes, per_thread))
  own = [x[..., 0]]                       # each thread's inclusive prefixes, in order
  for j in range(1, per_thread):
    own.append(combine(own[-1], x[..., j]))
  totals = own[-1]                        # (..., chunks, lanes)
  step = 1
  while step < lanes:
    before = jnp.concatenate([jnp.full(totals.shape[:-1] + (step,), identity, totals.dtype),
                              totals[..., :-step]], axis=-1)
    totals = combine(before, totals)
    step *= 2
  # a chunk's carry: the last lane's terminal of the chunk before (its carry and total)
  terminals = [totals[..., 0, :]]
  for c in range(1, m // chunk):
    terminals.append(combine(terminals[-1][..., -1:], totals[..., c, :]))
  terminal = jnp.stack(terminals, axis=-2)            # (..., chunks, lanes)
  if per_thread == 1:
    out = terminal[..., None]
  else:
    # the lane before's terminal (for lane 0: the chunk's carry, none in the first chunk)
    carries = jnp.concatenate(
        [jnp.full(lead + (1, 1), identity, x.dtype),
         terminal[..., :-1, -1:]], axis=-2)
    before = jnp.concatenate([carries, terminal[..., :-1]], axis=-1)
    first = jnp.zeros(lanes, bool).at[0].set(True)
    first_chunk = jnp.zeros(m // chunk, bool).at[0].set(True)
    plain = first[None, :] & first_chunk[:, None]      # nothing before it to combine with
    parts = [jnp.where(plain, own[j], combine(before, own[j])) for j in range(per_thread - 1)]
    out = jnp.stack(parts + [terminal], axis=-1)
  out = out.reshape(lead + (m,))
  if reverse:
    out = jnp.flip(out, -1)
  return jnp.moveaxis(out[..., :n], -1, axis)


def namespace_with_scans(scope: dict, scan) -> dict:
  """The fuzzer's namespace with jnp's and lax's cumsum and cumprod as
  `scan(x, axis, reverse, "add" | "mul")` computes them."""
  def jnp_scan(op):
    def call(a, axis=None, dtype=None, out=None):
      a = jnp.asarray(a) if dtype is None else jnp.asarray(a).astype(dtype)
      if axis is None:
        a, axis = a.reshape(-1), 0
      return scan(a, axis, False, op)
    return call

  out = dict(scope)
  out["jnp"] = ModuleProxy(jnp, cumsum=jnp_scan("add"), cumprod=jnp_scan("mul"))
  out["lax"] = ModuleProxy(lax, cumsum=lambda x, axis=0, reverse=False: scan(x, axis, reverse, "add"),
                           cumprod=lambda x, axis=0, reverse=False: scan(x, axis, reverse, "mul"))
  return out


def namespace_with_warp_scans(scope: dict) -> dict:
  return namespace_with_scans(scope, warp_scan)


# --- the CPU's orders: Triton's interpreter (pallas-prof) and XLA (the reference) ---------

def interpreter_scan(x, axis: int = 0, reverse: bool = False, op: str = "add"):
  """x's scan as pallas-prof's kernel computes it on the CPU. Triton's interpreter runs a
  tl.cumsum or tl.cumprod as numpy's cumsum or cumprod (of the flipped axis, reversed):
  one element after another from the scan's start, every step rounded. It scans in the
  type pallas-prof's lowering gives the scan (backend/lowering/rules/reductions.py):
  float16 in float16, as XLA does; bfloat16 in float32, rounded once at the end (the
  interpreter has no bfloat16 arithmetic). The same order as chunk_scan's single thread
  that holds the whole axis."""
  x = jnp.asarray(x)
  if not jnp.issubdtype(x.dtype, jnp.floating) or x.shape[axis % x.ndim] == 0:
    return (lax.cumsum if op == "add" else lax.cumprod)(x, axis=axis, reverse=reverse)
  work = jnp.float32 if x.dtype == jnp.bfloat16 else x.dtype
  out = chunk_scan(x.astype(work), axis, reverse, op, x.shape[axis % x.ndim], 1)
  return out.astype(x.dtype)


# XLA's CPU compiler rewrites a long scan's reduce-window (ReduceWindowRewriter) into
# windows of this many elements and a scan of their totals, level over level
XLA_CPU_WINDOW = 16


def xla_cpu_scan(x, axis: int = 0, reverse: bool = False, op: str = "add",
                 window: int = XLA_CPU_WINDOW) -> np.ndarray:
  """x's scan as jitted XLA computes it on the CPU, in x's dtype, every step rounded:
  each output is a reduce-window of its own, summed from the identity and then from its
  own element outward (towards the axis's end for a reverse scan, from the window's
  start otherwise); an axis longer than `window` is cut into windows, each scanned so,
  and each window's outputs then take the scan of the other windows' totals (those
  before it, or after it for a reverse scan). For explaining a difference: the
  fuzzer's reference is XLA itself."""
  x = np.moveaxis(np.asarray(x), axis, -1)
  return np.moveaxis(_xla_cpu_scan_last(x, reverse, op, window), -1, axis)


def _reduce_windows(x: np.ndarray, reverse: bool, op: str) -> np.ndarray:
  n = x.shape[-1]
  out = np.empty_like(x)
  for i in range(n):
    acc = np.full(x.shape[:-1], 0 if op == "add" else 1, x.dtype)
    for k in (range(i, n) if reverse else range(i + 1)):
      acc = acc + x[..., k] if op == "add" else acc * x[..., k]
    out[..., i] = acc
  return out


def _xla_cpu_scan_last(x: np.ndarray, reverse: bool, op: str, window: int) -> np.ndarray:
  n = x.shape[-1]
  if n <= window:
    return _reduce_windows(x, reverse, op)
  lead, count = x.shape[:-1], -(-n // window)
  identity = np.full(lead + (count * window - n,), 0 if op == "add" else 1, x.dtype)
  inner = _reduce_windows(np.concatenate([x, identity], -1).reshape(lead + (count, window)),
                          reverse, op)
  totals = _xla_cpu_scan_last(inner[..., 0] if reverse else inner[..., -1], reverse, op, window)
  none = np.full(lead + (1,), 0 if op == "add" else 1, x.dtype)
  carry = np.concatenate([totals[..., 1:], none] if reverse else [none, totals[..., :-1]], -1)
  out = inner + carry[..., None] if op == "add" else inner * carry[..., None]
  return out.reshape(lead + (count * window,))[..., :n]


# --- the orders a compiled kernel uses ---------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ScanLayout:
  """One tt.scan of a kernel's TTGIR, with what fixes its order."""
  op: str                 # "add", "mul", or "other" (a max, an integer sum: order-free)
  axis: int
  reverse: bool
  shape: tuple[int, ...]
  dtype: str              # the element type it scans in ("f32", "f16", ...)
  per_thread: int         # consecutive elements of the axis a thread holds
  lanes: int              # a warp's threads along the axis that hold distinct elements

  def squeezed(self) -> tuple[tuple[int, ...], int]:
    """(shape without size-1 axes, the axis's place there): pallas-prof's workaround
    scans a [16, 1] block as [16] (compiling/failures/workarounds.py)."""
    kept = [d for d, size in enumerate(self.shape) if size != 1 or d == self.axis]
    return tuple(self.shape[d] for d in kept), kept.index(self.axis)


_ATTR = re.compile(r"^(#[\w.]+) = (#ttg\.\w+<\{.*\}>)\s*$", re.M)
_LIST = r"\[([\d, ]*)\]"
_SCAN = re.compile(r'"tt\.scan"\(([^)]*)\) <\{axis = (\d+) : i32, reverse = (true|false)\}>')
_TYPE = re.compile(r"^\s*\}\) : \(tensor<([\dx]+)x(\w+), (#[\w.]+(?:<\{[^}]*\}>)?)>")


def _ints(text: str, key: str) -> list[int] | None:
  m = re.search(key + r" = " + _LIST, text)
  return [int(v) for v in m.group(1).split(",")] if m and m.group(1).strip() else None


def _blocked(layout: str, aliases: dict[str, str]) -> tuple[list[int], list[int]] | None:
  """(sizePerThread, threadsPerWarp) of a blocked layout or a slice of one; None else."""
  layout = aliases.get(layout, layout)
  if layout.startswith("#ttg.blocked"):
    spt, tpw = _ints(layout, "sizePerThread"), _ints(layout, "threadsPerWarp")
    return (spt, tpw) if spt and tpw else None
  m = re.match(r"#ttg\.slice<\{dim = (\d+), parent = (#[\w.]+)\}>", layout)
  if m:
    parent = _blocked(m.group(2), aliases)
    if parent is None:
      return None
    dim = int(m.group(1))
    return tuple([v for d, v in enumerate(values) if d != dim] for values in parent)
  return None


def scan_layouts(ttgir: str) -> list[ScanLayout] | None:
  """The kernel's scans in the order they appear; None where a scan's layout is not a
  blocked one (or a slice of one) this model knows."""
  aliases = {m.group(1): m.group(2) for m in _ATTR.finditer(ttgir)}
  out: list[ScanLayout] = []
  lines = ttgir.splitlines()
  i = 0
  while i < len(lines):
    m = _SCAN.search(lines[i])
    if not m:
      i += 1
      continue
    operands, axis, reverse = m.group(1), int(m.group(2)), m.group(3) == "true"
    region = []
    i += 1
    while i < len(lines) and not _TYPE.match(lines[i]):
      region.append(lines[i])
      i += 1
    if i == len(lines):
      return None
    t = _TYPE.match(lines[i])
    shape = tuple(int(v) for v in t.group(1).split("x"))
    body = "\n".join(region)
    op = ("add" if "arith.addf" in body else "mul" if "arith.mulf" in body else "other") \
        if "," not in operands else "other"
    layout = _blocked(t.group(3), aliases)
    if layout is None:
      if op != "other":
        return None
      out.append(ScanLayout(op, axis, reverse, shape, t.group(2), 1, 1))
      i += 1
      continue
    spt, tpw = layout
    per = min(spt[axis], shape[axis])
    lanes = max(1, min(tpw[axis], shape[axis] // per))
    out.append(ScanLayout(op, axis, reverse, shape, t.group(2), per, lanes))
    i += 1
  return out


class OrderUnknown(Exception):
  """The program's scans do not line up with the kernel's: no order to emulate."""


_SCAN_DTYPES = {"f32": jnp.float32, "f16": jnp.float16, "bf16": jnp.bfloat16}


def _pow2(n: int) -> int:
  return 1 << max(0, (n - 1).bit_length())


def triton_scans(layouts: list[ScanLayout]) -> dict:
  """jnp's and lax's cumsum and cumprod, each call taking the next add or mul scan of
  the kernel (the order pallas-prof lowered them in) and summing in its order and in the
  type it scans in (a 16-bit scan pallas-prof accumulates in float32 rounds once)."""
  queue = [layout for layout in layouts if layout.op != "other"]

  def scan(x, axis, reverse, op):
    x = jnp.asarray(x)
    plain = lax.cumsum if op == "add" else lax.cumprod
    if not jnp.issubdtype(x.dtype, jnp.floating):
      return plain(x, axis=axis, reverse=reverse)
    if not queue:
      raise OrderUnknown("more scans in the program than in its kernel")
    layout = queue.pop(0)
    axis = axis % x.ndim
    kept = [d for d, size in enumerate(x.shape) if size != 1 or d == axis]
    wanted = (tuple(_pow2(x.shape[d]) for d in kept), kept.index(axis))
    if layout.op != op or layout.squeezed() != wanted or layout.reverse != reverse:
      raise OrderUnknown(f"the program's {op} scan of {x.shape} along {axis} meets the "
                         f"kernel's {layout}")
    work = _SCAN_DTYPES.get(layout.dtype, x.dtype)
    out = chunk_scan(x.astype(work), axis, reverse, op, layout.per_thread, layout.lanes)
    return out.astype(x.dtype)

  def jnp_scan(op):
    def call(a, axis=None, dtype=None, out=None):
      a = jnp.asarray(a) if dtype is None else jnp.asarray(a).astype(dtype)
      if axis is None:
        a, axis = a.reshape(-1), 0
      return scan(a, axis, False, op)
    return call

  return {"jnp.cumsum": jnp_scan("add"), "jnp.cumprod": jnp_scan("mul"),
          "lax.cumsum": lambda x, axis=0, reverse=False: scan(x, axis, reverse, "add"),
          "lax.cumprod": lambda x, axis=0, reverse=False: scan(x, axis, reverse, "mul")}


def namespace_with_triton_scans(scope: dict, layouts: list[ScanLayout]) -> dict:
  """The fuzzer's namespace with jnp's and lax's cumsum and cumprod in the kernel's orders
  (triton_scans)."""
  scans = triton_scans(layouts)
  out = dict(scope)
  out["jnp"] = ModuleProxy(jnp, cumsum=scans["jnp.cumsum"], cumprod=scans["jnp.cumprod"])
  out["lax"] = ModuleProxy(lax, cumsum=scans["lax.cumsum"], cumprod=scans["lax.cumprod"])
  return out
