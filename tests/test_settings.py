"""pallas_prof/settings.py: every PALLAS_PROF_* variable declared once, read through its
parser, documented from the registry (tests/faults/test_bad_input.py drives bad values
through `pallas-prof run` and install())."""
from __future__ import annotations

import ast
import os
import pathlib
import re
import sys
import warnings

import pytest

from pallas_prof import settings

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "pallas_prof"
DOCS = PACKAGE.parent / "docs" / "running.md"

# (a value it accepts, what it reads as), (a value it refuses, what the refusal says)
CASES = {
    "PALLAS_PROF_CHECK": (("Bounds ", frozenset({"bounds"})), ("bounds, off", "contradict")),
    "PALLAS_PROF_CACHE_DIR": (("~/x", os.path.expanduser("~/x")), (__file__, "not a folder")),
    "PALLAS_PROF_TRACE": ((" Yes ", True), ("maybe", "not a yes or no")),
    "PALLAS_PROF_TRACE_FILE": (("t.jsonl", "t.jsonl"), (os.path.dirname(__file__), "a folder")),
    "PALLAS_PROF_PERFETTO": (("t.json", "t.json"), (os.path.dirname(__file__), "a folder")),
    "PALLAS_PROF_TRACEBACK": (("off", False), ("2", "not a yes or no")),
    "PALLAS_PROF_AUTOTUNE": (("1", True), ("please", "not a yes or no")),
    "PALLAS_PROF_AUTOTUNE_BUDGET_S": (("12.5", 12.5), ("-5", "above 0")),
    "PALLAS_PROF_TUNED": ((__file__, __file__), ("/nonexistent/tuning.json", "no such file")),
    "PALLAS_PROF_INTERPRETER_WARN_S": (("0.5", 0.5), ("soon", "not a number")),
    "PALLAS_PROF_LIBDEVICE": (("triton", "triton"), ("/nonexistent", "no such file")),
    "PALLAS_PROF_PREPARED_LIBDEVICE": (("0", False), ("nope", "not a yes or no")),
    "PALLAS_PROF_JAXLIB_PTX": (("Whole", "whole"), ("half", "not one of whole")),
    "PALLAS_PROF_PTX_REWRITES": (("false", False), ("x", "not a yes or no")),
    "PALLAS_PROF_WORKAROUNDS": (("0", False), ("none", "not a yes or no")),
    "PALLAS_PROF_COMPILE_WORKER": (("on", True), ("maybe", "not a yes or no")),
    "PALLAS_PROF_WARMUP": (("no", False), ("later", "not a yes or no")),
    "PALLAS_PROF_CUDA_DRIVER_VERSION": (("13000", 13000), ("abc", "not an integer")),
    "PALLAS_PROF_CUPTI": ((__file__, __file__), ("/nonexistent/libcupti.so", "no such file")),
    "PALLAS_PROF_CHROMIUM": ((__file__, __file__), (os.path.dirname(__file__),
                                                    "a folder, not a regular file")),
    "PALLAS_PROF_WORKER_DIR": ((os.path.dirname(__file__),) * 2, (__file__, "not a folder")),
    "PALLAS_PROF_WORKER_ARCH": (("90", 90), ("sm_90", "not an integer")),
}
# variables that take any text: nothing to refuse
ANY_TEXT = {"PALLAS_PROF_TRACE_ROOT", "PALLAS_PROF_WORKER_WARM_UP", "PALLAS_PROF_TEST_WORKER_PAUSE"}


