"""zip says what it expects of its lengths (issue 50, item 6): every `zip(...)` call in
pallas_prof/ passes `strict=`. `strict=True` where the sequences must agree (operands and
their refs, targets and their profiles): a mismatch is then a ValueError at the zip, not
pairs silently dropped and a wrong answer later. `strict=False` only where unequal lengths
are meant, with a comment on the call's lines or the two above saying why. Neighbours
(`zip(x, x[1:])`) are `itertools.pairwise(x)`.

Read from the source with `ast` and `tokenize` (nothing is imported); each check is run on
a planted violation too.
"""
from __future__ import annotations

import ast
import io
import pathlib
import tokenize

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "pallas_prof"
COMMENT_ABOVE = 2     # lines above a strict=False call where its reason may stand


def _comment_lines(source: str) -> set[int]:
  return {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
          if tok.type == tokenize.COMMENT}


def zip_problems(source: str) -> list[str]:
  """'line: what' for each zip call of one module without strict=, or with strict=False
  and no comment near it."""
  comments = _comment_lines(source)
  out = []
  for node in ast.walk(ast.parse(source)):
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "zip"):
      continue
    strict = [k for k in node.keywords if k.arg == "strict"]
    if not strict:
      out.append(f"{node.lineno}: zip without strict=")
    elif isinstance(strict[0].value, ast.Constant) and strict[0].value.value is False and not (
        comments & set(range(node.lineno - COMMENT_ABOVE, node.end_lineno + 1))):
      out.append(f"{node.lineno}: zip(strict=False) without a comment saying why")
  return sorted(out, key=lambda line: int(line.split(':')[0]))


def _package_problems() -> list[str]:
  return [f"pallas_prof/{path.relative_to(PACKAGE).as_posix()}:{problem}"
          for path in sorted(PACKAGE.rglob("*.py")) for problem in zip_problems(path.read_text())]


def test_every_zip_in_the_package_says_strict():
  found = _package_problems()
  assert not found, (
      "zip calls must say strict=True (the lengths must agree) or strict=False with a "
      "comment (unequal lengths are meant):\n" + "\n".join(found))


PLANTED = '''\
def pairs(a, b):
  return list(zip(a, b))


def checked(a, b):
  return list(zip(a, b, strict=True))


def quiet(a, b):
  return [x for x in zip(a, b, strict=False)]


def explained(a, b):
  # strict=False: b is a prefix of a
  return [x for x in zip(a, b, strict=False)]


def nested(a, b, c):
  return dict(zip(a, map(len, zip(b, c, strict=True))))
'''


def test_the_check_finds_planted_zips():
  assert zip_problems(PLANTED) == ["2: zip without strict=",
                                   "10: zip(strict=False) without a comment saying why",
                                   "19: zip without strict="]


def test_a_planted_zip_in_a_package_module_is_found(tmp_path):
  """The walk over the package reads each module: a copy of one with a bare zip appended
  fails it."""
  source = (PACKAGE / "backend/lowering/features/listeners.py").read_text()
  assert zip_problems(source) == []
  planted = source + "\n\ndef _planted(a, b):\n  return zip(a, b)\n"
  assert zip_problems(planted) == [f"{len(planted.splitlines())}: zip without strict="]
