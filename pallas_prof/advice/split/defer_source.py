"""The deferred row sums (defer.py) written in the user's own kernel, beside the split's
edits (source.py), for the diff the user reviews:
  - in the loop's body function, each `X.sum(axis=0)` (or `jnp.sum(X, axis=0)`) added to
    a carry becomes `(X)`: the tile is added unreduced;
  - in the loop's init_val, each `jnp.zeros(S)` becomes `jnp.zeros((ROWS, S))`, ROWS the
    kernel's own keyword for the rows an iteration reads where one names them (the
    `jnp.arange(block_m)` of the body), else the number;
  - after the loop's statement, `a, b = a.sum(axis=0), b.sum(axis=0)`.
Only that shape of code is rewritten (the body a def of the kernel's, the init a tuple of
zeros calls, the loop's results assigned to names); anything else is SourceRefused, and the
advice then shows the change in the jaxpr's terms.
"""
from __future__ import annotations

import ast
import functools

from .source import kernel_loop, split_files
from ..call_source import name_of
from .source_file import SourceFile, SourceRefused, diff_of, keywords_of, statement_of


def _arg(call: ast.Call, position: int, keyword: str):
  if len(call.args) > position:
    return call.args[position]
  return keywords_of(call).get(keyword)


def _row_sums(fn: ast.FunctionDef) -> list:
  """The calls in `fn` that sum over axis 0: X.sum(axis=0), X.sum(0), jnp.sum(X, axis=0)."""
  out = []
  for node in ast.walk(fn):
    if not isinstance(node, ast.Call) or name_of(node.func) != "sum":
      continue
    # x.sum(axis=0) or x.sum(0) (a method: no array among its arguments), else a function
    # of a module, whatever its name (jnp.sum(x, axis=0), jax.numpy.sum(x, 0))
    method = isinstance(node.func, ast.Attribute) and (not node.args or (
        isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int)))
    if not method and not node.args:
      continue
    args = node.args if method else node.args[1:]
    axis = keywords_of(node).get("axis") or (args[0] if args else None)
    if isinstance(axis, ast.Constant) and axis.value == 0 and len(args) <= 1 and \
        set(keywords_of(node)) <= {"axis"}:
      out.append((node, node.func.value if method else node.args[0]))
  return out


def _rows_name(f: SourceFile, body: ast.FunctionDef, recipe, rows: int, widen) -> str:
  """The kernel's keyword that the body's `arange` reads and that is `rows` in the variant
  (after `widen`'s rebindings), where exactly one is; else the number itself."""
  kernel = recipe.kernel
  values = {}
  while isinstance(kernel, functools.partial):
    values = {**kernel.keywords, **values}
    kernel = kernel.func
  for w in widen or ():
    values[w.name] = w.new
  names = {n.args[0].id for n in ast.walk(body) if isinstance(n, ast.Call)
           and name_of(n.func) == "arange" and len(n.args) == 1 and isinstance(n.args[0], ast.Name)}
  found = [n for n in names if values.get(n) == rows]
  return found[0] if len(found) == 1 else str(rows)


def edit_kernel(f: SourceFile, recipe, found, widen=None) -> None:
  """The deferral's three edits in the kernel's file `f` (found: defer.deferrals, every
  carry of the loop); SourceRefused where the code is not of the shape rewritten."""
  kdef, loop = kernel_loop(f, recipe.kernel)
  if name_of(loop.func) != "fori_loop":
    raise SourceRefused("the loop is a @pl.loop function: row sums are deferred in a "
                        "fori_loop's carries only")
  body_ref, init = _arg(loop, 2, "body_fun"), _arg(loop, 3, "init_val")
  if not isinstance(body_ref, ast.Name):
    raise SourceRefused("the loop's body is not a function named in the kernel: the row sums "
                        "cannot be found in it")
  bodies = [n for n in ast.walk(kdef) if isinstance(n, ast.FunctionDef) and n.name == body_ref.id]
  if len(bodies) != 1:
    raise SourceRefused(f"the loop's body {body_ref.id} is not one function of the kernel's")
  sums = _row_sums(bodies[0])
  inits = init.elts if isinstance(init, ast.Tuple) else [init]
  if len(sums) != len(found) or len(inits) != len(found):
    raise SourceRefused(f"the body sums over axis 0 {len(sums)} times for {len(found)} carries "
                        "(or its init_val is not one zeros call per carry)")
  rows = {d.rows for d in found}
  if len(rows) != 1:
    raise SourceRefused("the carries' tiles have different numbers of rows")
  stmt = statement_of(kdef, loop)
  targets = getattr(stmt, "targets", [None])
  target = targets[0] if len(targets) == 1 else None
  names = ([t for t in target.elts] if isinstance(target, ast.Tuple) else [target])
  if not isinstance(stmt, ast.Assign) or stmt.value is not loop or \
      len(names) != len(found) or not all(isinstance(n, ast.Name) for n in names):
    raise SourceRefused("the loop's results are not assigned to one name per carry")
  rows_src = _rows_name(f, bodies[0], recipe, rows.pop(), widen)
  for call, summed in sums:
    text = f.segment(summed)
    f.replace(call, text if isinstance(summed, (ast.Name, ast.Attribute, ast.Call,
                                                ast.Subscript)) else f"({text})")
  for zeros in inits:
    if not (isinstance(zeros, ast.Call) and name_of(zeros.func) == "zeros" and zeros.args):
      raise SourceRefused("the loop's init_val is not a zeros call per carry")
    shape = zeros.args[0]
    inner = ", ".join(f.segment(e) for e in shape.elts) if isinstance(shape, ast.Tuple) \
        else f.segment(shape)
    f.replace(shape, f"({rows_src}, {inner})")
  pad = f.indent(stmt.lineno)
  listed = ", ".join(n.id for n in names)
  summed = ", ".join(f"{n.id}.sum(axis=0)" for n in names)
  f.insert(f.line_start(stmt.end_lineno + 1),
           f"{pad}# pallas-prof: the rows summed once, after the loop (each iteration added "
           "its tile unreduced)\n"
           f"{pad}{listed} = {summed}\n")


def unified_diff(recipe, p, splits: int, axis: int, widen, found) -> str:
  """source.unified_diff's split with the row sums deferred (found: defer.deferrals)."""
  files, kfile = split_files(recipe, p, splits, axis, widen)
  edit_kernel(kfile, recipe, found, [widen] if widen and not isinstance(widen, list) else widen)
  return diff_of(files)