def test_every_declared_variable_has_a_case_here():
  assert set(CASES) | ANY_TEXT == set(settings.VARIABLES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_variable_reads_what_it_accepts_and_names_what_it_refuses(name, monkeypatch):
  (good, parsed), (bad, why) = CASES[name]
  monkeypatch.setattr(settings, "_warned", set())
  monkeypatch.setenv(name, good)
  assert settings.value(name) == parsed
  assert not settings.problems()                  # (the rest of the environment is good)
  monkeypatch.setenv(name, bad)
  [problem] = settings.problems()
  assert problem.variable.name == name and why in str(problem)
  assert str(problem).startswith(f"{name}={bad!r}: ") and settings.variable(name).accepts \
      in str(problem)
  monkeypatch.setenv(name, "")
  assert settings.value(name) == settings.variable(name).default      # empty: unset


def test_a_bad_value_read_warns_once_at_the_users_line_and_reads_as_unset(monkeypatch):
  monkeypatch.setattr(settings, "_warned", set())
  monkeypatch.setenv("PALLAS_PROF_CUDA_DRIVER_VERSION", "abc")
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    line = sys._getframe().f_lineno + 1
    assert settings.value("PALLAS_PROF_CUDA_DRIVER_VERSION") is None
    assert settings.value("PALLAS_PROF_CUDA_DRIVER_VERSION") is None
  [w] = caught
  assert w.category is settings.EnvironmentVariableWarning
  assert (w.filename, w.lineno) == (__file__, line)
  assert "as if it were unset" in str(w.message)


def test_a_partly_known_check_keeps_the_known_part(monkeypatch):
  monkeypatch.setattr(settings, "_warned", set())
  monkeypatch.setenv("PALLAS_PROF_CHECK", "bounds,races")
  with pytest.warns(settings.EnvironmentVariableWarning, match="no 'races'.*with the rest"):
    assert settings.value("PALLAS_PROF_CHECK") == {"bounds"}


@pytest.mark.parametrize("name, meant", [
    ("PALLAS_PROF_CHEK", "PALLAS_PROF_CHECK"), ("PALLAS_PROF_CACHEDIR", "PALLAS_PROF_CACHE_DIR"),
    ("PALLAS_PROF_TUNE", "PALLAS_PROF_TUNED"), ("PALLAS_PROF_WORKAROUND", "PALLAS_PROF_WORKAROUNDS"),
    ("PALLAS_PROF_COMMIT", None), ("PALLAS_PROF_TEST_SEED", None), ("PALLAS_PROF_FUZZ_TMA", None),
    ("PALLAS_PROF_NO_RECEIVER_INSTALL", None)])
def test_a_misspelt_name_is_named_with_the_one_meant(name, meant):
  found = settings.unknown_names({name: "1", "PALLAS_PROF_CHECK": "bounds"})
  assert found == ({name: meant} if meant else {})


def test_the_docs_table_is_the_registrys():
  text = DOCS.read_text()
  for internal in (False, True):
    assert settings.doc_table(internal) in text, (
        "docs/running.md's table of variables differs from pallas_prof/settings.py: paste "
        f"settings.doc_table({internal}) there")


def _names_in(path: pathlib.Path) -> set[str]:
  return set(re.findall(r"PALLAS_PROF_[A-Z0-9_]+", path.read_text()))


def test_every_variable_the_package_names_is_declared():
  """A PALLAS_PROF_ name anywhere in the package (a reader, a message, a docstring) is
  one the registry declares: a new reader cannot skip it."""
  not_variables = {"PALLAS_PROF_VERSION"}       # conventions.py's attribute constant
  named = set()
  for path in PACKAGE.rglob("*.py"):
    if path.name != "settings.py":     # (its examples of misspelt names)
      named |= _names_in(path)
  assert named - not_variables - set(settings.VARIABLES) == set()


# the compile worker runs these files without the package and reads the variables its
# parent set for it directly
READ_WITHOUT_THE_PACKAGE = {"backend/compiling/worker_main.py",
                            "backend/compiling/worker_output.py", "settings.py"}


def environment_reads(path: pathlib.Path) -> list[tuple[int, str]]:
  """(line, name) of each os.environ.get / os.getenv / os.environ[...] read of a PALLAS_PROF_
  variable, named as a string or through a module constant."""
  tree = ast.parse(path.read_text())
  constants = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
               and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
               for t in n.targets if isinstance(t, ast.Name)}

  def name_of(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
      return node.value
    return constants.get(node.id) if isinstance(node, ast.Name) else None

  def is_environ(node):
    return isinstance(node, ast.Attribute) and node.attr == "environ"

  out = []
  for node in ast.walk(tree):
    key = None
    if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute) and (
        (node.func.attr == "get" and is_environ(node.func.value)) or node.func.attr == "getenv"):
      key = name_of(node.args[0])
    elif isinstance(node, ast.Subscript) and is_environ(node.value) and \
        isinstance(node.ctx, ast.Load):
      key = name_of(node.slice)
    if key and key.startswith(settings.PREFIX):
      out.append((node.lineno, key))
  return out


