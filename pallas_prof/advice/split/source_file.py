"""The user's source file as the advice's diffs edit it (split/, dots/layout_source.py,
loop_steps): read with linecache and ast (never run), edited by character offsets, and
written back as a unified diff only where the edited file still parses; with the few
questions of its syntax tree those edits ask (an import's name, a call's keywords, the
statement around a node). SourceRefused says why a file cannot be edited reliably."""
from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import itertools
import linecache
import os

__all__ = ["SourceFile", "SourceRefused", "alias", "diff_of", "encloses", "kernel_function",
           "keywords_of", "own_nodes", "pallas_name", "statement_of"]


class SourceRefused(ValueError):
  """The source cannot be rewritten reliably; the message says why."""


@dataclasses.dataclass
class SourceFile:
  path: str
  text: str
  tree: ast.Module
  edits: list = dataclasses.field(default_factory=list)   # (start, end, new) char offsets

  @classmethod
  def read(cls, path: str) -> "SourceFile":
    if not path or not os.path.exists(path):
      raise SourceRefused(f"its source {path or '?'} is not a file that can be read")
    if any(part in path.split(os.sep) for part in ("site-packages", "dist-packages")):
      raise SourceRefused(f"{os.path.basename(path)} belongs to an installed package, not your "
                          "code: copy the kernel into your code to edit it")
    text = "".join(linecache.getlines(path)) or open(path, encoding="utf-8").read()
    try:
      return cls(path, text, ast.parse(text))
    except SyntaxError as e:
      raise SourceRefused(f"{os.path.basename(path)} does not parse: {e}") from None

  def offset(self, line: int, col: int) -> int:
    """Char offset of ast's (line, UTF-8 byte column)."""
    lines = self.text.splitlines(True)
    return sum(len(x) for x in lines[:line - 1]) + len(
        lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))

  def span(self, node) -> tuple[int, int]:
    return (self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset))

  def segment(self, node) -> str:
    a, b = self.span(node)
    return self.text[a:b]

  def replace(self, node, new: str) -> None:
    self.edits.append((*self.span(node), new))

  def insert(self, at: int, new: str) -> None:
    self.edits.append((at, at, new))

  def edited(self) -> str:
    out = self.text
    spans = sorted(self.edits, key=lambda e: (e[0], e[1]))
    for (a, b, _), (c, _, _) in itertools.pairwise(spans):
      if c < b:
        raise SourceRefused("two edits of the source overlap")
    for a, b, new in reversed(spans):
      out = out[:a] + new + out[b:]
    return out

  def line_start(self, line: int) -> int:
    return self.offset(line, 0)

  def indent(self, line: int) -> str:
    text = self.text.splitlines()[line - 1]
    return text[:len(text) - len(text.lstrip())]


def alias(tree: ast.Module, module: str) -> str | None:
  """The name a file binds `module` to (import X as Y, from P import M as Y)."""
  for node in tree.body:
    if isinstance(node, ast.Import):
      for a in node.names:
        if a.name == module:
          return a.asname or (module if "." not in module else None)
    if isinstance(node, ast.ImportFrom) and node.module and "." in module:
      parent, name = module.rsplit(".", 1)
      if node.module == parent:
        for a in node.names:
          if a.name == name:
            return a.asname or name
  return None


def own_nodes(fn: ast.AST):
  """The nodes of a function's body, not of the functions defined in it."""
  todo = list(fn.body)
  while todo:
    node = todo.pop()
    yield node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      todo += list(ast.iter_child_nodes(node))


def kernel_function(kernel):
  fn = kernel
  while isinstance(fn, functools.partial):
    fn = fn.func
  try:
    return fn, inspect.getsourcefile(fn), fn.__code__.co_firstlineno
  except (TypeError, AttributeError):
    raise SourceRefused("the kernel's function has no source file") from None


def statement_of(tree: ast.AST, node: ast.AST):
  """The innermost statement containing `node`."""
  best = None
  for s in ast.walk(tree):
    if isinstance(s, ast.stmt) and s.lineno <= node.lineno and \
        (s.end_lineno, s.end_col_offset) >= (node.end_lineno, node.end_col_offset) and \
        not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
      if best is None or (s.lineno, s.col_offset) >= (best.lineno, best.col_offset):
        best = s
  return best


def keywords_of(call: ast.Call) -> dict:
  return {k.arg: k.value for k in call.keywords if k.arg}


def encloses(outer, inner) -> bool:
  return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and \
      (outer.end_lineno, outer.end_col_offset) >= (inner.end_lineno, inner.end_col_offset)


def diff_of(files) -> str:
  out = []
  for f in files:
    new = f.edited()
    try:
      ast.parse(new)
    except SyntaxError as e:         # a rewrite that does not parse is never shown
      raise SourceRefused(f"the rewritten {os.path.basename(f.path)} does not parse: {e}") \
          from None
    rel = os.path.relpath(f.path) if not os.path.relpath(f.path).startswith("..") else f.path
    out += difflib.unified_diff(f.text.splitlines(True), new.splitlines(True),
                                f"a/{rel.lstrip('/')}", f"b/{rel.lstrip('/')}")
  return "".join(out)


def pallas_name(f: SourceFile) -> str:
  name = alias(f.tree, "jax.experimental.pallas")
  if name is None:
    raise SourceRefused(f"{os.path.basename(f.path)} does not import jax.experimental.pallas "
                        "under a name (`from jax.experimental import pallas as pl`)")
  return name
