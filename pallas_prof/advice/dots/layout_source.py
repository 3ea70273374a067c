"""The K-major B edit (layout.py) as a unified diff against the user's file(s), for the
user to review and apply (pallas-prof never applies it).

The edit is the one layout.py measures, in the user's names:
  - at the call, `pallas_call(...)(a, b)` becomes `pallas_call(...)(a, b.T)`;
  - B's BlockSpec, written as `pl.BlockSpec((bk, bn), lambda i, j: (k, j))`, becomes
    `pl.BlockSpec((bn, bk), lambda i, j: (j, k))`; written otherwise, it is wrapped in an
    expression that reverses its block shape and index map;
  - in the kernel, each `b_ref[x, y]` becomes `b_ref[y, x].T` (`b_ref[...]` becomes
    `b_ref[...].T`, `b_ref[x]` becomes `b_ref[:, x].T`), each Triton load
    `plgpu.load(b_ref.at[x, y], mask=m)` becomes `plgpu.load(b_ref.at[y, x], mask=m.T).T`,
    and `b_ref.shape` becomes `b_ref.shape[::-1]`.
A B of more than two dimensions (attention's V, in blocks that squeeze all but two) has
those two swapped instead (`v.swapaxes(1, 3)`, the spec's tuples likewise).
The source is read, never run. Any other use of the B ref (passed to a function, stored
to) refuses the diff with where and why (SourceRefused), as do a call whose operands are
not written at the pallas_call and a kernel whose function is not found.
"""
from __future__ import annotations

import ast
import functools
import os

from ..call_source import _find_call
from ..split.source_file import SourceFile, SourceRefused, diff_of, kernel_function, \
    keywords_of, pallas_name

__all__ = ["SourceRefused", "unified_diff"]


def _applied(tree: ast.AST, call: ast.Call) -> ast.Call:
  """The Call that applies the pallas_call to its operands: `pallas_call(...)(a, b)`."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and node.func is call:
      return node
  raise SourceRefused("the pallas_call is not applied to its operands where it is made "
                      "(pallas_call(...)(a, b))")


def _swap_text(f: SourceFile, node: ast.AST, axes: tuple[int, int], rank: int) -> str | None:
  """A rank-long tuple's text with its elements at `axes` swapped; None for anything else."""
  if isinstance(node, ast.Tuple) and len(node.elts) == rank and \
      not any(isinstance(e, ast.Starred) for e in node.elts):
    parts = [f.segment(e) for e in node.elts]
    a, b = axes
    parts[a], parts[b] = parts[b], parts[a]
    return f"({', '.join(parts)})"
  return None


def _wrapped_spec(pl: str, text: str, axes: tuple[int, int], rank: int) -> str:
  """An expression of the spec `text` with its block shape's and index map's `axes`
  swapped, whatever way the spec is written."""
  order = list(range(rank))
  order[axes[0]], order[axes[1]] = order[axes[1]], order[axes[0]]
  p = tuple(order)
  return (f"(lambda s: {pl}.BlockSpec(tuple(s.block_shape[i] for i in {p}), lambda *g, s=s: "
          f"tuple(s.index_map(*g)[i] for i in {p})))({text})")


def _edit_spec(f: SourceFile, spec: ast.AST, pl: str, axes: tuple[int, int], rank: int) -> None:
  if isinstance(spec, ast.Call) and (spec.args or spec.keywords):
    kw = keywords_of(spec)
    shape = spec.args[0] if spec.args else kw.get("block_shape")
    index = spec.args[1] if len(spec.args) > 1 else kw.get("index_map")
    if isinstance(index, ast.Lambda):
      shape_t = _swap_text(f, shape, axes, rank)
      body_t = _swap_text(f, index.body, axes, rank)
      if shape_t is not None and body_t is not None:
        f.replace(shape, shape_t)
        f.replace(index.body, body_t)
        return
  f.replace(spec, _wrapped_spec(pl, f.segment(spec), axes, rank))


