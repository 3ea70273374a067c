"""bench/ and tests/ (issue 42, item 8): the imports go one way. bench's tools may import
tests/ (tests/fuzz and tests/helpers are the library they share with the tests); nothing
under tests/ imports bench, so the suite never depends on a benchmark's script. The tests
of the bench tools live beside them, in bench/tests/.

Read from the source with `ast` (nothing is imported): every `import bench...` and
`from bench... import`, at the top of a module or inside a function, and the dynamic
forms spelled with a literal name (`importlib.import_module("bench.x")`, `__import__`).
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TESTS = ROOT / "tests"
_THIS = __import__(__name__, fromlist=["_"])     # the check reads its globals, the test plants


def _is_bench(name: str | None) -> bool:
  return name is not None and (name == "bench" or name.startswith("bench."))


def _imported_names(node: ast.AST) -> list[str]:
  if isinstance(node, ast.Import):
    return [alias.name for alias in node.names]
  if isinstance(node, ast.ImportFrom) and node.level == 0:
    return [node.module or ""]
  if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
    called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
      return [node.args[0].value]
  return []


def bench_imports(source: str) -> list[tuple[int, str]]:
  """(line, module) of each import of bench in `source`."""
  return sorted((node.lineno, name) for node in ast.walk(ast.parse(source))
                for name in _imported_names(node) if _is_bench(name))


def test_nothing_under_tests_imports_bench():
  found = [f"{path.relative_to(ROOT).as_posix()}:{line} imports {name}"
           for path in sorted(TESTS.rglob("*.py"))
           for line, name in bench_imports(path.read_text())]
  assert found == [], ("tests/ must not import bench/ (bench imports tests, not the other "
                       "way): move a test of a bench tool into bench/tests/, or give the test "
                       f"what it needs from tests/ or pallas_prof/: {found}")


def test_the_check_finds_planted_imports_of_bench(tmp_path, monkeypatch):
  planted = ("import os\n"
             "from bench.fuzz import fuzz\n"
             "import benchmark, tests.bench_like\n"
             "def later():\n"
             "  import bench.suite.suite as suite\n"
             "  from tests.fuzz import check\n"
             "  return importlib.import_module('bench.targets.matrix')\n"
             "from benches import x\n")
  assert bench_imports(planted) == [(2, "bench.fuzz"), (5, "bench.suite.suite"),
                                    (7, "bench.targets.matrix")]
  (tmp_path / "tests" / "fuzz").mkdir(parents=True)
  (tmp_path / "tests" / "fuzz" / "test_planted.py").write_text(planted)
  monkeypatch.setattr(_THIS, "ROOT", tmp_path)
  monkeypatch.setattr(_THIS, "TESTS", tmp_path / "tests")
  with pytest.raises(AssertionError, match=r"tests/fuzz/test_planted.py:5 imports bench.suite"):
    test_nothing_under_tests_imports_bench()
