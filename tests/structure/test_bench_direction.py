"""bench/, tests/ and testkit/ (issue 42, item 8; issue 50, item 6): the imports go one way.

- nothing under tests/ imports bench, so the suite never depends on a benchmark's script
  (the tests of the bench tools live beside them, in bench/tests/);
- nothing under bench/ imports tests: a benchmark does not import a test module, and a test
  module is not a library. What both use (the fuzzer, the helpers, the suite's pytest setup)
  is testkit/'s;
- testkit imports neither tests nor bench: it is the library they share;
- pallas_prof/ never imports any of the three (the wheel ships pallas_prof alone).

Read from the source with `ast` (nothing is imported): every `import x...` and
`from x... import`, at the top of a module or inside a function, and the dynamic forms
spelled with a literal name (`importlib.import_module("x.y")`, `__import__`). Python run
from text is read line by line: a shell script's (`python3 - <<'PY'`, `python3 -c`) and a
module's string that a child process runs.
"""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TESTS = ROOT / "tests"
BENCH = ROOT / "bench"
TESTKIT = ROOT / "testkit"
PACKAGE = ROOT / "pallas_prof"
_THIS = __import__(__name__, fromlist=["_"])     # the checks read its globals, the tests plant
# this file's strings hold the planted imports the checks must find: it is not read itself
_OWN_PLANTS = pathlib.Path(__file__).resolve()


def _is(package: str, name: str | None) -> bool:
  return name is not None and (name == package or name.startswith(package + "."))


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


def imports_of(package: str, source: str) -> list[tuple[int, str]]:
  """(line, module) of each import of `package` in the Python `source`: its import statements,
  and the lines of its strings that import (a script a child process runs)."""
  tree = ast.parse(source)
  found = {(node.lineno, name) for node in ast.walk(tree)
           for name in _imported_names(node) if _is(package, name)}
  for node in ast.walk(tree):
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
      found |= {(node.lineno + line - 1, name)
                for line, name in text_imports_of(package, node.value)}
  return sorted(found)


def bench_imports(source: str) -> list[tuple[int, str]]:
  """(line, module) of each import of bench in `source`."""
  return imports_of("bench", source)


# a line of text that imports, as Python run from it: a shell script's here-document or
# `python3 -c`, a module's string that a child process runs
_SHELL_IMPORT = re.compile(r"(?:^|[;\"'(])\s*(?:from\s+([\w.]+)\s+import\b"
                           r"|import\s+([\w.]+(?:\s+as\s+\w+)?(?:\s*,\s*[\w.]+(?:\s+as\s+\w+)?)*))")


def text_imports_of(package: str, text: str) -> list[tuple[int, str]]:
  """(line, module) of each import of `package` the lines of `text` spell."""
  return [(number, name) for number, line in enumerate(text.splitlines(), 1)
          for match in _SHELL_IMPORT.finditer(line)
          for name in ([match.group(1)] if match.group(1) else
                       [part.split()[0] for part in match.group(2).split(",")])
          if _is(package, name)]


def violations(folder: pathlib.Path, package: str) -> list[str]:
  """`path:line imports module` for each import of `package` under `folder` (.py and .sh)."""
  found = []
  for path in sorted(folder.rglob("*.py")) + sorted(folder.rglob("*.sh")):
    if path.resolve() == _OWN_PLANTS:
      continue
    text = path.read_text()
    spelled = imports_of(package, text) if path.suffix == ".py" else text_imports_of(package, text)
    found += [f"{path.relative_to(ROOT).as_posix()}:{line} imports {name}"
              for line, name in spelled]
  return found


def test_nothing_under_tests_imports_bench():
  found = violations(TESTS, "bench")
  assert found == [], ("tests/ must not import bench/ (bench imports testkit, not tests): move "
                       "a test of a bench tool into bench/tests/, or give the test what it needs "
                       f"from testkit/ or pallas_prof/: {found}")


def test_nothing_under_bench_imports_tests():
  found = violations(BENCH, "tests")
  assert found == [], ("bench/ must not import tests/ (a test module is not a library): move "
                       f"what bench needs from tests/ into testkit/ and import it there: {found}")


