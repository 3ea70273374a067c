"""One options object: a kernel keeps its LoweringOptions, not copies of their fields,
and the artifacts' and options' fields say what they hold (no `Any`).

Read from the source with `ast` (nothing is imported), as tests/test_structure.py
reads it; each rule has a test that plants a violation in a copy of the source.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

BACKEND = pathlib.Path(__file__).resolve().parents[2] / "pallas_prof" / "backend"
ARTIFACTS = BACKEND / "artifacts.py"
OPTIONS = BACKEND / "options.py"

# GeneratedKernel fields that share a name with one of LoweringOptions' without copying
# it, and why
NOT_COPIES = {
    "workarounds": "the notes of what the workaround plan changed (text), not the plan",
}


def _classes(source: str) -> dict[str, ast.ClassDef]:
  return {n.name: n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)}


def _fields(cls: ast.ClassDef) -> dict[str, ast.expr]:
  """A dataclass's fields, name -> annotation (ClassVars are no fields)."""
  return {n.target.id: n.annotation for n in cls.body
          if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
          and not ast.unparse(n.annotation).startswith("ClassVar")}


_TYPING = {"Any", "ClassVar", "Optional", "Union"}


def _record_types(annotations) -> set[str]:
  """The classes (capitalised names) the annotations name: an options field's record."""
  return {n.id for a in annotations for n in ast.walk(a)
          if isinstance(n, ast.Name) and n.id[:1].isupper() and n.id not in _TYPING}


def copied_options(artifacts_source: str, options_source: str) -> list[str]:
  """GeneratedKernel's fields that copy one of LoweringOptions': one of the same name (but
  those NOT_COPIES explains), or one holding the record an options field holds."""
  options = _fields(_classes(options_source)["LoweringOptions"])
  kernel = _fields(_classes(artifacts_source)["GeneratedKernel"])
  records = _record_types(options.values())
  found = [f"GeneratedKernel.{name}: LoweringOptions has a field of that name"
           for name in kernel if name in options and name not in NOT_COPIES]
  found += [f"GeneratedKernel.{name}: holds a {', '.join(sorted(held))}, as LoweringOptions "
            "does" for name, annotation in kernel.items()
            for held in [_record_types([annotation]) & records] if held]
  return found


def test_a_generated_kernel_copies_no_option():
  found = copied_options(ARTIFACTS.read_text(), OPTIONS.read_text())
  assert not found, ("GeneratedKernel keeps its LoweringOptions as `options`; read them "
                     "there (options.option_property) instead of copying:\n" + "\n".join(found))


_GK = "\nclass GeneratedKernel(Saved):\n"


@pytest.mark.parametrize("planted, found", [
    ("  num_warps: int = 4\n",
     "GeneratedKernel.num_warps: LoweringOptions has a field of that name"),
    ("  plan: WorkaroundPlan | None = None\n",
     "GeneratedKernel.plan: holds a WorkaroundPlan, as LoweringOptions does"),
])
def test_the_copy_check_finds_a_planted_copy(planted, found):
  """Planted in a copy of artifacts.py, after GeneratedKernel's first field."""
  before, cls, body = ARTIFACTS.read_text().partition(_GK)
  assert cls and "\n  name: str\n" in body
  planted_source = before + cls + body.replace("\n  name: str\n", "\n  name: str\n" + planted, 1)
  assert copied_options(planted_source, OPTIONS.read_text()) == [found]


def _is_any(annotation: ast.expr) -> bool:
  """Whether the field itself is `Any`: Any, Any | None, Optional[Any], Union[..., Any].
  A container of Any values (Triton's metadata: Mapping[str, Any]) says what it is."""
  if isinstance(annotation, ast.Name):
    return annotation.id == "Any"
  if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
    return _is_any(ast.parse(annotation.value, mode="eval").body)
  if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
    return _is_any(annotation.left) or _is_any(annotation.right)
  if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) in (
      "Optional", "Union", "typing.Optional", "typing.Union"):
    inner = annotation.slice
    return any(_is_any(e) for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner]))
  return False


def any_fields(source: str) -> list[str]:
  return [f"{cls.name}.{name}: {ast.unparse(annotation)}"
          for cls in _classes(source).values()
          for name, annotation in _fields(cls).items() if _is_any(annotation)]


@pytest.mark.parametrize("path", [ARTIFACTS, OPTIONS], ids=lambda p: p.name)
def test_no_field_of_the_artifacts_or_options_is_any(path):
  found = any_fields(path.read_text())
  assert not found, (f"{path.name}: fields typed Any (name the record they hold):\n"
                     + "\n".join(found))


@pytest.mark.parametrize("annotation, found", [
    ("Any", True), ("Any | None", True), ("None | Any", True), ("Optional[Any]", True),
    ("typing.Union[int, Any]", True), ('"Any"', True),
    ("Mapping[str, Any]", False), ("ProbeLayout | None", False), ("int", False),
])
def test_the_any_check_finds_a_planted_field(annotation, found):
  source = ("@dataclasses.dataclass(frozen=True)\nclass Planted:\n"
            f"  held: {annotation} = None\n  SCHEMA: ClassVar[Any] = None\n")
  expected = f"Planted.held: {ast.unparse(ast.parse(annotation, mode='eval').body)}"
  assert any_fields(source) == ([expected] if found else [])


def test_the_any_check_reads_the_real_files_with_a_planted_field():
  """Planted in a copy of options.py: LoweringOptions' probes typed Any again."""
  source = OPTIONS.read_text()
  planted = source.replace("  probes: bool | ProbeOptions | None = None",
                           "  probes: Any = None")
  assert planted != source
  assert any_fields(planted) == ["LoweringOptions.probes: Any"]
