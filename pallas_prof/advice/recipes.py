"""How each kernel was called: the pl.pallas_call arguments (the kernel function, grid,
BlockSpecs, out_shape, compiler params) and the user's line, kept while a script runs so
that blockshape.py can trace the same kernel again at another block shape.

`capture()` wraps jax.experimental.pallas.pallas_call (the public name a script calls
as `pl.pallas_call`) for as long as it is entered; the wrapper calls the original and
records a Recipe the first time the callable it returns is called (the arguments'
shapes are known then). A script that imported the name itself before the capture
began (`from jax.experimental.pallas import pallas_call`) is not seen: its kernels
get edits (kind d) instead of re-traced block shapes (kind c).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import sys
import threading
from typing import Any, Callable

from ..backend.equation_text import Aval

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass
class Recipe:
  kernel: Callable
  out_shape: Any
  kwargs: dict                    # every other pallas_call argument (grid, in_specs, ...)
  call_file: str | None
  call_line: int | None
  original: Callable              # the unwrapped pallas_call, to make variants with
  in_avals: tuple = ()            # backend.equation_text.Aval per argument, once called
  arg_shapes: tuple = ()          # (shape, dtype) per argument
  absent: tuple = ()              # positions of the arguments given as None (attention's
                                  # segment_ids): `original`'s calls take the others only

  @property
  def name(self) -> str:
    if self.kwargs.get("name"):
      return str(self.kwargs["name"])
    fn = self.kernel
    while isinstance(fn, functools.partial):
      fn = fn.func
    return getattr(fn, "__name__", "kernel")

  @property
  def outs(self) -> list:
    """The output structs, in the order pallas_call flattens out_shape (a pytree: one
    struct, a list, a tuple, a dict of them)."""
    # lazy: keeps jax out of this module's import (start-up time)
    import jax
    return jax.tree.leaves(self.out_shape)

  def outs_like(self, leaves: list):
    """`leaves`, one per output, in out_shape's own structure (what the call returns)."""
    import jax  # lazy: as in outs
    return jax.tree.unflatten(jax.tree.structure(self.out_shape), list(leaves))

  def out_specs(self) -> list:
    """The out_specs, one per output (outs' order): a single spec (or none) given for
    all of them repeated."""
    import jax  # lazy: as in outs
    specs, n = self.kwargs.get("out_specs"), len(self.outs)
    if not isinstance(specs, (list, tuple, dict)):
      return [specs] * n
    if isinstance(specs, (list, tuple)) and isinstance(self.out_shape, (list, tuple)):
      return list(specs)                # a list of specs for a tuple of outputs, as given
    return jax.tree.structure(self.out_shape).flatten_up_to(specs)

  def out_specs_like(self, leaves: list):
    """New out_specs, one per output, in the structure the call gave its own (a single
    spec given for one output stays one)."""
    specs = self.kwargs.get("out_specs")
    if not isinstance(specs, (list, tuple, dict)):
      return leaves[0] if len(leaves) == 1 else list(leaves)
    if isinstance(specs, (list, tuple)) and isinstance(self.out_shape, (list, tuple)):
      return type(specs)(leaves)
    import jax  # lazy: as in outs
    return jax.tree.unflatten(jax.tree.structure(self.out_shape), list(leaves))

  @property
  def location(self) -> str:
    return f"{os.path.basename(self.call_file)}:{self.call_line}" if self.call_file else "?"


_lock = threading.Lock()
_recipes: list[Recipe] = []


def recipes() -> list[Recipe]:
  with _lock:
    return list(_recipes)


def clear() -> None:
  """Forgets the recorded calls (and the autotuned ones: tune/blocks.py's TunedCall)."""
  # lazy: at the top it would load numpy whenever this module is imported
  from ..tune.blocks import clear_tuned_calls
  with _lock:
    _recipes.clear()
  clear_tuned_calls()


def _user_frame() -> tuple[str | None, int | None]:
  """The first frame outside pallas_prof, jax and functools: the user's pallas_call."""
  frame = sys._getframe(2)
  while frame is not None:
    name = frame.f_code.co_filename
    if not (name.startswith(_HERE) or f"{os.sep}jax{os.sep}" in name or
            f"{os.sep}jaxlib{os.sep}" in name or name.endswith("functools.py")):
      return name, frame.f_lineno
    frame = frame.f_back
  return None, None


def _aval(shape, dtype):
  # lazy: keeps numpy out of this module's import (start-up time)
  import numpy as np
  return Aval(tuple(int(d) for d in shape), np.dtype(dtype).name)


def _arrays(avals) -> tuple:
  """(shape, dtype) of each: what tells two calls' operands apart (not JAX's weak typing)."""
  return tuple((a.shape, a.dtype) for a in avals)