def test_testkit_imports_neither_tests_nor_bench():
  found = violations(TESTKIT, "tests") + violations(TESTKIT, "bench")
  assert found == [], ("testkit/ is the library tests/ and bench/ share: it imports neither "
                       f"(move what it needs into testkit/): {found}")


def test_pallas_prof_imports_none_of_them():
  found = [hit for package in ("tests", "bench", "testkit") for hit in violations(PACKAGE, package)]
  assert found == [], f"pallas_prof/ is shipped alone: {found}"


PLANTED = ("import os\n"
           "from bench.fuzz import fuzz\n"
           "import benchmark, tests_like, testkit.fuzz\n"
           "def later():\n"
           "  import bench.suite.suite as suite\n"
           "  from tests.fuzz import test_fuzz\n"
           "  return importlib.import_module('bench.targets.matrix')\n"
           "from benches import x\n"
           "__import__('tests.conftest')\n"
           "CHILD = r\"\"\"\n"
           "import sys\n"
           "from tests.profiler.conftest import sds\n"
           "\"\"\"\n"
           "DOC = 'bench runs what tests/fuzz/test_fuzz.py runs; from tests/fuzz import nothing'\n")


def test_the_check_finds_planted_imports():
  assert bench_imports(PLANTED) == [(2, "bench.fuzz"), (5, "bench.suite.suite"),
                                    (7, "bench.targets.matrix")]
  assert imports_of("tests", PLANTED) == [(6, "tests.fuzz"), (9, "tests.conftest"),
                                          (12, "tests.profiler.conftest")]
  assert imports_of("testkit", PLANTED) == [(3, "testkit.fuzz")]
  script = ("#!/usr/bin/env bash\n"
            "python3 - out <<'PY'\n"
            "import sys, textwrap\n"
            "from tests.cli.test_newcomer import READS_PAST\n"
            "PY\n"
            "python3 -c 'import os, tests.helpers as h; print(1)'\n"
            "pytest tests/fuzz/test_fuzz.py  # running the tests is not importing them\n"
            "echo 'the tests import testkit'\n")
  assert text_imports_of("tests", script) == [(4, "tests.cli.test_newcomer"),
                                                (6, "tests.helpers")]


@pytest.mark.parametrize("folder,planted_as,check,expected", [
    ("tests", "tests/fuzz/test_planted.py", "test_nothing_under_tests_imports_bench",
     r"tests/fuzz/test_planted.py:5 imports bench.suite"),
    ("bench", "bench/fuzz/planted.py", "test_nothing_under_bench_imports_tests",
     r"bench/fuzz/planted.py:6 imports tests.fuzz"),
    ("bench", "bench/probes/planted.sh", "test_nothing_under_bench_imports_tests",
     r"bench/probes/planted.sh:2 imports tests.cli.test_newcomer"),
    ("testkit", "testkit/fuzz/planted.py", "test_testkit_imports_neither_tests_nor_bench",
     r"testkit/fuzz/planted.py:9 imports tests.conftest"),
    ("testkit", "testkit/planted.py", "test_testkit_imports_neither_tests_nor_bench",
     r"testkit/planted.py:2 imports bench.fuzz"),
    ("pallas_prof", "pallas_prof/planted.py", "test_pallas_prof_imports_none_of_them",
     r"pallas_prof/planted.py:3 imports testkit.fuzz"),
])
def test_each_check_fails_on_a_planted_import(tmp_path, monkeypatch, folder, planted_as, check,
                                              expected):
  path = tmp_path / planted_as
  path.parent.mkdir(parents=True)
  path.write_text(PLANTED if path.suffix == ".py"
                  else "python3 - <<'PY'\nfrom tests.cli.test_newcomer import READS_PAST\nPY\n")
  monkeypatch.setattr(_THIS, "ROOT", tmp_path)
  for name, sub in (("TESTS", "tests"), ("BENCH", "bench"), ("TESTKIT", "testkit"),
                    ("PACKAGE", "pallas_prof")):
    (tmp_path / sub).mkdir(exist_ok=True)
    monkeypatch.setattr(_THIS, name, tmp_path / sub)
  with pytest.raises(AssertionError, match=expected):
    getattr(_THIS, check)()
