"""A run's saved source.py, checked before `show --target` compiles it (issue 48, item 8a).

Compiling a Triton kernel imports its module: Python runs the module's top level, and
Triton's code generator calls the Python callables the kernel's body names. A run
directory is data someone may have sent you, so its source.py is compiled only if it is
what pallas-prof's code generator writes (backend/lowering/codegen.py):

  - it holds the digest its kernel.json records (the label's hash): not damaged;
  - its top level is the generator's three imports, `@triton.jit` functions (one named as
    the kernel) and `NAME: tl.constexpr = <number>` constants, nothing else;
  - each function has plain parameters (annotated `tl.constexpr` at most, no defaults),
    and its body names only its parameters and locals, the module's own functions and
    constants, `tl` and `libdevice`, and the few Python builtins Triton's code generator
    knows; `tl.X` and `libdevice.X` are checked to be Triton's language, not a module
    (that would reach past it); no attribute anywhere starts with `_`; no import, class,
    nested function, lambda, global, with, try, raise, await or yield.

Anything else is refused, naming the first thing that is not the generator's, before a
line of it runs. The digest alone proves nothing against a sender, who can recompute it:
the shape is the check that keeps the sender's code from running.
"""
from __future__ import annotations

import ast
import hashlib
import types

from ...backend.lowering import triton_names

# backend/lowering/codegen.py's IMPORTS (tests check they agree), as the module binds them
IMPORTS = {"import triton": "triton", "import triton.language as tl": "tl",
           "from triton.language.extra import libdevice": "libdevice"}
# the Python builtins a generated body may call (Triton's code generator evaluates them)
BUILTINS = frozenset({"range", "float", "int", "min", "max", "len", "abs", "bool", "tuple",
                      "print", "isinstance"})
_FORBIDDEN = (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef,
              ast.Lambda, ast.Global, ast.Nonlocal, ast.With, ast.AsyncWith, ast.Try,
              ast.Raise, ast.Await, ast.Yield, ast.YieldFrom, ast.Delete, ast.NamedExpr)
if hasattr(ast, "TryStar"):
  _FORBIDDEN += (ast.TryStar,)


class NotGenerated(ValueError):
  """source.py is not what pallas-prof writes (or not the source its digest names)."""


def check(source: str, kernel: str, digest: str | None) -> None:
  """NotGenerated naming the first line of `source` that pallas-prof's code generator does
  not write (or the digest it does not hold); `kernel` is the kernel's function."""
  if digest is not None and hashlib.sha256(source.encode()).hexdigest() != digest:
    raise NotGenerated("it does not hold the source its kernel.json records (sha256 "
                       f"{digest[:12]}..., the label's hash): it was edited after the run")
  try:
    tree = ast.parse(source)
  except (SyntaxError, ValueError) as e:
    raise NotGenerated(f"it is not Python source ({e})") from None
  functions, constants = _top_level(tree)
  if kernel not in functions:
    raise NotGenerated(f"it defines no @triton.jit function {kernel!r}, the kernel")
  known = set(functions) | set(constants) | {"tl", "libdevice"}
  for fn in functions.values():
    _function(fn, known, set(functions))


def _line(node) -> str:
  return f"line {getattr(node, 'lineno', '?')}"


def _top_level(tree: ast.Module) -> tuple[dict, dict]:
  functions, constants = {}, {}
  for node in tree.body:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
      if ast.unparse(node) not in IMPORTS:
        raise NotGenerated(f"{_line(node)} imports {ast.unparse(node)!r}; pallas-prof's "
                           f"kernels import only {', '.join(IMPORTS)}")
    elif isinstance(node, ast.FunctionDef):
      if [ast.unparse(d) for d in node.decorator_list] != ["triton.jit"]:
        raise NotGenerated(f"{_line(node)}: the function {node.name!r} is not decorated "
                           "with @triton.jit alone")
      functions[node.name] = node
    elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
          and ast.unparse(node.annotation) == triton_names.constexpr and _number(node.value)):
      constants[node.target.id] = node
    else:
      raise NotGenerated(f"{_line(node)} runs {ast.unparse(node)[:80]!r} at the module's top "
                         "level; pallas-prof's kernels hold only imports, @triton.jit "
                         "functions and constants there")
  return functions, constants


def _number(node) -> bool:
  """A literal number, maybe negated, or float("inf")-like: what a constant holds."""
  if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
    node = node.operand
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
      node.func.id in ("float", "int") and not node.keywords and len(node.args) == 1:
    node = node.args[0]
    if isinstance(node, ast.Constant) and node.value in ("inf", "-inf", "nan"):
      return True
  return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
      and not isinstance(node.value, bool)


def _function(fn: ast.FunctionDef, known: set, functions: set) -> None:
  args = fn.args
  if args.vararg or args.kwarg or args.defaults or args.kw_defaults or args.kwonlyargs \
      or args.posonlyargs or fn.returns is not None:
    raise NotGenerated(f"{_line(fn)}: {fn.name}'s parameters are not plain ones")
  params = {a.arg for a in args.args}
  for a in args.args:
    if a.annotation is not None and ast.unparse(a.annotation) != triton_names.constexpr:
      raise NotGenerated(f"{_line(fn)}: {fn.name}'s parameter {a.arg} is annotated "
                         f"{ast.unparse(a.annotation)!r}")
  body = ast.Module(body=fn.body, type_ignores=[])
  stored = {n.id for n in ast.walk(body) if isinstance(n, ast.Name)
            and isinstance(n.ctx, (ast.Store, ast.Del))}
  names = params | stored | known | BUILTINS
  for node in ast.walk(body):
    if isinstance(node, _FORBIDDEN):
      raise NotGenerated(f"{_line(node)}: {type(node).__name__.lower()} in {fn.name}; "
                         "pallas-prof's kernels hold none")
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
      raise NotGenerated(f"{_line(node)} reads the attribute {node.attr!r}; pallas-prof's "
                         "kernels read none that starts with _")
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
      if node.id not in names:
        raise NotGenerated(f"{_line(node)} names {node.id!r}, which is neither {fn.name}'s "
                           "nor Triton's")
      if node.id in functions and not _called_or_passed(node, body):
        raise NotGenerated(f"{_line(node)} uses the function {node.id!r} other than by "
                           "calling it or handing it to Triton")
  for node in ast.walk(body):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
        node.value.id in ("tl", "libdevice") and node.value.id not in params | stored:
      _language(node)


def _called_or_passed(name: ast.Name, body) -> bool:
  """`f(...)` or `g(..., f, ...)`: how the generator uses its helper functions."""
  for node in ast.walk(body):
    if isinstance(node, ast.Call) and (node.func is name or name in node.args or
                                       any(k.value is name for k in node.keywords)):
      return True
  return False


def _language(node: ast.Attribute) -> None:
  """`tl.X` (or libdevice.X) resolves to Triton's language: a function, a type, a dtype or
  a constant, not a module (a module reaches whatever it imports)."""
  # lazy: keeps triton out of this module's import (start-up time)
  import triton.language as tl
  from triton.language.extra import libdevice
  owner = {"tl": tl, "libdevice": libdevice}[node.value.id]
  value = getattr(owner, node.attr, None)
  if value is None or isinstance(value, types.ModuleType):
    what = "no part" if value is None else "a module, not a part"
    raise NotGenerated(f"{_line(node)} reads {node.value.id}.{node.attr}, {what} of "
                       "Triton's language")