def _edit_call(f: SourceFile, recipe, operands: dict, pl: str) -> None:
  """At the call, each operand `index` of `operands` ({index: axes}) swapped at its axes,
  and its spec likewise."""
  call = _find_call(f.tree, recipe.call_line)
  if call is None:
    raise SourceRefused(f"no pallas_call found at {recipe.location}")
  applied = _applied(f.tree, call)
  present = [k for k in range(len(recipe.arg_shapes) + len(recipe.absent))
             if k not in recipe.absent]
  if any(isinstance(a, ast.Starred) for a in applied.args) or applied.keywords or \
      len(applied.args) != len(present) + len(recipe.absent):
    raise SourceRefused("the pallas_call's operands are not written one by one")
  swaps = {}                              # position among the call's operands: (axes, rank)
  for index, axes in operands.items():
    position = present[index]
    operand = applied.args[position]
    text = f.segment(operand)
    rank = len(recipe.arg_shapes[index][0])
    swap = ".T" if rank == 2 else f".swapaxes({axes[0]}, {axes[1]})"
    f.replace(operand, f"{text}{swap}" if isinstance(operand, (ast.Name, ast.Attribute)) else
              f"({text}){swap}")
    swaps[position] = (axes, rank)
  specs = keywords_of(call).get("in_specs")
  if specs is None:
    return                         # whole arrays: the kernel's ref is the transposed array
  given = _list_of(f.tree, specs.id, call) if isinstance(specs, ast.Name) else None
  if given is not None and max(swaps) < len(given.elts):   # in_specs=in_specs: its list
    for position, (axes, rank) in swaps.items():
      _edit_spec(f, given.elts[position], pl, axes, rank)
    return
  if isinstance(specs, (ast.List, ast.Tuple)) and not any(
      isinstance(e, ast.Starred) for e in specs.elts):
    if len(specs.elts) != len(present) + len(recipe.absent):
      raise SourceRefused("in_specs does not list one spec per operand")
    for position, (axes, rank) in swaps.items():
      _edit_spec(f, specs.elts[position], pl, axes, rank)
    return
  chosen = " else ".join(f"{_wrapped_spec(pl, 's', axes, rank)} if _i == {position}"
                         for position, (axes, rank) in sorted(swaps.items()))
  f.replace(specs, f"[{chosen} else s for _i, s in enumerate({f.segment(specs)})]")


def _list_of(tree: ast.AST, name: str, call: ast.Call) -> ast.List | None:
  """The list literal `name` is given once at the top of the function that makes the call,
  before it, changed after only by `.append` (JAX's attention's in_specs, its segment ids'
  spec appended): its elements are the specs in order. None for anything else."""
  fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
         and n.lineno <= call.lineno <= (n.end_lineno or n.lineno)]
  if not fns:
    return None
  fn = max(fns, key=lambda n: n.lineno)           # the innermost
  given = []
  for node in ast.walk(fn):
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
    if any(isinstance(t, ast.Name) and t.id == name for t in targets):
      given.append(node)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        isinstance(node.func.value, ast.Name) and node.func.value.id == name and \
        node.func.attr != "append":
      return None                                # inserted into, extended: not in order
  if len(given) != 1 or given[0] not in fn.body or given[0].lineno > call.lineno or \
      not isinstance(given[0].value, ast.List) or \
      any(isinstance(e, ast.Starred) for e in given[0].value.elts):
    return None
  return given[0].value


