"""One error model. The report reads a KernelError's typed fields, not whatever
attribute an error may have (`getattr(err, ...)`).

Broad catches in the backend's lowering and compiling rooms: each says why it is
broad (a user's own code, Triton's compiler whose failures are data, a thread or a
boundary that must never kill the user's process), and there are no more of them than
the rooms need. A narrow catch names what it expects; a broad one without a reason hides
bugs (one hid TMA planning's failures).

Read from the source with `ast` and `tokenize` (nothing is imported).
"""
from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent.parent / "pallas_prof"
ROOMS = ("backend/lowering", "backend/compiling")
BROAD = {"Exception", "BaseException"}
# the broad catches these rooms hold today, each with its reason beside it; a new one
# raises the cap in the same change, where a reviewer sees it
MAX_BROAD_CATCHES = 11
_NOQA = re.compile(r"noqa(?::\s*[A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*)?")


def _is_broad(handler: ast.ExceptHandler) -> bool:
  kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
  return any(kind is None or (isinstance(kind, ast.Name) and kind.id in BROAD)
             for kind in kinds)


def _comments(source: str) -> dict[int, str]:
  return {tok.start[0]: tok.string.lstrip("#").strip()
          for tok in tokenize.generate_tokens(io.StringIO(source).readline)
          if tok.type == tokenize.COMMENT}


def _says_why(comment: str) -> bool:
  """A reason in words, not a linter's silencing alone."""
  words = re.findall(r"[A-Za-z']+", _NOQA.sub("", comment))
  return len(words) >= 3


def broad_catches(source: str) -> list[tuple[int, bool]]:
  """(line, says why) for each broad catch (`except:`, `except Exception`, `except
  BaseException`, or a tuple holding one): the reason is the comment on its line, or the
  comment lines right below it."""
  comments = _comments(source)
  lines = source.splitlines()
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ExceptHandler) and _is_broad(node):
      said = comments.get(node.lineno, "")
      below = node.lineno
      while below < len(lines) and lines[below].lstrip().startswith("#"):
        said += " " + comments.get(below + 1, "")
        below += 1
      found.append((node.lineno, _says_why(said)))
  return sorted(found)


def _room_sources() -> dict[str, str]:
  return {path.relative_to(PACKAGE).as_posix(): path.read_text()
          for room in ROOMS for path in sorted((PACKAGE / room).rglob("*.py"))}


def test_every_broad_catch_in_lowering_and_compiling_says_why():
  unexplained = [f"pallas_prof/{name}:{line}" for name, source in _room_sources().items()
                 for line, why in broad_catches(source) if not why]
  assert unexplained == [], (
      "a broad catch without a reason (catch what you expect, or say in a comment on the "
      f"`except` line why anything may fail here): {unexplained}")


def test_the_rooms_hold_no_more_broad_catches_than_the_cap():
  count = sum(len(broad_catches(source)) for source in _room_sources().values())
  assert count <= MAX_BROAD_CATCHES, (
      f"{count} broad catches in {', '.join(ROOMS)}, the cap is {MAX_BROAD_CATCHES}: catch "
      "the exceptions you expect (or raise the cap, with the reason beside the catch)")


PLANTED = '''
def f():
  try:
    g()
  except Exception:
    pass
  try:
    g()
  except Exception:  # noqa: BLE001
    pass
  try:
    g()
  except (OSError, BaseException):  # noqa: BLE001 - the user's callback may raise anything
    pass
  try:
    g()
  except:
    # a thread whose failure only loses a head start
    pass
  try:
    g()
  except (OSError, ValueError):
    pass
'''


def test_the_catch_check_finds_planted_catches():
  assert broad_catches(PLANTED) == [(5, False), (9, False), (13, True), (17, True)]


def test_the_catch_checks_fail_on_a_planted_room(tmp_path, monkeypatch):
  room = tmp_path / "backend" / "lowering"
  room.mkdir(parents=True)
  (room / "planted.py").write_text(PLANTED)
  monkeypatch.setattr(__import__(__name__, fromlist=["_"]), "PACKAGE", tmp_path)
  with pytest.raises(AssertionError, match=r"planted.py:5"):
    test_every_broad_catch_in_lowering_and_compiling_says_why()
  monkeypatch.setattr(__import__(__name__, fromlist=["_"]), "MAX_BROAD_CATCHES", 3)
  with pytest.raises(AssertionError, match="4 broad catches"):
    test_the_rooms_hold_no_more_broad_catches_than_the_cap()


REPORT = "instrument/errors.py"


def duck_typed_reads(source: str) -> list[int]:
  """Lines that read an error's field with getattr (the error: a name starting `err`)."""
  return sorted(node.lineno for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and node.args
                and isinstance(node.args[0], ast.Name) and node.args[0].id.startswith("err"))


def test_the_report_reads_the_typed_fields():
  lines = duck_typed_reads((PACKAGE / REPORT).read_text())
  assert lines == [], (f"pallas_prof/{REPORT} reads an error's field with getattr at lines "
                       f"{lines}: read KernelError's field (backend/errors.py), adding it there")


def test_the_field_check_finds_a_planted_getattr():
  planted = "def f(err, rule):\n  a = getattr(rule, 'name', None)\n  return getattr(err, 'hint', None)\n"
  assert duck_typed_reads(planted) == [3]
