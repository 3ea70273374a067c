"""The K-major B edit (layout.py) as a unified diff against the user's file(s), for the
user to review and apply (pallas-prof never applies it).

The edit is the one layout.py measures, in the user's names:
  - at the call, `pallas_call(...)(a, b)` becomes `pallas_call(...)(a, b.T)`;
  - B's BlockSpec, written as `pl.BlockSpec((bk, bn), lambda i, j: (k, j))`, becomes
    `pl.BlockSpec((bn, bk), lambda i, j: (j, k))`; written otherwise, it is wrapped in an
    expression that reverses its block shape and index map;
  - in the kernel, each `b_ref[x, y]` becomes `b_ref[y, x].T` (`b_ref[...]` becomes
    `b_ref[...].T`, `b_ref[x]` becomes `b_ref[:, x].T`) and `b_ref.shape` becomes
    `b_ref.shape[::-1]`.
The source is read, never run. Any other use of the B ref (passed to a function, pl.load,
stored to) refuses the diff with where and why (SourceRefused), as do a call whose
operands are not written at the pallas_call and a kernel whose function is not found.
"""
from __future__ import annotations

import ast
import functools
import os

from ..call_source import _find_call
from ..split.source import SourceRefused, _File, _diff_of, _kernel_function, _keywords, \
    _pallas_name

__all__ = ["SourceRefused", "unified_diff"]


def _applied(tree: ast.AST, call: ast.Call) -> ast.Call:
  """The Call that applies the pallas_call to its operands: `pallas_call(...)(a, b)`."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and node.func is call:
      return node
  raise SourceRefused("the pallas_call is not applied to its operands where it is made "
                      "(pallas_call(...)(a, b))")


def _swap_text(f: _File, node: ast.AST) -> str | None:
  """A two-element tuple's text with its elements swapped; None for anything else."""
  if isinstance(node, ast.Tuple) and len(node.elts) == 2 and \
      not any(isinstance(e, ast.Starred) for e in node.elts):
    a, b = (f.segment(e) for e in node.elts)
    return f"({b}, {a})"
  return None


def _edit_spec(f: _File, spec: ast.AST, pl: str) -> None:
  if isinstance(spec, ast.Call) and (spec.args or spec.keywords):
    kw = _keywords(spec)
    shape = spec.args[0] if spec.args else kw.get("block_shape")
    index = spec.args[1] if len(spec.args) > 1 else kw.get("index_map")
    if isinstance(index, ast.Lambda):
      shape_t, body_t = _swap_text(f, shape), _swap_text(f, index.body)
      if shape_t is not None and body_t is not None:
        f.replace(shape, shape_t)
        f.replace(index.body, body_t)
        return
  f.replace(spec, f"(lambda s: {pl}.BlockSpec(tuple(s.block_shape)[::-1], lambda *g, "
                  f"s=s: tuple(s.index_map(*g))[::-1]))({f.segment(spec)})")


def _edit_call(f: _File, recipe, index: int, pl: str) -> None:
  call = _find_call(f.tree, recipe.call_line)
  if call is None:
    raise SourceRefused(f"no pallas_call found at {recipe.location}")
  applied = _applied(f.tree, call)
  present = [k for k in range(len(recipe.arg_shapes) + len(recipe.absent))
             if k not in recipe.absent]
  position = present[index]
  if any(isinstance(a, ast.Starred) for a in applied.args) or applied.keywords or \
      len(applied.args) != len(present) + len(recipe.absent):
    raise SourceRefused("the pallas_call's operands are not written one by one")
  operand = applied.args[position]
  text = f.segment(operand)
  f.replace(operand, f"{text}.T" if isinstance(operand, (ast.Name, ast.Attribute)) else
            f"({text}).T")
  specs = _keywords(call).get("in_specs")
  if specs is None:
    return                         # whole arrays: the kernel's ref is the transposed array
  if isinstance(specs, (ast.List, ast.Tuple)) and not any(
      isinstance(e, ast.Starred) for e in specs.elts):
    if len(specs.elts) != len(present) + len(recipe.absent):
      raise SourceRefused("in_specs does not list one spec per operand")
    _edit_spec(f, specs.elts[position], pl)
    return
  s = f.segment(specs)
  f.replace(specs, f"[(lambda s: {pl}.BlockSpec(tuple(s.block_shape)[::-1], lambda *g, s=s: "
                   f"tuple(s.index_map(*g))[::-1]))(s) if _i == {position} else s "
                   f"for _i, s in enumerate({s})]")


def _parents(tree: ast.AST) -> dict:
  return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _kernel_def(f: _File, kernel):
  fn, _, first = _kernel_function(kernel)
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


def _edit_kernel(f: _File, kernel, position: int) -> None:
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


def _swapped_index(f: _File, index: ast.AST) -> str:
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


def unified_diff(recipe, index: int) -> str:
  """The diff that stores the call's argument `index` K-major; SourceRefused (why) where the
  source cannot be rewritten reliably."""
  if not recipe.call_file or not recipe.call_line:
    raise SourceRefused("the pallas_call's line is not known")
  call_file = _File.read(recipe.call_file)
  _, kernel_path, _ = _kernel_function(recipe.kernel)
  same = os.path.realpath(kernel_path or "") == os.path.realpath(recipe.call_file)
  kernel_file = call_file if same else _File.read(kernel_path)
  present = [k for k in range(len(recipe.arg_shapes) + len(recipe.absent))
             if k not in recipe.absent]
  _edit_call(call_file, recipe, index, _pallas_name(call_file))
  _edit_kernel(kernel_file, recipe.kernel, present[index])
  return _diff_of([call_file] if same else [call_file, kernel_file])