def _parents(tree: ast.AST) -> dict:
  return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _kernel_def(f: SourceFile, kernel):
  fn, _, first = kernel_function(kernel)
  defs = [n for n in ast.walk(f.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
          and n.name == fn.__name__ and
          (n.decorator_list[0].lineno if n.decorator_list else n.lineno) <= first <= n.lineno]
  if len(defs) != 1:
    raise SourceRefused(f"the kernel's function {fn.__name__} is not found in "
                        f"{os.path.basename(f.path)}")
  return defs[0]


def _b_param(kdef, kernel, position: int) -> str:
  bound = 0
  while isinstance(kernel, functools.partial):
    bound += len(kernel.args)
    kernel = kernel.func
  params = [a.arg for a in kdef.args.posonlyargs + kdef.args.args]
  at = position + bound
  if at >= len(params):
    raise SourceRefused("the kernel takes its refs as *args")
  return params[at]


def _edit_kernel(f: SourceFile, kernel, position: int) -> None:
  kdef = _kernel_def(f, kernel)
  name = _b_param(kdef, kernel, position)
  parents = _parents(kdef)
  uses = 0
  for node in ast.walk(kdef):
    if isinstance(node, (ast.FunctionDef, ast.Lambda)) and node is not kdef and \
        name in {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}:
      raise SourceRefused(f"a function in the kernel rebinds {name} (line {node.lineno})")
    if not (isinstance(node, ast.Name) and node.id == name):
      continue
    up = parents.get(node)
    where = f"{os.path.basename(f.path)}:{node.lineno}"
    if isinstance(node.ctx, ast.Store):
      raise SourceRefused(f"{where} assigns {name}")
    if isinstance(up, ast.Subscript) and up.value is node and isinstance(up.ctx, ast.Load):
      f.replace(up, f"{name}[{_swapped_index(f, up.slice)}].T")
    elif isinstance(up, ast.Attribute) and up.attr == "at":
      _edit_load(f, name, up, parents, where)
    elif isinstance(up, ast.Attribute) and up.attr == "shape":
      f.replace(up, f"{name}.shape[::-1]")
    elif isinstance(up, ast.Attribute) and up.attr in ("dtype", "ndim"):
      pass
    else:
      raise SourceRefused(f"{where} uses {name} other than by indexing it (the diff "
                          "transposes each read)")
    uses += 1
  if not uses:
    raise SourceRefused(f"the kernel never reads {name}")


def _edit_load(f: SourceFile, name: str, at: ast.Attribute, parents: dict, where: str) -> None:
  """`plgpu.load(b_ref.at[x, y], mask=m, other=o)` becomes `plgpu.load(b_ref.at[y, x],
  mask=m.T, other=o).T`, as the variant reads it (a mask, and a fill that is not a
  constant, transposed with the block); any other use of `.at` refuses the diff."""
  sub = parents.get(at)
  load = parents.get(sub)
  if not (isinstance(sub, ast.Subscript) and isinstance(load, ast.Call) and load.args and
          load.args[0] is sub and _called(load.func) == "load"):
    raise SourceRefused(f"{where} uses {name}.at other than as Triton's load's ref (the diff "
                        "transposes each read)")
  args = [f"{name}.at[{_swapped_index(f, sub.slice)}]"]
  args += [f.segment(a) for a in load.args[1:]]
  for k in load.keywords:
    value = f.segment(k.value)
    if k.arg in ("mask", "other") and not isinstance(k.value, ast.Constant):
      value = f"({value}).T" if not isinstance(k.value, (ast.Name, ast.Attribute)) else \
          f"{value}.T"
    args.append(f"{k.arg}={value}" if k.arg else f"**{value}")
  f.replace(load, f"{f.segment(load.func)}({', '.join(args)}).T")


def _called(func: ast.AST) -> str | None:
  return func.attr if isinstance(func, ast.Attribute) else \
      func.id if isinstance(func, ast.Name) else None


def _swapped_index(f: SourceFile, index: ast.AST) -> str:
  parts = list(index.elts) if isinstance(index, ast.Tuple) else [index]
  if any(isinstance(p, ast.Constant) and p.value is Ellipsis for p in parts):
    if len(parts) == 1:
      return "..."
    raise SourceRefused("an index with ... and more entries into B")
  if len(parts) == 1:
    return f":, {f.segment(parts[0])}"
  if len(parts) != 2:
    raise SourceRefused(f"an index of {len(parts)} entries into a 2-D B")
  return f"{f.segment(parts[1])}, {f.segment(parts[0])}"


def unified_diff(recipe, index, axes: tuple[int, int] = (0, 1)) -> str:
  """The diff that stores the call's argument `index` K-major (its `axes`, the two its
  block keeps, swapped: layout.block_axes), or each argument of a mapping {index: axes};
  SourceRefused (why) where the source cannot be rewritten reliably."""
  operands = dict(index) if isinstance(index, dict) else {index: axes}
  if not recipe.call_file or not recipe.call_line:
    raise SourceRefused("the pallas_call's line is not known")
  call_file = SourceFile.read(recipe.call_file)
  _, kernel_path, _ = kernel_function(recipe.kernel)
  same = os.path.realpath(kernel_path or "") == os.path.realpath(recipe.call_file)
  kernel_file = call_file if same else SourceFile.read(kernel_path)
  present = [k for k in range(len(recipe.arg_shapes) + len(recipe.absent))
             if k not in recipe.absent]
  _edit_call(call_file, recipe, operands, pallas_name(call_file))
  for i in operands:
    _edit_kernel(kernel_file, recipe.kernel, present[i])
  return diff_of([call_file] if same else [call_file, kernel_file])
