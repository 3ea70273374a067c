"""The names the user's code gives a pallas_call's block sizes and grid.

JAX traces numbers: a block-shape action knows `BlockSpec((64, 256), ...)` and
`grid=(4, 4)`, while the user's code says `pl.BlockSpec((bm, k), ...)` and
`grid=(pl.cdiv(m, bm), ...)`. Where the source writes a block dimension as a plain
variable, blockshape.py states its change in that variable (`bm=64 -> 16`), the edit the
user makes. The source is read, never run: the pallas_call's statement from linecache
(files and notebook cells alike), parsed with ast; a BlockSpec or a list of them named by a
variable is followed to that variable's last assignment before the call in the same
function.
"""
from __future__ import annotations

import ast
import dataclasses
import linecache

FOLLOWED = 3           # assignments followed from a name to its value (spec = ...; specs = [spec])


@dataclasses.dataclass(frozen=True)
class CallSource:
  blocks: tuple[tuple[str | None, ...] | None, ...]  # per BlockSpec (ins, then outs), per
                                                     # dimension: its variable, if a plain one
  grid: tuple[frozenset[str], ...] | None            # per grid axis: the names it reads


def name_of(node) -> str:
  """The name a call's function is called by: `f` for `f(...)` and `a.b.f(...)`."""
  if isinstance(node, ast.Attribute):
    return node.attr
  return node.id if isinstance(node, ast.Name) else ""


def _scope_of(tree: ast.AST, call: ast.Call) -> ast.AST:
  """The innermost function around the call (the module when none is)."""
  best = tree
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
        node.lineno <= call.lineno <= (node.end_lineno or node.lineno):
      if best is tree or node.lineno >= best.lineno:
        best = node
  return best


def _assignments(scope: ast.AST, before: int) -> dict[str, ast.expr]:
  """name -> the value of its last plain assignment in scope before line `before`."""
  found: dict[str, tuple[int, ast.expr]] = {}
  for node in ast.walk(scope):
    if isinstance(node, ast.Assign) and node.lineno < before and len(node.targets) == 1 \
        and isinstance(node.targets[0], ast.Name):
      name = node.targets[0].id
      if name not in found or found[name][0] < node.lineno:
        found[name] = (node.lineno, node.value)
  return {name: value for name, (_, value) in found.items()}


def _find_call(tree: ast.AST, line: int) -> ast.Call | None:
  calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and name_of(n.func) == "pallas_call"
           and n.lineno <= line <= (n.end_lineno or n.lineno)]
  return min(calls, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=None)


def read(file: str | None, line: int | None, n_in: int, n_out: int) -> CallSource | None:
  """The names at the pallas_call at file:line, or None where its source cannot be read."""
  if not file or not line:
    return None
  try:
    tree = ast.parse("".join(linecache.getlines(file)))
  except (SyntaxError, ValueError):
    return None
  call = _find_call(tree, line)
  if call is None:
    return None
  values = _assignments(_scope_of(tree, call), call.lineno)

  def follow(node):
    for _ in range(FOLLOWED):
      if not (isinstance(node, ast.Name) and node.id in values):
        break
      node = values[node.id]
    return node

  keywords = {k.arg: k.value for k in call.keywords if k.arg}

  def specs(key: str, n: int) -> list | None:
    node = follow(keywords.get(key))
    if isinstance(node, (ast.List, ast.Tuple)):
      return [follow(e) for e in node.elts] if len(node.elts) == n else None
    return [node] * n if node is not None else None

  ins, outs = specs("in_specs", n_in), specs("out_specs", n_out)
  if ins is None or outs is None:
    return None
  grid = follow(keywords.get("grid"))
  axes = tuple(frozenset(n.id for n in ast.walk(follow(e)) if isinstance(n, ast.Name))
               for e in grid.elts) if isinstance(grid, ast.Tuple) else None
  return CallSource(tuple(_block_names(s, follow) for s in ins + outs), axes)


def _block_names(spec, follow) -> tuple[str | None, ...] | None:
  if not (isinstance(spec, ast.Call) and name_of(spec.func) == "BlockSpec"):
    return None
  shape = spec.args[0] if spec.args else next(
      (k.value for k in spec.keywords if k.arg == "block_shape"), None)
  shape = follow(shape)
  if not isinstance(shape, ast.Tuple):
    return None
  return tuple(e.id if isinstance(e, ast.Name) else None for e in shape.elts)


# --- a block change in the user's words ----------------------------------------------------

def spec_edit(recipe, change: dict, specs: tuple[list, list]) -> str:
  """A block change (blockshape.py's) as the user makes it: in the variable their code
  writes the block size with where there is one (`bm=64 -> 16`), else in the traced grid
  and BlockSpecs. specs: the call's (in specs, out specs), one per array."""
  named = _named_edit(recipe, change, specs)
  # a rebound keyword of the kernel's that the named variable does not already set
  rebound = [f"the kernel's keyword {k}={change['from_block']} -> {v}"
             for k, v in (change.get("rebind") or {}).items()
             if not (named and named.startswith(f"{k}="))]
  if named:
    return "; ".join([named] + rebound)
  ins, outs = specs
  old = [list(s.block_shape) for s in ins + outs]
  parts = [f"grid={tuple(recipe.kwargs['grid'])} -> grid={tuple(change['grid'])}"]
  parts += [f"BlockSpec({tuple(o)}, ...) -> BlockSpec({tuple(n)}, ...)"
            for o, n in dict.fromkeys((tuple(o), tuple(n))
                                      for o, n in zip(old, change["blocks"], strict=True)
                                      if o != n)]
  return "; ".join(parts + rebound)


def _named_edit(recipe, change: dict, specs: tuple[list, list]) -> str | None:
  """`bm=64 -> 16` where one variable of the user's writes every block dimension the change
  touches and no other (a `(bm, bm)` block would change in both); the grid too where its
  axis is not computed from that variable."""
  ins, outs = specs
  source = read(recipe.call_file, recipe.call_line, len(ins), len(outs))
  if source is None:
    return None
  changed, kept = set(), set()
  for names, spec, new in zip(source.blocks, ins + outs, change["blocks"], strict=True):
    old = tuple(spec.block_shape)
    names = names if names is not None and len(names) == len(old) else (None,) * len(old)
    for name, a, b in zip(names, old, new, strict=True):
      if a != b:
        changed.add(name)
      elif name is not None:
        kept.add(name)
  if len(changed) != 1 or None in changed or changed & kept:
    return None
  (name,) = changed
  axis, grid = change["axis"], source.grid
  if grid is not None and any(name in reads for i, reads in enumerate(grid) if i != axis):
    return None
  text = f"{name}={change['from_block']} -> {change['to_block']}"
  if grid is None or axis >= len(grid) or name not in grid[axis]:
    text += f"; grid={tuple(recipe.kwargs['grid'])} -> grid={tuple(change['grid'])}"
  return text
