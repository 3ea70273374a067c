"""The split variant as a unified diff against the user's own file(s), for the user to
review and apply (pallas-prof never applies it).

The edit is the one variant.py measures, written in the user's names:
  - in the kernel, before its fori_loop (or the decorators of its `@pl.loop(LO, HI)`
    function): this program's chunk of the loop
        _split_chunk = pl.cdiv(HI - LO, S)      (with pl.loop's step=K: whole iterations,
        _split_lo = LO + pl.program_id(AXIS) * _split_chunk     cdiv(cdiv(HI - LO, K), S) * K)
    and the loop's bounds become (_split_lo, lax.min(_split_lo + _split_chunk, HI));
  - at the pallas_call: the grid gains the axis of S (`grid=(*GRID, S)`), out_shape gains
    a leading S in float32 (the partials), out_specs squeeze it (each program writes its
    row), in_specs' index maps ignore it, and the call is wrapped in a helper whose
    second pass is `.sum(0)` in the outputs' own dtypes.
The source is read (linecache and ast), never run. Where it cannot be rewritten reliably
(an installed package's file, a call written positionally, a kernel that casts its sums
to a dtype it names itself, names it cannot find) SourceRefused says why, and the advice
shows the variant's jaxpr-level change (jaxpr_change) instead.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import linecache
import os

from jax.experimental import pallas as pl

from ..call_source import _find_call, name_of
from .pattern import Pattern
from .source_file import (SourceFile, SourceRefused, alias, diff_of, encloses, kernel_function,
                          keywords_of, own_nodes, pallas_name, statement_of)

HELPER = "_pallas_prof_split_sum"
HELPER_SOURCE = f'''def {HELPER}(call, out_shape):
  """The second pass of pallas-prof's split reduction, which adds the partials the grid's
  last axis wrote (a leading axis of the outputs), in the outputs' own dtypes."""
  def summed(*args):
    parts = call(*args)
    if isinstance(out_shape, dict):
      return {{k: parts[k].sum(0).astype(o.dtype) for k, o in out_shape.items()}}
    if isinstance(out_shape, (list, tuple)):
      return type(parts)(p.sum(0).astype(o.dtype) for p, o in zip(parts, out_shape))
    return parts.sum(0).astype(out_shape.dtype)
  return summed