@contextlib.contextmanager
def capture():
  """Records a Recipe for every pallas_call made through the module's name while entered."""
  # lazy: keeps jax out of this module's import (start-up time)
  from jax.experimental import pallas as pl
  original = pl.pallas_call
  if getattr(original, "_pallas_prof_capture", False):     # already capturing (nested)
    yield
    return

  @functools.wraps(original)
  def pallas_call(kernel, out_shape=None, *args, **kwargs):
    fn = original(kernel, out_shape, *args, **kwargs)
    if args:                    # positional grid_spec etc.: not a form variants are made of
      return fn
    file, line = _user_frame()
    recipe = Recipe(kernel, out_shape, dict(kwargs), file, line, original)

    @functools.wraps(fn)
    def call(*xs):
      if not recipe.in_avals:
        try:
          absent = tuple(i for i, x in enumerate(xs) if x is None)
          if absent:            # variants are called with the arrays alone
            recipe.absent = absent
            recipe.original = _filling(original, len(xs), absent)
          recipe.arg_shapes = tuple((tuple(x.shape), x.dtype) for x in xs if x is not None)
          recipe.in_avals = tuple(_aval(s, d) for s, d in recipe.arg_shapes)
          with _lock:
            _recipes.append(recipe)
        except AttributeError:  # an argument without a shape: nothing to vary
          pass
      return fn(*xs)
    return call

  # lazy: at the top it would load numpy whenever this module is imported
  from ..tune import blocks
  pallas_call._pallas_prof_capture = True
  pl.pallas_call = pallas_call
  recording, blocks.RECORDING["on"] = blocks.RECORDING["on"], True   # autotuned calls too
  try:
    yield
  finally:
    blocks.RECORDING["on"] = recording
    if pl.pallas_call is pallas_call:
      pl.pallas_call = original


def _filling(original, n: int, absent: tuple):
  """pallas_call whose calls take the arrays alone and give the kernel None where the
  recorded call did (a None operand is an empty pytree: the kernel sees None, no ref)."""
  @functools.wraps(original)
  def make(kernel, out_shape=None, **kwargs):
    fn = original(kernel, out_shape, **kwargs)

    def call(*arrays):
      it = iter(arrays)
      return fn(*[None if i in absent else next(it) for i in range(n)])
    return call
  return make


def find(record, found: list[Recipe] | None = None) -> Recipe | None:
  """The recipe of a registry record: the same kernel name, operand shapes and grid (a
  script may call one kernel at two block shapes); None unless exactly one fits. Calls
  of one kernel function with other keywords (block_k=16 and 32 at one grid) are told
  apart by the kernel jaxpr each traces to, against the one the record lowered: a
  variant made from the other call's keywords would be advice about another kernel."""
  found = recipes() if found is None else found
  want = _arrays(record.in_avals)
  grid = tuple(record.generated.grid) if record.generated is not None else ()   # read back
  same = [r for r in found if _arrays(r.in_avals) == want and r.name == record.name
          and tuple(r.kwargs.get("grid") or ()) == grid]
  if not same or len({_blocks(r) for r in same}) != 1:
    return None
  last = {_kernel_key(r.kernel): r for r in same}     # each kernel's latest call
  if len(last) == 1:
    return same[-1]
  text = getattr(record.generated, "jaxpr_text", None)
  fits = [r for r in last.values() if text is not None and _traced_text(r) == text]
  return fits[0] if len(fits) == 1 else None


def _kernel_key(kernel) -> tuple:
  """What tells two calls' kernels apart: the function, and a partial's arguments."""
  if isinstance(kernel, functools.partial):
    return (_kernel_key(kernel.func), repr(kernel.args), repr(sorted(kernel.keywords.items())))
  return (kernel,)


def _traced_text(recipe: Recipe) -> str | None:
  """The recipe's kernel jaxpr, traced again abstractly and printed as the lowering prints
  it (GeneratedKernel.jaxpr_text); None where it does not trace."""
  # lazy: keeps jax out of this module's import (start-up time)
  import jax
  from ..backend import compat
  from .split.variant import _find_call, _structs
  try:
    fn = recipe.original(recipe.kernel, recipe.out_shape, **recipe.kwargs)
    eqn = _find_call(jax.make_jaxpr(fn)(*_structs(recipe)).jaxpr)
    return None if eqn is None else compat.print_jaxpr(
        compat.open_jaxpr(eqn.params["jaxpr"])[0])[0]
  except Exception:  # noqa: BLE001 - a call that does not trace again matches nothing
    return None


def _blocks(recipe: Recipe) -> str:
  """The recipe's block shapes, to tell apart two calls of one kernel at one grid."""
  specs = [recipe.kwargs.get("in_specs"), recipe.kwargs.get("out_specs")]
  return repr([[getattr(s, "block_shape", None) for s in (x if isinstance(x, (list, tuple))
                                                           else [x])] for x in specs])
