"""A float32 dot whose B block is N-contiguous, given B stored K-major instead (kind e):
built, checked and timed, shown as a diff of the user's file.

On sm_90 a TF32 wgmma reads its 32-bit operands from shared memory K-major only, so the
B of a plain `a @ b` (a row-major (K, N) input, each block's rows N-contiguous) takes a
slower path. The variant is the same kernel given B transposed: the call passes `b.T`
(XLA's transpose, inside the timed call: what the user pays unless they keep B transposed,
as a weight can be), its BlockSpec's block shape and index map reversed, and every read of
the B ref in the kernel transposed back (`b_ref[i, j]` becomes `b_ref[j, i].T`), so the
kernel computes what it did, to the order of its float32 adds. The kernel is traced again
with a view of the new ref that does this (_KMajor): a kernel that uses its B ref other
than by indexing it (pl.load, `.at`) makes no variant, and says so.

Offered where the kernel's jaxpr shows it (find_operand): a float32 dot in TF32 whose
right operand is a 2-D input's block read straight from its ref and contracted on its
first axis, on sm_90 or newer, where the dots run far from their rate (or no GPU measured
it). The trial is split/trial.py's: whole calls, outputs compared to the tuner's
tolerance, timed as the autotuner times configs.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from ...backend import compat
from ...backend.compiling.compile import DEFAULT_TARGET, compile_kernels
from ..blockshape import _flat_specs, _with_absent, changed
from ..hardware import bandwidth
from ..loop_steps import rebound
from ..rules.dots import FAR_FROM_RATE, _rate_of, _tflops
from ..rules.table import Finding, about, fact
from ..schema import Action, Trial
from ..split.trial import fastest
from ..variants import PATCH, checked_on_cpu, interpreted_steps, not_interpreted, resources, \
    trace_variant
from .layout_source import SourceRefused, unified_diff
from .precision import _at_line, _kernel_jaxpr

RULE = "dot_layout"
MIN_CC = 90                  # wgmma's K-major rule for 32-bit operands: Hopper on
MAX_TILES = 3                # the dot's tile actions also tried with a K-major B
MAX_OPERANDS = 3             # the B inputs offered K-major one by one (and together)
# the primitives a kernel reads a ref's block with: indexing (`b_ref[x, y]`) and Triton's
# masked load (`plgpu.load(b_ref.at[x, y], mask=...)`, JAX's attention's reads)
READS = ("get", "masked_load", "load")
# what the K-major action keeps of the block change it was fastest at (dots/joint.py's
# tile, blockshape.py's block with the kernel keyword it rebinds)
TILE_KEYS = ("grid", "blocks", "num_warps", "num_stages", "tile", "from_tile", "axes", "axis",
             "from_block", "to_block", "rebind")


class NotApplicable(ValueError):
  """The call has no B this edit applies to; the message says why."""


# --- which operand ---------------------------------------------------------------------------

def _is_var(v) -> bool:
  return not hasattr(v, "val")        # a Literal has .val, a Var does not


def _inner_invars(eqn, sub) -> list:
  """The outer values a sub-jaxpr's invars stand for, position by position (None where
  unknown): a while body's (its cond's consts come first), every other's aligned at the end
  (a cond's index, a scan's nothing, a call's nothing comes first)."""
  outer = list(eqn.invars)
  if eqn.primitive.name == "while":
    body = compat.open_jaxpr(eqn.params["body_jaxpr"])[0]
    if sub is not body:
      return [None] * len(sub.invars)
    outer = outer[int(eqn.params["cond_nconsts"]):]
  if len(sub.invars) > len(outer):
    return [None] * len(sub.invars)
  return outer[len(outer) - len(sub.invars):]


def _dots_on_refs(jaxpr, refs: dict, found: list) -> None:
  """Appends (dot equation, input index or None, why) for every float32 dot_general, in the
  order the lowering meets them (each equation, then the jaxprs nested in it)."""
  made = {}
  for e in jaxpr.eqns:
    if e.primitive.name == "dot_general" and all(
        np.dtype(v.aval.dtype) == np.float32 for v in e.invars):
      (_, rc), (_, rb) = e.params["dimension_numbers"]
      rhs = e.invars[1]
      src = made.get(rhs) if _is_var(rhs) else None
      if len(rhs.aval.shape) != 2 or rb or tuple(rc) != (0,):
        found.append((e, None, "its B is already read K-major (contracted on its last axis)"))
      elif src is None or src.primitive.name not in READS or src.invars[0] not in refs:
        found.append((e, None, "its B is not read straight from an input's block"))
      else:
        found.append((e, refs[src.invars[0]], ""))
    for v in e.outvars:
      made[v] = e
    for sub in compat.sub_jaxprs(e):
      inner = {iv: refs[ov] for iv, ov in zip(sub.invars, _inner_invars(e, sub), strict=True)
               if ov is not None and _is_var(ov) and ov in refs}
      _dots_on_refs(sub, inner, found)


def dots_of(recipe) -> list:
  """(dot equation, input index or None, why) for each float32 dot of the kernel, in the
  lowering's order (_dots_on_refs), traced once for every question find_operand answers."""
  jaxpr, _ = _kernel_jaxpr(recipe)
  refs = {v: i for i, v in enumerate(jaxpr.invars[:len(recipe.arg_shapes)])}
  found: list = []
  _dots_on_refs(jaxpr, refs, found)
  return found


def find_operand(recipe, file: str | None = None, line: int | None = None,
                 dot: tuple[int, int] | None = None, dots: list | None = None) -> int:
  """The index among the call's arrays of the B this edit transposes: the input read as the
  right operand of the float32 dot `dot` ((k, n): the k-th of the kernel's n, in the
  lowering's order), else of the dots at file:line, where they read one input; NotApplicable
  (why) where there is none. `dots`: dots_of(recipe), where already at hand."""
  found = dots_of(recipe) if dots is None else dots
  if dot is not None and len(found) == dot[1]:
    # a kernel called from a library has every dot at the user's one line: the order of
    # its dots tells them apart (where the lowering met as many as the jaxpr holds)
    found = [found[dot[0]]]
  else:
    found = [x for x in found if _at_line(x[0], file, line)]
  if not found:
    raise NotApplicable("no float32 dot at its line")
  inputs = {i for _, i, _ in found if i is not None}
  if len(inputs) != 1:
    raise NotApplicable(found[0][2] if not inputs else "its dots read B from several inputs")
  (index,) = inputs
  aliases = dict(recipe.kwargs.get("input_output_aliases") or {})
  if index in aliases:
    raise NotApplicable("its B is aliased to an output")
  if "grid_spec" in recipe.kwargs:
    raise NotApplicable("the call gives a grid_spec (the edit rewrites in_specs)")
  block_axes(recipe, index)                 # NotApplicable where B's block is not a matrix
  return index


# --- the variant -----------------------------------------------------------------------------

def _two(idx) -> tuple:
  """A 2-D index as two entries: `...` and a lone first index filled with full slices."""
  idx = idx if isinstance(idx, tuple) else (idx,)
  if any(i is Ellipsis for i in idx):
    at = next(k for k, i in enumerate(idx) if i is Ellipsis)
    fill = (slice(None),) * (2 - len(idx) + 1)
    idx = idx[:at] + fill + idx[at + 1:]
  idx = idx + (slice(None),) * (2 - len(idx))
  if len(idx) != 2:
    raise TypeError(f"an index of {len(idx)} entries into a 2-D ref")
  return idx


class _KMajor:
  """The kernel's B ref as it was, (K, N), over the ref of B transposed, (N, K): reads
  transposed back, its shape reversed. Nothing else of a ref: a kernel that needs more
  makes no variant."""

  def __init__(self, ref):
    self._ref = ref

  @property
  def shape(self):
    return tuple(reversed(self._ref.shape))

  @property
  def dtype(self):
    return self._ref.dtype

  ndim = 2

  def __getitem__(self, idx):
    i, j = _two(idx)
    x = self._ref[j, i]
    return x.T if getattr(x, "ndim", 0) == 2 else x

  @property
  def at(self):
    return _At(self._ref)

  def __getattr__(self, name):
    raise TypeError(f"the kernel uses its B ref's .{name}: the K-major variant reads it by "
                    "indexing or Triton's load of `.at[...]` only")


class _At:
  """`b_ref.at` of a _KMajor: `b_ref.at[x, y]` is a _View that Triton's load reads."""

  def __init__(self, ref):
    self._ref = ref

  def __getitem__(self, idx):
    return _View(self._ref, _two(idx))


class _View:
  """B's block at (x, y) of the (K, N) ref the kernel sees: loaded (by _loads_of_views's
  load) as the transposed ref's (y, x), its mask and fill transposed to match, the value
  transposed back."""

  def __init__(self, ref, idx):
    self._ref, self._idx = ref, idx

  def load(self, load, mask=None, other=None, **kw):
    i, j = self._idx
    x = load(self._ref.at[j, i], mask=_transposed_mask(mask), other=_transposed_mask(other),
             **kw)
    return x.T if getattr(x, "ndim", 0) == 2 else x


def _transposed_mask(m):
  """A mask (or fill) for a (K, N) load, for the (N, K) load: a matrix (a (1, N) row
  broadcast along K too) transposed; a scalar as it is."""
  return m.T if getattr(m, "ndim", 0) == 2 else m


def _load_modules() -> list:
  """The modules a kernel calls Triton's load through: JAX's plgpu and pallas-prof's (its
  stand-in, `from pallas_prof import triton as plgpu`), where each imports."""
  import importlib  # lazy: the variant's trace has loaded jax, which these modules import
  out = []
  for name in ("jax.experimental.pallas.triton", "pallas_prof.triton"):
    try:
      out.append(importlib.import_module(name))
    except Exception:  # noqa: BLE001 - a JAX without that module: the other serves
      continue
  return out


@contextlib.contextmanager
def _loads_of_views():
  """Triton's load that reads a _View, while the variant's kernel is traced: the kernel
  calls it through its module (`plgpu.load(v_ref.at[...])`), so the module's function is
  the one to stand in for, and only for the trace."""
  saved = [(m, m.load) for m in _load_modules()]

  def loader(real):
    def load(ref, *args, **kw):
      if isinstance(ref, _View):
        return ref.load(real, *args, **kw)
      return real(ref, *args, **kw)
    return load
  for m, real in saved:
    m.load = loader(real)
  try:
    yield
  finally:
    for m, real in saved:
      m.load = real


def _squeezed(b) -> bool:
  """A block dimension the kernel's ref does not have: None (or pl.Squeezed, as newer JAX
  spells it)."""
  return b is None or type(b).__name__ == "Squeezed"


def block_axes(recipe, index: int) -> tuple[int, int]:
  """The two axes of argument `index` its kernel ref has, (K, N): a 2-D array's both, or
  an N-D array's two that its BlockSpec does not squeeze (attention's V, (batch, seq,
  heads, dim) in blocks (None, seq, None, dim)); NotApplicable where there are not two."""
  shape, _ = recipe.arg_shapes[index]
  spec = _flat_specs(recipe)[0][index]
  block = getattr(spec, "block_shape", None)
  if block is None:
    if len(shape) != 2:
      raise NotApplicable(f"its B is a {len(shape)}-D array read whole (the edit transposes "
                          "a matrix)")
    return 0, 1
  if getattr(spec, "index_map", None) is None:
    raise NotApplicable("its B's BlockSpec has no index map")
  kept = [i for i, b in enumerate(block) if not _squeezed(b)]
  if len(kept) != 2:
    raise NotApplicable(f"its B's block has {len(kept)} dimensions, not the 2 of a matrix")
  return kept[0], kept[1]


def _swapped(seq, axes: tuple[int, int]) -> tuple:
  out = list(seq)
  a, b = axes
  out[a], out[b] = out[b], out[a]
  return tuple(out)


def _transposed_spec(spec, axes: tuple[int, int] = (0, 1)):
  """B's spec for B with `axes` swapped: its block shape and index map's block indices."""
  if spec is None or getattr(spec, "block_shape", None) is None:
    return spec
  index_map = spec.index_map

  def transposed(*g):
    return _swapped(index_map(*g), axes)
  return dataclasses.replace(spec, block_shape=_swapped(spec.block_shape, axes),
                             index_map=transposed)


def _indices(index) -> tuple[int, ...]:
  return (int(index),) if isinstance(index, (int, np.integer)) else tuple(map(int, index))


def build(recipe, index):
  """The variant as a function of the original's arguments: B (argument `index`, or each of
  a sequence of them) passed with its block's two axes swapped (a matrix transposed), its
  spec likewise, the kernel reading it through _KMajor."""
  indices = _indices(index)
  axes = {i: block_axes(recipe, i) for i in indices}
  ins, outs = _flat_specs(recipe)
  ins = list(ins)
  for i in indices:
    ins[i] = _transposed_spec(ins[i], axes[i])
  kwargs = dict(recipe.kwargs, in_specs=_with_absent(recipe, ins))
  # the kernel's position of B: the call's arguments given as None (recipe.absent) count
  n = len(recipe.arg_shapes) + len(recipe.absent)
  present = [k for k in range(n) if k not in recipe.absent]
  positions = [present[i] for i in indices]

  def kernel(*refs):
    refs = list(refs)
    for p in positions:
      refs[p] = _KMajor(refs[p])
    with _loads_of_views():
      return recipe.kernel(*refs)
  call = recipe.original(kernel, recipe.out_shape, **kwargs)

  def variant(*args):
    args = list(args)
    for i in indices:
      args[i] = args[i].swapaxes(*axes[i])
    return call(*args)
  variant.call = call
  return variant


# --- the advice ------------------------------------------------------------------------------

def _far_from_rate(f) -> tuple[bool, str]:
  """(whether the dots are far from the TF32 rate, the evidence in words): measured where
  the kernel was timed; without a time, where the work model says the dots bound it (as
  rules/dots.py's dot_rate decides)."""
  w = f.work
  peak, basis = _rate_of(f, "tf32")
  if w is None or not w.dot_flops or not peak:
    return False, ""
  if f.median_s:
    rate = w.dot_flops / f.median_s
    return rate < FAR_FROM_RATE * peak, (f"{_tflops(rate)} = {100 * rate / peak:.0f} % of "
                                         f"{basis} ({_tflops(peak)})")
  bw = bandwidth(f.cc)
  intensity = w.dot_flops / w.bytes if w.bytes else None
  if not bw or intensity is None or intensity < peak / bw:
    return False, ""
  return True, (f"not measured (no GPU): {intensity:,.0f} FLOPs per byte, above the ridge of "
                f"sm_{f.cc} ({peak / bw:,.0f}): the dots bound it")


def _operands(f, dots: list, recipe, notes: list[str]) -> list[tuple]:
  """(dot, B's input index) for each input the kernel's dots read N-contiguous, the hottest
  dot's first, at most MAX_OPERANDS; none where the kernel could not be traced again."""
  # every float32 dot in the lowering's order: a dot's place in it names it in the jaxpr
  order = sorted((e.index for e in f.equations.values() if e.dot is not None and
                  e.dot.operand_dtype == "float32"))
  out: dict[int, object] = {}
  traced = None
  for hot in sorted(dots, key=lambda e: (e.weight, e.dot.flops), reverse=True):
    try:
      traced = dots_of(recipe) if traced is None else traced
      index = find_operand(recipe, hot.user_file, hot.user_line,
                           (order.index(hot.index), len(order)), traced)
    except NotApplicable:
      continue
    except Exception as e:  # noqa: BLE001 - the rest of the advice stands without it
      notes.append(f"no K-major B: the kernel could not be traced again "
                   f"({type(e).__name__}: {str(e)[:200]})")
      return []
    out.setdefault(index, hot)
  return [(hot, index) for index, hot in out.items()][:MAX_OPERANDS]


def _action(f, recipe, hot, indices: tuple[int, ...]) -> Action:
  """The K-major action of the B arguments `indices` (one, or every one the dots read
  N-contiguous), its diff where the source allows it."""
  try:
    diff, why = unified_diff(recipe, {i: block_axes(recipe, i) for i in indices}), None
  except SourceRefused as e:
    diff, why = None, str(e)
  where = hot.location
  args = ", ".join(map(str, indices))
  edit = (f"at {where}: apply the diff ({PATCH}); it passes B transposed (the transpose runs "
          "in each call: none if you keep B transposed)" if diff else
          f"at {where}: no diff ({why}); pass B transposed, reverse its BlockSpec's block "
          "shape and index map, and read it as b_ref[j, i].T")
  title = (f"B (argument {args}) stored K-major: the call passes it transposed"
           if len(indices) == 1 else
           f"the B of {len(indices)} dots (arguments {args}) stored K-major: the call passes "
           "each transposed")
  return Action("e", title, RULE, {"layout": "k_major", "operand": indices[0],
                                   "operands": list(indices), "line": hot.user_line},
                edit=edit, user_file=hot.user_file, user_line=hot.user_line,
                estimate_basis="no estimate: measured where tried (whole calls, the transpose "
                               "included)", diff=diff)


def findings(f, recipe, notes: list[str]) -> list[Finding]:
  """The diagnosis and its actions, where the kernel's TF32 dots read an N-contiguous B:
  one action per such input (a backward kernel's dots read several: attention's dq, dk
  and dv each have one) and, where there are several, one that stores them all K-major."""
  dots = [e for e in f.equations.values() if e.dot is not None and e.dot.precision == "tf32"
          and e.dot.operand_dtype == "float32"]
  if recipe is None or not dots or (f.cc or 0) < MIN_CC:
    return []
  far, rate = _far_from_rate(f)
  if not far:
    return []
  # the hottest dots whose B this edit applies to: attention's q @ k.T reads its B K-major
  # already, its p @ v does not
  found = _operands(f, dots, recipe, notes)
  if not found:
    return []
  hot, index = found[0]
  shape = "x".join(map(str, recipe.arg_shapes[index][0]))
  others = "".join(f"; the dot of equation [{h.index}] reads argument {i} so too"
                   for h, i in found[1:])
  d = about(RULE, f"the float32 dot at {hot.location} multiplies in TF32 with its B "
            f"(argument {index}, {shape}) N-contiguous: sm_{f.cc}'s wgmma reads 32-bit "
            "operands K-major, so this B takes a slower path" + others, f, hot, [
                fact("rate", rate, measured=bool(f.median_s)),
                fact("layout", f"B is read as (K, N) blocks of a row-major {shape} array; "
                     "given transposed, each block is K-contiguous")])
  acts = [_action(f, recipe, h, (i,)) for h, i in found]
  if len(found) > 1:
    acts.insert(0, _action(f, recipe, hot, tuple(sorted(i for _, i in found))))
  return [Finding(d, acts)]


# --- tried -----------------------------------------------------------------------------------

def _failed(a: Action, why: str, equal: bool | None = None) -> Action:
  return dataclasses.replace(a, trial=Trial(None, None, None, None, equal, why))


def with_tiles(recipe, index, tiles: list[Action]) -> list[tuple]:
  """The K-major variant at each block change advise tried as a kind c action (a dot's
  tile, dots/joint.py; a grid axis's block, blockshape.py; a loop's step, loop_steps.py),
  as split/trial.fastest takes them: a K-major B changes which is fastest (their trials with B as given do not tell
  it), so each is timed with it. One whose variant does not build is left out."""
  out = []
  for t in tiles[:MAX_TILES]:
    try:
      if "keyword" in t.change:          # a loop's step, a keyword of the kernel's
        name, to = t.change["keyword"], int(t.change["to"])
        base = rebound(recipe, name, to)
        change = {"rebind": {name: to}, "tile_edit": f"rebind {name}={t.change['from']} -> "
                                                      f"{to} at the call"}
      else:
        base = changed(recipe, t.change)
        change = {**{k: t.change[k] for k in TILE_KEYS if k in t.change}, "tile_edit": t.edit}
      out.append((build(base, index), change, t.title))
    except Exception:  # noqa: BLE001 - that change is not tried with it; the others are
      continue
  return out


def tried(a: Action, recipe, *, gpu: bool, budget_s: float, say=lambda text: None,
          tiles: list[Action] = ()) -> Action:
  """The action with its variant lowered and checked: on a CPU compiled for sm_90 and run
  under the interpreter beside the original where small enough; on a GPU timed in whole
  calls against the original, outputs compared, at the kernel's own blocks and at each of
  `tiles` (its kind c block actions, the fastest first: with_tiles), the fastest kept."""
  index = tuple(a.change.get("operands") or (a.change["operand"],))
  try:
    fn = build(recipe, index)
    gk = trace_variant(fn, recipe, None if gpu else "cpu")
  except Exception as e:  # noqa: BLE001 - a variant that does not build or lower is said so
    return _failed(a, f"does not lower: {type(e).__name__}: {str(e)[:200]}")
  if gpu:
    variants = [(fn, {}, "")] + with_tiles(recipe, index, list(tiles))
    say(f"{recipe.name}: trying {a.title}" + (f" at {len(variants)} block choices" if
                                              len(variants) > 1 else "") +
        " (whole calls, as autotune times them)")
    out = fastest(a, recipe, variants, budget_s, "K-major B")
    if out.change.get("tile_edit"):       # kept at another block: the edit says both
      both = f"{out.edit}; and change the blocks: {out.change['tile_edit']}"
      out = dataclasses.replace(out, edit=both, apply=both)
    return out
  (ck,) = compile_kernels([gk], tuple(DEFAULT_TARGET), need_cubin=True)
  if isinstance(ck, Exception):
    return _failed(a, f"does not compile: {str(ck)[:200]}")
  a = dataclasses.replace(a, compiled=resources(ck))
  grid = recipe.kwargs.get("grid") or ()
  grid = grid if isinstance(grid, (tuple, list)) else (grid,)
  iterations = math.prod(int(g) for g in grid) * interpreted_steps(gk)
  if not_interpreted(iterations, recipe) is None:
    say(f"{recipe.name}: checking {a.title} under the interpreter")
  return checked_on_cpu(a, recipe, lambda: fn, iterations)
