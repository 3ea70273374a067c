"""A run directory's file names are spelled in one module, pallas_prof/run_layout.py, which
every writer and reader imports (issue 50, item 5): "report.json" was spelled in four
modules, twice as a constant of its own, and a reader that spells a name its writer no
longer writes finds nothing.

Read from the source with `ast` (nothing is imported), as tests/test_structure.py does:
outside run_layout.py, no string of the package's code (docstrings and comments aside: they
describe the layout) holds "report.json", is one of the other names of a run's files, or
joins "kernels" into a path.
"""
from __future__ import annotations

import ast

from tests.test_structure import MODULES

LAYOUT = "pallas_prof.run_layout"
REPORT = "report.json"
NAMES = ("report.html", "trace.otlp.jsonl", "trace.perfetto.json", "kernel.json",
         "compiled.json", "spec.json", "source.py")
# (kernel.cubin is left out: nvdisasm's temporary file has that name too; the disk cache
# has a "kernels" folder of its own, so the kernels/ rule is the CLI's, whose runs they are)
CLI = "pallas_prof.cli"


def _docstrings(tree) -> set[int]:
  return {id(node.body[0].value) for node in ast.walk(tree)
          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
          and node.body and isinstance(node.body[0], ast.Expr)
          and isinstance(node.body[0].value, ast.Constant)}


def spelled_names(source: str, cli: bool = True) -> list[str]:
  """'line: text' for each run file name the source spells outside a docstring (and, in
  the CLI's modules, each path joined with "kernels")."""
  tree = ast.parse(source)
  docs = _docstrings(tree)
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
        and (REPORT in node.value or node.value in NAMES):
      found.append(f"{node.lineno}: {node.value[:60]!r}")
    elif cli and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "join" and any(isinstance(a, ast.Constant) and a.value == "kernels"
                                         for a in node.args):
      found.append(f"{node.lineno}: join(..., 'kernels', ...)")
  return sorted(found, key=lambda f: int(f.split(":")[0]))


def test_the_run_directorys_names_are_spelled_in_the_layout_module_alone():
  found = [f"{m}:{f}" for m, p in MODULES.items() if m != LAYOUT
           for f in spelled_names(p.read_text(), m.startswith(CLI))]
  assert not found, ("a run directory's file names spelled outside pallas_prof/run_layout.py "
                     "(import them from it):\n" + "\n".join(found))


def test_the_layout_module_names_them():
  spelled = spelled_names(MODULES[LAYOUT].read_text())
  assert any(REPORT in f for f in spelled) and len(spelled) >= len(NAMES), spelled
  assert "import" not in "".join(line for line in MODULES[LAYOUT].read_text().splitlines()
                                 if line.startswith(("from pallas_prof", "from .")))


def test_the_check_finds_planted_names():
  planted = ('"""Reads report.json (a docstring may say so)."""\n'
             'import os\n'
             'FILE = "report.json"\n'
             'def a(d):\n'
             '  print(f"pallas-prof: no report.json in {d}")\n'
             '  return os.path.join(d, "kernels", "k-0", "kernel.json")\n'
             'def fine(d, REPORT):\n'
             '  """The report.json of d."""\n'
             '  return os.path.join(d, REPORT), "kernels"\n')
  assert spelled_names(planted) == ["3: 'report.json'", "5: 'pallas-prof: no report.json in '",
                                    "6: join(..., 'kernels', ...)", "6: 'kernel.json'"]
