"""Verdicts, avals and kernel rows reach the renderers typed (issue 50, items 1 and 4).

  - no renderer splits a verdict's text with `re`: the profiler's Verdict has the parts
    (profiler/verdict.py);
  - no renderer reaches past a kernel's row (cli/summary.py's KernelSummary) into the
    KernelEntry or KernelProfile behind it (`s.kernel.x`, `s.profile.x`,
    `report.kernel_profile(...)`), and none catches SystemExit (the page's saved kernels are
    read before it is made: html/kernel_files.py);
  - no aval is parsed from a string except where it is read back from a file, once
    (backend/equation_text.py: Aval.parse, first_result_aval; a record's upgrade_layout or
    from_text, which serial.py calls as it reads a file).

Read from the source with `ast` (nothing is imported). Each rule is checked on a planted
violation too, so that a checker that finds nothing cannot pass for one that works.
"""
from __future__ import annotations

import ast
import pathlib
import re

PACKAGE = pathlib.Path(__file__).resolve().parent.parent.parent / "pallas_prof"
# the modules that render a run: the terminal's tables, the page, the merged table
RENDERERS = ("cli/terminal", "cli/html", "cli/processes.py")
# the one module that reads an aval back from its text
AVAL_READER = "backend/equation_text.py"
# where a file's text is read back (serial.py calls them as it loads a record)
FILE_READERS = ("upgrade_layout", "from_text")
# modules that still read an aval out of text, and why
STILL_PARSED = {
    # the failing kernel's blocks as its printed jaxpr spells them (`a: bf16[8,128]`, JAX's
    # short dtype names); no typed record of the ref binders exists yet
    "instrument/errors.py": 1,
}
# what a regular expression that reads an aval out of text matches: the aval's dims...
_AVAL_TEXTS = ("float32[8,128]", "b:f32[8,128] = exp a")
# ...and what it does not match there, unlike a pattern that matches any text
_NOT_AVAL_TEXTS = ("float32(8;128)", "b:f32(8;128) = exp a")
# a ref's aval as a printed jaxpr holds it (`b:Ref<default>{f32[8]}`)
_REF = re.compile(r"Ref\W*<|Ref\W*\{")


def _modules(*parts: str) -> list[pathlib.Path]:
  out = []
  for part in parts:
    path = PACKAGE / part
    out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
  return out


def _rel(path: pathlib.Path) -> str:
  return str(path.relative_to(PACKAGE))


def _names(node: ast.AST) -> set[str]:
  """The names and attribute names in an expression."""
  return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
          if isinstance(n, (ast.Name, ast.Attribute))}


def _re_calls(tree: ast.AST):
  for node in ast.walk(tree):
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"):
      yield node


def verdict_regexes(source: str) -> list[int]:
  """Lines where a `re.` call is given a verdict (a name or attribute named like one)."""
  return [node.lineno for node in _re_calls(ast.parse(source))
          if any("verdict" in name.lower() for arg in node.args for name in _names(arg))]