'''


def kernel_loop(f: SourceFile, kernel) -> tuple:
  """(the kernel's FunctionDef, its one loop: a fori_loop call, or the `pl.loop(lo, hi)`
  call that decorates a function of the kernel's body); SourceRefused unless the kernel's
  own body has exactly one, as lax.fori_loop(lo, hi, body, init) or @pl.loop(lo, hi) (the
  bounds by position or as lower=, upper=)."""
  fn, _, first = kernel_function(kernel)
  defs = [n for n in ast.walk(f.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
          and n.name == fn.__name__ and n.lineno >= first]
  if not defs:
    raise SourceRefused(f"the kernel {fn.__name__} is not found in {os.path.basename(f.path)}")
  kdef = min(defs, key=lambda n: n.lineno)
  own = list(own_nodes(kdef))
  loops = [n for n in own if isinstance(n, ast.Call) and name_of(n.func) == "fori_loop"]
  loops += [d for n in own if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            for d in n.decorator_list if isinstance(d, ast.Call) and name_of(d.func) == "loop"]
  if len(loops) != 1 or None in bounds(loops[0]):
    raise SourceRefused(f"the kernel {fn.__name__} does not call lax.fori_loop(lo, hi, ...) "
                        "or decorate a function with @pl.loop(lo, hi) once in its own body")
  return kdef, loops[0]


def bounds(loop: ast.Call) -> tuple:
  """(lo, hi) of a fori_loop or pl.loop call, given by position or by keyword (lower=,
  upper=); None for one it does not give."""
  kw = keywords_of(loop)
  return tuple(loop.args[i] if len(loop.args) > i else kw.get(name)
               for i, name in enumerate(("lower", "upper")))


def _decorated(kdef, loop: ast.Call):
  """The function `loop` (a `pl.loop(...)` call) decorates in the kernel, or None."""
  return next((n for n in own_nodes(kdef) if isinstance(n, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))
               and any(d is loop for d in n.decorator_list)), None)


def loop_line(kernel) -> tuple[str, int] | None:
  """(file, line) of the kernel's one fori_loop call, read from its source (where JAX's
  equation does not say it: jax 0.12 gives a custom_vjp's kernels the caller's frames)."""
  try:
    _, path, _ = kernel_function(kernel)
    text = "".join(linecache.getlines(path)) or open(path, encoding="utf-8").read()
    return path, kernel_loop(SourceFile(path, text, ast.parse(text)), kernel)[1].lineno
  except (SourceRefused, SyntaxError, OSError, TypeError):
    return None


def _edit_kernel(f: SourceFile, recipe, p: Pattern, splits: int, axis: int, pl: str) -> None:
  kdef, loop = kernel_loop(f, recipe.kernel)
  if p.file == f.path and not loop.lineno <= (p.lineno or 0) <= loop.end_lineno:
    raise SourceRefused(f"the kernel's fori_loop is not the loop at {p.line}")
  names = {n.id for n in ast.walk(f.tree) if isinstance(n, ast.Name)}
  if {"_split_lo", "_split_chunk"} & names:
    raise SourceRefused("the file already uses the names _split_lo or _split_chunk")
  _casts_to_ref_dtype(f, kdef, recipe, p)
  lo_node, hi_node = bounds(loop)
  lo, hi = f.segment(lo_node), f.segment(hi_node)
  decorated = _decorated(kdef, loop)
  if isinstance(loop.func, ast.Attribute) and decorated is None:
    minimum = f"{f.segment(loop.func.value)}.min"
  elif alias(f.tree, "jax"):
    minimum = f"{alias(f.tree, 'jax')}.lax.min"
  else:
    raise SourceRefused("no name for lax.min in the kernel's file")
  zero = isinstance(lo_node, ast.Constant) and lo_node.value == 0
  trips = hi if zero else f"({hi}) - ({lo})"
  step = keywords_of(loop).get("step") if decorated is not None else None
  if step is not None and not (isinstance(step, ast.Constant) and step.value == 1):
    # pl.loop's index runs lo, lo + step, ...: the chunk is whole iterations of step each
    chunk = f"{pl}.cdiv({pl}.cdiv({trips}, {f.segment(step)}), {splits}) * ({f.segment(step)})"
  else:
    chunk = f"{pl}.cdiv({trips}, {splits})"
  # the lines go before the loop's statement, or before the decorators of pl.loop's function
  first = (min(d.lineno for d in decorated.decorator_list) if decorated is not None
           else statement_of(kdef, loop).lineno)
  pad = f.indent(first)
  start = "" if zero else f"{lo} + "
  f.insert(f.line_start(first),
           f"{pad}# pallas-prof split reduction: each of the grid's last axis's {splits} "
           "programs runs one chunk of the loop\n"
           f"{pad}_split_chunk = {chunk}\n"
           f"{pad}_split_lo = {start}{pl}.program_id({axis}) * _split_chunk\n")
  f.replace(lo_node, "_split_lo")
  f.replace(hi_node, f"{minimum}(_split_lo + _split_chunk, {hi})")


def _casts_to_ref_dtype(f: SourceFile, kdef, recipe, p: Pattern) -> None:
  """A sum cast before its store must be cast to its output ref's own dtype (`x.astype(
  o_ref.dtype)`): the partials' ref is float32, and a dtype the kernel names itself would
  not be."""
  if all(s.convert is None for s in p.stores):
    return
  args = [a.arg for a in kdef.args.args]
  bound = recipe.kernel.keywords if isinstance(recipe.kernel, functools.partial) else {}
  args = [a for a in args if a not in bound]
  n_in = len(recipe.arg_shapes)
  text = f.segment(kdef)
  for s in p.stores:
    ref = args[n_in + s.output] if n_in + s.output < len(args) else None
    if s.convert is not None and (ref is None or f"astype({ref}.dtype)" not in text):
      raise SourceRefused(f"the kernel casts a sum to {s.dtype} before storing it, not to "
                          f"its output ref's dtype (`.astype({ref or 'o_ref'}.dtype)`): the "
                          "partials are float32")


def _edit_call(f: SourceFile, recipe, p: Pattern, splits: int, pl: str, widen=None) -> None:
  call = _find_call(f.tree, recipe.call_line)
  if call is None or len(call.args) > 2 or (len(call.args) == 2 and "out_shape" in
                                            keywords_of(call)):
    raise SourceRefused(f"the pallas_call at {recipe.location} is not written as "
                        "pallas_call(kernel, out_shape, grid=..., ...)")
  jax_name = alias(f.tree, "jax")
  if jax_name is None:
    raise SourceRefused(f"{os.path.basename(f.path)} does not `import jax`")
  kw = keywords_of(call)
  shape_node = call.args[1] if len(call.args) == 2 else kw.get("out_shape")
  if shape_node is None:
    raise SourceRefused("the pallas_call's out_shape is not found")
  shapes, hoist = _named_shapes(f, call, shape_node)
  many = isinstance(recipe.out_shape, (list, tuple))
  named = isinstance(recipe.out_shape, dict)
  if (many or named) and len(recipe.outs) != len(recipe.out_shape):
    raise SourceRefused("its out_shape nests containers: the diff is written for one output, "
                        "or a list, tuple or dict of them")
  dtypes = {s.partial_dtype for s in p.stores}
  if len(dtypes) != 1:
    raise SourceRefused("its sums have different dtypes")
  (dtype,) = dtypes
  gen = f"{jax_name}.ShapeDtypeStruct(({splits}, *o.shape), \"{dtype}\") for o in {shapes}"
  if named:
    new_shape = (f"{{_k: {jax_name}.ShapeDtypeStruct(({splits}, *_o.shape), \"{dtype}\") "
                 f"for _k, _o in ({shapes}).items()}}")
  elif not many:
    new_shape = f"{jax_name}.ShapeDtypeStruct(({splits}, *({shapes}).shape), \"{dtype}\")"
  else:
    new_shape = f"tuple({gen})" if isinstance(recipe.out_shape, tuple) else f"[{gen}]"
  f.replace(shape_node, new_shape)
  _check_specs(recipe)
  grid = kw.get("grid")
  widens = list(widen) if isinstance(widen, (list, tuple)) else [widen] if widen else []
  widen = None
  if widens:
    _widen_kernel(f, call, widens)
    # a loop's step (axis None) is the kernel's keyword alone, the grid kept
    regrid = [w for w in widens if w.axis is not None]
    if len(regrid) > 1:
      raise SourceRefused("two block parameters would rescale the grid")
    widen = regrid[0] if regrid else None
  if grid is not None:
    g = f.segment(grid)
    if isinstance(grid, ast.Tuple):             # (a, b) -> (a, b, S)
      elts = [f.segment(e) for e in grid.elts]
      if widen is not None:
        elts[widen.axis] = f"{pl}.cdiv({elts[widen.axis]}, {widen.new // widen.value})"
      f.replace(grid, f"({', '.join(elts)}, {splits})")
    elif widen is not None:
      f.replace(grid, f"(*({pl}.cdiv(_n, {widen.new // widen.value}) if _i == {widen.axis} else _n "
                      f"for _i, _n in enumerate({g})), {splits})")
    else:
      f.replace(grid, f"(*{g}, {splits})" if isinstance(recipe.kwargs.get("grid"),
                                                        (tuple, list)) else f"({g}, {splits})")
  elif widen is not None:
    raise SourceRefused("the pallas_call names no grid for the wider blocks' grid")
  outs = kw.get("out_specs")
  squeeze = f"({pl}.squeezed, *s.block_shape), lambda *g, s=s: (g[-1], *s.index_map(*g[:-1]))"
  if outs is not None:
    o = f.segment(outs)
    f.replace(outs, f"[{pl}.BlockSpec({squeeze}) for s in {o}]" if many
              else f"{{_k: {pl}.BlockSpec({squeeze}) for _k, s in ({o}).items()}}" if named
              else f"(lambda s: {pl}.BlockSpec({squeeze}))({o})")
  ins = kw.get("in_specs")
  if ins is not None:
    i = f.segment(ins)
    keep = "s.block_shape, lambda *g, s=s: s.index_map(*g[:-1])"
    f.replace(ins, f"[{pl}.BlockSpec({keep}) if s is not None else None for s in {i}]"
              if isinstance(recipe.kwargs.get("in_specs"), (list, tuple))
              else f"(lambda s: {pl}.BlockSpec({keep}))({i})")
  end = f.span(call)[1] - 1            # before the call's closing parenthesis
  tail = f.text[:end].rstrip()
  comma = " " if tail.endswith(",") else ", "
  more = []
  if grid is None:
    more.append(f"grid=({splits},)")
  if outs is None:
    full = (f"({pl}.squeezed, *o.shape), lambda *g, o=o: (g[-1],) + (0,) * len(o.shape)")
    more.append(f"out_specs=[{pl}.BlockSpec({full}) for o in {shapes}]" if many else
                f"out_specs={{_k: {pl}.BlockSpec({full}) for _k, o in ({shapes}).items()}}"
                if named else f"out_specs=(lambda o: {pl}.BlockSpec({full}))({shapes})")
  if more:                             # on a line of their own where the call has several
    last = max(call.args + call.keywords, key=lambda n: (n.lineno, n.col_offset)).lineno
    if last > call.lineno:              # the indentation of the line the last argument starts
      joiner = f",\n{f.indent(last)}"
      first = joiner[1:] if tail.endswith(",") else joiner
    else:
      first, joiner = comma, ", "
    f.insert(len(tail), first + joiner.join(more))
  a, _ = f.span(call)
  f.insert(a, f"{HELPER}(")
  f.insert(f.span(call)[1], f", {shapes})")
  top = next(s for s in f.tree.body if s.lineno <= call.lineno <= s.end_lineno)
  first = min([top.lineno] + [d.lineno for d in getattr(top, "decorator_list", [])])
  f.insert(f.line_start(first), HELPER_SOURCE)
  if hoist is not None:                 # after the helper: its line is the call's own
    f.insert(*hoist)


SHAPES = "_split_out_shape"
_SIMPLE = (ast.Return, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)
_OWN_SCOPE = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _named_shapes(f: SourceFile, call: ast.Call, shape_node) -> tuple[str, tuple | None]:
  """(the text the edited call names its out_shape by, the insert that binds it or None).
  The edit names the out_shape three times (the partials' shapes, their out_specs, the
  second pass's dtypes): a literal is bound once, `_split_out_shape = ...` on a line of
  its own before the statement that makes the call, so the diff's lines stay readable.
  Kept in place where moving it could change what it means: a name already, a statement
  that is not a simple one starting its line, a lambda, comprehension or `:=` between
  that statement and the call (its names may be theirs), or a file using the name."""
  text = f.segment(shape_node)
  if isinstance(shape_node, (ast.Name, ast.Attribute)):
    return text, None
  stmt = statement_of(f.tree, call)
  if not isinstance(stmt, _SIMPLE) or f.text[f.line_start(stmt.lineno):f.offset(
      stmt.lineno, stmt.col_offset)].strip():
    return text, None
  if any(isinstance(n, ast.NamedExpr) or (isinstance(n, _OWN_SCOPE) and encloses(n, call))
         for n in ast.walk(stmt)) or \
      any(isinstance(n, ast.Name) and n.id == SHAPES for n in ast.walk(f.tree)):
    return text, None
  try:                                  # across lines, it needs brackets of its own
    ast.parse(f"{SHAPES} = {text}")
    value = text
  except SyntaxError:
    value = f"({text})"
  pad = f.indent(stmt.lineno)
  return SHAPES, (f.line_start(stmt.lineno), f"{pad}{SHAPES} = {value}\n")


def _widen_kernel(f: SourceFile, call: ast.Call, widens: list) -> None:
  """The call's kernel with its block parameters rebound: functools.partial(kernel, name=new)."""
  names = ", ".join(w.name for w in widens)
  functools_name = alias(f.tree, "functools")
  if functools_name is None:
    raise SourceRefused(f"{os.path.basename(f.path)} does not `import functools` (the "
                        f"variant rebinds {names} with functools.partial)")
  if not call.args:
    raise SourceRefused("the pallas_call's kernel is not its first argument")
  kernel = call.args[0]
  rebound = ", ".join(f"{w.name}={w.new}" for w in widens)
  f.replace(kernel, f"{functools_name}.partial({f.segment(kernel)}, {rebound})")


def _check_specs(recipe) -> None:
  """Specs the rewrite keeps whole: BlockSpecs with a block shape and an index map, and no
  other field set (memory space, pipelining) that `pl.BlockSpec(shape, map)` would drop."""
  plain = pl.BlockSpec((1,), lambda i: (i,))
  ins = recipe.kwargs.get("in_specs")
  for key, specs in (("in_specs", ins if isinstance(ins, (list, tuple)) else [ins]),
                     ("out_specs", recipe.out_specs())):
    for s in specs:
      if s is None:
        continue
      if not isinstance(s, pl.BlockSpec) or s.block_shape is None or s.index_map is None:
        raise SourceRefused(f"one of its {key} is not a BlockSpec with a block shape and an "
                            "index map")
      other = [fld.name for fld in dataclasses.fields(s) if fld.name not in
               ("block_shape", "index_map") and getattr(s, fld.name) != getattr(plain, fld.name)]
      if other:
        raise SourceRefused(f"one of its {key} sets {', '.join(other)}, which the rewrite "
                            "would drop")


def unified_diff(recipe, p: Pattern, splits: int, axis: int, widen=None) -> str:
  """The diff (one or two files) that makes the user's code the variant; SourceRefused
  where it cannot be written reliably. `widen` (variant.Widening, or a list of them): the
  kernel's block parameters made larger at the call (`functools.partial(kernel,
  block_n=64)`) and the grid axis of the one it is computed from `pl.cdiv(axis, factor)`
  (cdiv(cdiv(n, b), f) is cdiv(n, b * f): right at any shape)."""
  files, _ = split_files(recipe, p, splits, axis, widen)
  return diff_of(files)


def split_files(recipe, p: Pattern, splits: int, axis: int, widen=None) -> tuple[list, SourceFile]:
  """(the files unified_diff edits, with the split's edits made; the kernel's among them),
  for another edit to join before the diff is written (defer_source.py)."""
  if not recipe.call_file or not recipe.call_line:
    raise SourceRefused("the pallas_call's line is not known")
  _, kernel_path, _ = kernel_function(recipe.kernel)
  call_file = SourceFile.read(recipe.call_file)
  files = {call_file.path: call_file}
  kfile = files.get(kernel_path) or SourceFile.read(kernel_path)
  files[kfile.path] = kfile
  pl_call = pallas_name(call_file)
  pl_kernel = pl_call if kfile is call_file else alias(kfile.tree, "jax.experimental.pallas")
  if pl_kernel is None:
    raise SourceRefused("the kernel's file does not import jax.experimental.pallas")
  _edit_kernel(kfile, recipe, p, splits, axis, pl_kernel)
  _edit_call(call_file, recipe, p, splits, pl_call, widen)
  return list(files.values()), kfile


def keyword_diff(recipe, name: str, new: int) -> str:
  """The diff that gives the call's kernel `name=new` (advice/loop_steps.py): where the call
  writes `functools.partial(kernel, name=...)` itself, that keyword's value; else the
  kernel at the pallas_call wrapped, `functools.partial(kernel, name=new)` (a partial of a
  partial: the later keyword wins). SourceRefused where it cannot be written."""
  if not recipe.call_file or not recipe.call_line:
    raise SourceRefused("the pallas_call's line is not known")
  f = SourceFile.read(recipe.call_file)
  call = _find_call(f.tree, recipe.call_line)
  if call is None:
    raise SourceRefused(f"no pallas_call is written at {recipe.location}: it is made inside "
                        "a function called there (copy that function's file into your code "
                        "to edit it)")
  kernel = call.args[0] if call.args else None
  given = (keywords_of(kernel).get(name) if isinstance(kernel, ast.Call) and
           name_of(kernel.func).endswith("partial") else None)
  if given is not None:                 # functools.partial(k, name=...) at the call: its value
    f.replace(given, str(new))
  else:
    _widen_kernel(f, call, [_Rebinding(name, new)])
  return diff_of([f])


@dataclasses.dataclass(frozen=True)
class _Rebinding:
  name: str
  new: int


def jaxpr_change(recipe, k, p: Pattern, splits: int) -> str:
  """The variant in the jaxpr's terms, where no diff can be written."""
  n = -(-p.trip // splits)
  axis = len(k.grid)
  outs = ", ".join(f"{s.dtype} -> {s.partial_dtype}[{splits}, ...] partials"
                   for s in p.stores)
  converts = (" (the convert_element_type before each store skipped: the partials stay "
              f"{p.stores[0].partial_dtype})" if p.dropped else "")
  return (f"grid {tuple(k.grid)} -> {(*k.grid, splits)}; the {p.form} at {p.line} "
          f"({p.trip} iterations from {p.lo}) -> fori_loop(lo, min(lo + {n}, {p.lo + p.trip})) "
          f"with lo = {p.lo} + program_id({axis}) * {n}; outputs {outs}, each BlockSpec with a "
          f"leading squeezed dimension at program_id({axis}){converts}; then .sum(0) of each, "
          "cast to the output's dtype")
