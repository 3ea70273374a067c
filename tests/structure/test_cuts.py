"""Cuts at seams (issue 42, item 8): the rules a reader can check by reading.

- zip: where lengths must agree, `zip(..., strict=True)` says so and a mismatch raises
  instead of dropping the tail. In the rooms listed every zip names `strict` (True, or
  False where uneven lengths are meant); elsewhere the count of zips that do not may only
  fall.
- bench/, tests/ and testkit/: bench and tests import testkit (the fuzzer, the helpers),
  never each other, and testkit neither; the tests of bench's tools live in bench/tests/
  (tests/structure/test_bench_direction.py).

Read from the source with `ast` (nothing is imported).
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "pallas_prof"
STRICT_ZIP_ROOMS = ("backend/running", "backend/compiling", "backend/lowering/rules", "tune")
# its text is generated code: `pallas-prof show --eject` copies it verbatim into the program
# it writes (cli/eject.py), which must stay as it was
EMITTED_VERBATIM = {"backend/running/interpreter_reductions.py"}
# zips elsewhere in the package that do not name `strict` yet (lowering features and the
# CLI's renderers were being reworked beside this change): the count may only fall
MAX_ZIPS_WITHOUT_STRICT = 49
_THIS = __import__(__name__, fromlist=["_"])     # the checks read its globals, the tests plant


def zips_without_strict(source: str) -> list[int]:
  return sorted(node.lineno for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "zip" and not any(k.arg == "strict" for k in node.keywords))


def _sources(root: pathlib.Path) -> dict[str, str]:
  return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}


def test_zips_in_the_strict_rooms_say_whether_lengths_must_agree():
  loose = [f"pallas_prof/{room}/{name}:{line}" for room in STRICT_ZIP_ROOMS
           for name, source in _sources(PACKAGE / room).items()
           if f"{room}/{name}" not in EMITTED_VERBATIM
           for line in zips_without_strict(source)]
  assert loose == [], ("zip without strict= (strict=True where the lengths must agree, "
                       f"strict=False where uneven lengths are meant): {loose}")


def test_zips_without_strict_elsewhere_only_fall():
  count = sum(len(zips_without_strict(s)) for s in _sources(PACKAGE).values())
  assert count <= MAX_ZIPS_WITHOUT_STRICT, (
      f"{count} zip calls without strict= in pallas_prof, the cap is "
      f"{MAX_ZIPS_WITHOUT_STRICT}: say strict=True where lengths must agree")


def test_the_zip_check_finds_planted_zips(tmp_path, monkeypatch):
  planted = ("pairs = list(zip(a, b))\n"
             "same = list(zip(a, b, strict=True))\n"
             "shifted = [y - x for x, y in zip(a, a[1:], strict=False)]\n"
             "more = dict(zip(k, v))\n")
  assert zips_without_strict(planted) == [1, 4]
  room = tmp_path / "tune"
  room.mkdir()
  (room / "planted.py").write_text(planted)
  monkeypatch.setattr(_THIS, "PACKAGE", tmp_path)
  with pytest.raises(AssertionError, match=r"tune/planted.py:1"):
    test_zips_in_the_strict_rooms_say_whether_lengths_must_agree()
  monkeypatch.setattr(_THIS, "MAX_ZIPS_WITHOUT_STRICT", 1)
  with pytest.raises(AssertionError, match="2 zip calls"):
    test_zips_without_strict_elsewhere_only_fall()
