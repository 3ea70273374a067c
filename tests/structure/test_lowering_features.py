"""The lowering's features are contained (issue 42, item 1): each feature is a listener
that keeps its own state, and the rest of the lowering reaches it only through the
listener hooks (backend/lowering/feature_hooks.py).

Three rules, read from the source with `ast` as tests/test_structure.py reads it:
- rules/ and access/ import nothing of features/, and features/ nothing of access/
  (at any depth: an import inside a function counts);
- KernelContext sets no field named for a feature (FEATURE_WORDS), in __init__ or elsewhere;
- no module of the lowering outside features/ reads or sets such a field on a kernel
  context (`kernel.tma`, `ctx.kernel.bounds`): features/ owns that state.
Each rule has a test that plants a violation in a copy of the lowering and sees it found.
"""
from __future__ import annotations

import ast
import pathlib
import shutil

from tests.test_structure import _imports

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOWERING = ("pallas_prof", "backend", "lowering")
# what a feature's state was called when it hung on KernelContext, and the features' names
FEATURE_WORDS = ("bounds", "tma", "probe", "workaround", "scan_form", "unsynced", "barrier",
                 "planning", "sites", "multiples", "descriptor")
# (room that imports, room it must not import)
FORBIDDEN = (("rules", "features"), ("access", "features"), ("features", "access"))


def _lowering_modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
  """Dotted name -> file of every module under root's pallas_prof/backend/lowering."""
  out = {}
  for path in sorted(root.joinpath(*LOWERING).rglob("*.py")):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
      parts = parts[:-1]
    out[".".join(parts)] = path
  return out


def _room(module: str) -> str | None:
  """"rules", "access" or "features" (a folder of the lowering), or None."""
  parts = module.split(".")
  if len(parts) > len(LOWERING) and parts[len(LOWERING)] in ("rules", "access", "features"):
    return parts[len(LOWERING)]
  return None


def room_import_violations(root: pathlib.Path = ROOT) -> list[str]:
  out = []
  for module, path in _lowering_modules(root).items():
    importer = _room(module)
    for target, line in _imports(module, path):
      if not target.startswith(".".join(LOWERING) + "."):
        continue
      if (importer, _room(target)) in FORBIDDEN:
        out.append(f"{path.relative_to(root)}:{line}: {importer}/ imports {target}")
  return out


def _feature_word(name: str) -> str | None:
  return next((w for w in FEATURE_WORDS if w in name.lower()), None)


def context_feature_fields(root: pathlib.Path = ROOT) -> list[str]:
  """KernelContext's fields (self.X set anywhere in the class) named for a feature."""
  path = root.joinpath(*LOWERING, "context.py")
  tree = ast.parse(path.read_text(), str(path))
  out = []
  for cls in ast.walk(tree):
    if not (isinstance(cls, ast.ClassDef) and cls.name == "KernelContext"):
      continue
    for node in ast.walk(cls):
      if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
          isinstance(node.value, ast.Name) and node.value.id == "self" and \
          _feature_word(node.attr):
        out.append(f"{path.relative_to(root)}:{node.lineno}: KernelContext.{node.attr}")
  return out


def _names_a_kernel(node: ast.expr) -> bool:
  """`kernel`, `ctx.kernel`, `self.kernel`: an expression that is a KernelContext."""
  if isinstance(node, ast.Name):
    return node.id == "kernel"
  return isinstance(node, ast.Attribute) and node.attr == "kernel"


def kernel_feature_accesses(root: pathlib.Path = ROOT) -> list[str]:
  """`<kernel>.<feature field>` anywhere in the lowering outside features/."""
  out = []
  for module, path in _lowering_modules(root).items():
    if _room(module) == "features":
      continue
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, ast.Attribute) and _names_a_kernel(node.value) and \
          _feature_word(node.attr):
        out.append(f"{path.relative_to(root)}:{node.lineno}: kernel.{node.attr}")
  return out


def test_rules_and_access_reach_features_only_through_listener_hooks():
  assert room_import_violations() == []


def test_kernel_context_carries_no_feature_state():
  assert context_feature_fields() == []


def test_no_lowering_code_outside_features_touches_a_feature_field():
  assert kernel_feature_accesses() == []


def _copy_of_the_lowering(tmp_path: pathlib.Path) -> pathlib.Path:
  shutil.copytree(ROOT.joinpath(*LOWERING), tmp_path.joinpath(*LOWERING))
  return tmp_path


def _plant(root: pathlib.Path, relative: str, line: str) -> None:
  path = root.joinpath(*LOWERING, relative)
  path.write_text(path.read_text() + "\n" + line + "\n")


def test_the_room_check_finds_planted_imports(tmp_path):
  root = _copy_of_the_lowering(tmp_path)
  assert room_import_violations(root) == []
  _plant(root, "rules/memory.py", "def f():\n  from ..features import tma")
  _plant(root, "access/views.py", "from ..features.tma import note_sum")
  _plant(root, "features/tma.py", "from ..access.refs import RefValue")
  found = room_import_violations(root)
  assert [f.split(": ", 1)[1] for f in found] == [
      "access/ imports pallas_prof.backend.lowering.features.tma",
      "features/ imports pallas_prof.backend.lowering.access.refs",
      "rules/ imports pallas_prof.backend.lowering.features.tma"], found


def test_the_context_check_finds_a_planted_feature_field(tmp_path):
  root = _copy_of_the_lowering(tmp_path)
  path = root.joinpath(*LOWERING, "context.py")
  source = path.read_text()
  anchor = "    self.atomic_refs: set[str] = set()"
  assert anchor in source
  path.write_text(source.replace(anchor, anchor + "\n    self.tma = None\n    self.unsynced = set()"))
  found = context_feature_fields(root)
  assert [f.rsplit(": ", 1)[1] for f in found] == ["KernelContext.tma", "KernelContext.unsynced"]


def test_the_access_check_finds_a_planted_feature_field(tmp_path):
  root = _copy_of_the_lowering(tmp_path)
  _plant(root, "rules/memory.py", "def f(ctx):\n  return ctx.kernel.bounds is not None")
  _plant(root, "dispatch.py", "def g(kernel):\n  kernel.unsynced = set()")
  found = kernel_feature_accesses(root)
  assert sorted(f.rsplit(": ", 1)[1] for f in found) == ["kernel.bounds", "kernel.unsynced"]
