"""Tuned settings (num_warps, num_stages, launch_group, tma) are one saved record,
backend.options.TunedSettings, kept by name in every tuning record (the tuning file, both
tuners' caches, `pallas-prof tune`'s results), and what is read back is checked by one
checker, tune/validate.py (issue 50, item 2). They were (w, s, g, t) tuples indexed by
position (`key[3]` was tma), checked by two cache validators of their own.

Rules, read from the source with `ast` (nothing is imported), as tests/test_structure.py does:
  - no setting by position (where settings are kept: SETTINGS_ROOMS): no constant index into a settings-like name (`key[3]`,
    `t.best[0]`), no `tuple[int, int, int, int]`, no zip of TUNED_FIELDS with a tuple (but
    in the one reader of version 3 tuning files), no from_key/with_key/key_label;
  - no second checker: outside tune/validate.py no module calls shape_problem, compares a
    file's "version" itself, or raises validate.Refused (but read_results, which words
    serial's own type check of this version's results).
"""
from __future__ import annotations

import ast
import re

from tests.test_structure import MODULES

# where settings are kept and read: the tuners, the advice (kind a), `pallas-prof tune`, the
# options that hold them (a sort key's `key[1]` elsewhere is no setting)
SETTINGS_ROOMS = ("pallas_prof.tune", "pallas_prof.advice", "pallas_prof.cli.tune",
                  "pallas_prof.backend.options")
SETTINGS_LIKE = re.compile(r"(^|_)(key|best|default|config|settings|tried|chosen|choice)$")
TUPLE_NAMES = {"from_key", "with_key", "key_label"}
VALIDATOR = "pallas_prof.tune.validate"
# (module, function) where a rule is the point: the reader of the version 3 layout
ZIP_ALLOWED = {("pallas_prof.tune.tuned_file", "_named")}
REFUSED_ALLOWED = {("pallas_prof.tune.params", "read_results")}


def _functions(tree):
  """(node, the name of the innermost function holding it, or "")."""
  def walk(node, where):
    for child in ast.iter_child_nodes(node):
      inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
      yield child, inner
      yield from walk(child, inner)
  yield from walk(tree, "")


def _name(node) -> str | None:
  if isinstance(node, ast.Name):
    return node.id
  if isinstance(node, ast.Attribute):
    return node.attr
  return None


def _four_ints(node) -> bool:
  """`tuple[int, int, int, int]` (any tuple of 4 ints: a settings tuple's type)."""
  return isinstance(node, ast.Subscript) and _name(node.value) == "tuple" and \
      isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 4 and \
      all(_name(e) == "int" for e in node.slice.elts)


def settings_by_position(module: str, source: str) -> list[str]:
  found = []
  for node, where in _functions(ast.parse(source)):
    line = getattr(node, "lineno", 0)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and \
        isinstance(node.slice.value, int) and SETTINGS_LIKE.search(_name(node.value) or ""):
      found.append(f"{module}:{line}: {ast.unparse(node)} (a setting by position)")
    elif _four_ints(node):
      found.append(f"{module}:{line}: {ast.unparse(node)} (a settings tuple's type)")
    elif isinstance(node, ast.Call) and _name(node.func) == "zip" and \
        any(_name(a) == "TUNED_FIELDS" for a in node.args) and (module, where) not in ZIP_ALLOWED:
      found.append(f"{module}:{line}: {ast.unparse(node)} (settings made from a tuple)")
    elif isinstance(node, (ast.FunctionDef, ast.Attribute)) and \
        (getattr(node, "name", None) or getattr(node, "attr", None)) in TUPLE_NAMES:
      found.append(f"{module}:{line}: {getattr(node, 'name', None) or node.attr} "
                   "(a settings tuple's API)")
  return found


def second_checkers(module: str, source: str) -> list[str]:
  if module == VALIDATOR:
    return []
  found = []
  for node, where in _functions(ast.parse(source)):
    line = getattr(node, "lineno", 0)
    if isinstance(node, ast.Call) and _name(node.func) == "shape_problem":
      found.append(f"{module}:{line}: shape_problem (a file's fields checked here)")
    elif isinstance(node, ast.Compare) and any(
        isinstance(s, ast.Subscript) and isinstance(s.slice, ast.Constant)
        and s.slice.value == "version" for s in (node.left, *node.comparators)):
      found.append(f"{module}:{line}: {ast.unparse(node)} (a file's version checked here)")
    elif isinstance(node, ast.Raise) and node.exc is not None and \
        _name(node.exc.func if isinstance(node.exc, ast.Call) else node.exc) == "Refused" and \
        (module, where) not in REFUSED_ALLOWED:
      found.append(f"{module}:{line}: raise Refused (a saved tuning refused here)")
  return found


def test_no_setting_is_kept_or_read_by_position():
  rooms = [m for m in MODULES if m.startswith(SETTINGS_ROOMS)]
  assert len(rooms) > 10 and "pallas_prof.tune.tuned_file" in rooms
  found = [f for m in rooms for f in settings_by_position(m, MODULES[m].read_text())]
  assert not found, ("tuned settings by position (keep them as backend.options.TunedSettings, "
                     "by name):\n" + "\n".join(found))


def test_saved_tunings_have_one_checker():
  found = [f for m, p in MODULES.items() for f in second_checkers(m, p.read_text())]
  assert not found, ("a second checker of saved tunings (give tune/validate.py the rule, and "
                     "call it):\n" + "\n".join(found))


def test_the_rules_find_planted_violations():
  planted = ("def _cached(data, key, t):\n"
             "  problem = validate.shape_problem(data, FIELDS)\n"
             "  if data['version'] != 3:\n"
             "    raise validate.Refused('old')\n"
             "  best: tuple[int, int, int, int] = (key[0], key[1], 0, 0)\n"
             "  if t.best[3]:\n"
             "    return dict(zip(TUNED_FIELDS, key))\n"
             "  return options.with_key(key)\n")
  by_position = settings_by_position("pallas_prof.tune.planted", planted)
  assert [f.split(": ", 1)[1] for f in by_position] == [
      "tuple[int, int, int, int] (a settings tuple's type)",
      "key[0] (a setting by position)", "key[1] (a setting by position)",
      "t.best[3] (a setting by position)",
      "zip(TUNED_FIELDS, key) (settings made from a tuple)",
      "with_key (a settings tuple's API)"]
  checkers = second_checkers("pallas_prof.tune.planted", planted)
  assert [f.split(": ", 1)[0] for f in checkers] == ["pallas_prof.tune.planted:2",
                                                     "pallas_prof.tune.planted:3",
                                                     "pallas_prof.tune.planted:4"]
  assert second_checkers(VALIDATOR, planted) == []        # the one checker may
  # what the rules leave alone: the version 3 reader's zip, a list's first item
  assert settings_by_position("pallas_prof.tune.tuned_file",
                              "def _named(v):\n  return dict(zip(TUNED_FIELDS, v))\n") == []
  assert settings_by_position("m", "candidates[0]\nrows[3]\n") == []