def test_the_package_reads_its_variables_through_the_registry():
  direct = [f"{path.relative_to(PACKAGE)}:{line}: {name}"
            for path in sorted(PACKAGE.rglob("*.py"))
            if path.relative_to(PACKAGE).as_posix() not in READ_WITHOUT_THE_PACKAGE
            for line, name in environment_reads(path)]
  assert not direct, "read with os.environ, not pallas_prof.settings.value():\n" + \
      "\n".join(direct)


def test_the_read_check_finds_planted_reads(tmp_path):
  planted = tmp_path / "m.py"
  planted.write_text('import os\nENV = "PALLAS_PROF_CHECK"\na = os.environ.get(ENV)\n'
                     'b = os.getenv("PALLAS_PROF_TRACE")\nc = os.environ["PALLAS_PROF_TUNED"]\n'
                     'os.environ["PALLAS_PROF_TRACE"] = "0"\nd = os.environ.get("HOME")\n')
  assert environment_reads(planted) == [(3, "PALLAS_PROF_CHECK"), (4, "PALLAS_PROF_TRACE"),
                                        (5, "PALLAS_PROF_TUNED")]


@pytest.mark.parametrize("value, why", [
    ("bounds, off", "'bounds' and 'off' contradict each other"),
    ("no bounds", "'bounds' and 'no' contradict each other"),
    ("bounds,races,0", "'bounds' and '0' contradict each other"),
    (" , ", "no word in it")])
def test_a_contradictory_or_empty_check_is_refused_not_read_as_one_of_its_words(value, why,
                                                                             monkeypatch):
  """PALLAS_PROF_CHECK="bounds, off" ran checked, without a word (issue 39): the one who
  wrote off did not ask for checks. Refused now, naming the variable, the value and what it
  accepts; as a read (a script that set it itself) it warns and reads as unset (off)."""
  monkeypatch.setattr(settings, "_warned", set())
  monkeypatch.setenv("PALLAS_PROF_CHECK", value)
  [problem] = settings.problems()
  assert str(problem).startswith(f"PALLAS_PROF_CHECK={value!r}: {why}"), problem
  assert "it accepts bounds, or off (none, 0, false, no) alone" in str(problem)
  with pytest.warns(settings.EnvironmentVariableWarning, match="as if it were unset"):
    assert settings.value("PALLAS_PROF_CHECK") == frozenset()
  # the same words apart are what they were
  for alone, reads in (("bounds", {"bounds"}), ("off", {"off"}), ("none, 0", {"none", "0"})):
    monkeypatch.setenv("PALLAS_PROF_CHECK", alone)
    assert settings.value("PALLAS_PROF_CHECK") == reads and not settings.problems()


def test_path_settings_are_made_absolute_from_the_folder_the_run_started_in(tmp_path):
  """A script that changes folder must not move the cache, a trace file, a tuning file
  (issue 48, item 2): the run makes them absolute before the script; words stay words, and
  settings that are not paths are left as they are."""
  environ = {"PALLAS_PROF_CACHE_DIR": "cache", "PALLAS_PROF_TRACE_FILE": "t/spans.jsonl",
             "PALLAS_PROF_PERFETTO": "~/p.json", "PALLAS_PROF_LIBDEVICE": "triton",
             "PALLAS_PROF_TRACE_ROOT": "root", "PALLAS_PROF_TUNED": "/already/absolute"}
  settings.absolute_paths(environ)
  here = os.getcwd()
  assert environ == {"PALLAS_PROF_CACHE_DIR": os.path.join(here, "cache"),
                     "PALLAS_PROF_TRACE_FILE": os.path.join(here, "t", "spans.jsonl"),
                     "PALLAS_PROF_PERFETTO": os.path.join(os.path.expanduser("~"), "p.json"),
                     "PALLAS_PROF_LIBDEVICE": "triton", "PALLAS_PROF_TRACE_ROOT": "root",
                     "PALLAS_PROF_TUNED": "/already/absolute"}