def reaches_past_the_row(source: str) -> list[int]:
  """Lines that read a kernel's entry or profile behind its row (`.kernel.x`,
  `.profile.x`, `.device_profile.x`, `.kernel_profile(...)`) or catch SystemExit."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
        and node.value.attr in ("kernel", "profile", "device_profile")):
      found.append(node.lineno)
    elif isinstance(node, ast.Attribute) and node.attr == "kernel_profile":
      found.append(node.lineno)
    elif isinstance(node, ast.ExceptHandler) and node.type is not None:
      kinds = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
      if any(isinstance(k, ast.Name) and k.id == "SystemExit" for k in kinds):
        found.append(node.lineno)
  return sorted(set(found))


def _reads_avals(pattern: str) -> bool:
  try:
    compiled = re.compile(pattern)
  except re.error:
    return False
  if _REF.search(pattern):
    return True
  for text, other in zip(_AVAL_TEXTS, _NOT_AVAL_TEXTS, strict=True):
    m = compiled.search(text)
    if m and "[8,128]" in text[m.start():m.end() + 1] and not compiled.search(other):
      return True
  return False


def aval_parsers(source: str) -> list[int]:
  """Lines that parse an aval from a string: Aval.parse, first_result_aval, or a regular
  expression that reads an array's dims out of an aval's text."""
  found = []
  tree = ast.parse(source)
  readers = [n for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in FILE_READERS]
  allowed = {id(n) for reader in readers for n in ast.walk(reader)}
  for node in ast.walk(tree):
    if isinstance(node, ast.Call) and id(node) not in allowed:
      f = node.func
      name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
      owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
      if (name == "parse" and owner == "Aval") or name == "first_result_aval":
        found.append(node.lineno)
  for node in _re_calls(tree):
    if id(node) in allowed:
      continue
    literal = node.args[0] if node.args else None
    if isinstance(literal, ast.Constant) and isinstance(literal.value, str) \
        and _reads_avals(literal.value):
      found.append(node.lineno)
  return sorted(set(found))


def _violations(check, modules, exempt=()) -> list[str]:
  return [f"{_rel(p)}:{line}" for p in modules if _rel(p) not in exempt
          for line in check(p.read_text())]


# --- the rules -----------------------------------------------------------------------------

def test_no_renderer_splits_a_verdicts_text():
  found = _violations(verdict_regexes, _modules(*RENDERERS))
  assert not found, ("a renderer splits a verdict's text: read the profiler's Verdict "
                     "(profiler/verdict.py) instead:\n" + "\n".join(found))


def test_no_renderer_reaches_past_a_kernels_row():
  found = _violations(reaches_past_the_row, _modules(*RENDERERS))
  assert not found, ("a renderer reads behind a kernel's row or catches SystemExit: put what it "
                     "needs in cli/summary.py's KernelSummary (read files before rendering):\n"
                     + "\n".join(found))


def test_no_aval_is_parsed_from_a_string_but_where_a_file_is_read():
  found = _violations(aval_parsers, _modules("."), exempt=(AVAL_READER, *STILL_PARSED))
  assert not found, ("an aval parsed from text: keep equation_text.Aval typed from where JAX "
                     "gives it (a file's text is read once, in " + AVAL_READER + " or a "
                     "record's upgrade_layout):\n" + "\n".join(found))
  for module, count in STILL_PARSED.items():     # no more of them than listed
    assert len(aval_parsers((PACKAGE / module).read_text())) == count, module


# --- the checkers find a planted violation ----------------------------------------------------

def test_the_checkers_find_planted_violations():
  # the renderers' old verdict split
  assert verdict_regexes('import re\n'
                         'v = re.split(r"\\bheaviest equations\\b", kp.verdict)[0]\n') == [2]
  assert verdict_regexes('import re\nverdict = 1\nx = re.split("; ", verdict)\n') == [3]
  assert verdict_regexes('import re\nx = re.split("; ", line)\n') == []
  # the row's fields, not what is behind them
  assert reaches_past_the_row("x = s.kernel.compile\ny = s.profile.runtime\nz = s.runtime\n") \
      == [1, 2]
  assert reaches_past_the_row("kp = report.kernel_profile(k.label)\n") == [1]
  assert reaches_past_the_row("try:\n  f()\nexcept (OSError, SystemExit):\n  pass\n") == [3]
  assert reaches_past_the_row("try:\n  f()\nexcept RunFileError:\n  pass\n") == []
  # avals parsed from text
  assert aval_parsers("a = Aval.parse(text)\n") == [1]
  assert aval_parsers("a = first_result_aval(e.text)\n") == [1]
  assert aval_parsers('import re\nm = re.search(r"(~?)(\\w+)\\[([\\d,]*)\\]", text)\n') == [2]
  assert aval_parsers('import re\n'
                      'r = re.findall(r"([a-z_]+):Ref<[^>]*>\\{([^}]*)\\}", head)\n') == [2]
  assert aval_parsers('import re\nm = re.search(r"^(\\S+) at (.+):(\\d+)$", text)\n') == []
  assert aval_parsers('import re\nm = re.compile(r"[ \\t]+(?=\\n)")\n') == []
  assert aval_parsers('import re\nm = re.sub(r"\\{[^{}]*\\}", "", fmt)\n') == []
  assert aval_parsers("def upgrade_layout(data):\n  return first_result_aval(data['text'])\n"
                      "a = first_result_aval(t)\n") == [3]
