"""One Triton seam (issue 50, item 3): what a new Triton release may rename is written once.

- Triton's compile entry points (ASTSource, GPUTarget, triton.compile) are used in
  backend/compiling/triton_compat.py only: everyone else calls its compile_source() and
  gpu_target();
- Triton's version is read there only (triton_version(), triton_release());
- the Triton-language names the generated source spells (`tl.where`, `tl.float32`, ...)
  are written in backend/lowering/triton_names.py only: the lowering builds its text
  through it.

Read from the source with `ast` (nothing is imported); docs/compiling.md, "A new Triton
release", says what each rule buys. Each check is run on a planted violation too.
"""
from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "pallas_prof"
COMPAT = "backend/compiling/triton_compat.py"
NAMES = "backend/lowering/triton_names.py"
ENTRY_POINTS = {"ASTSource", "GPUTarget"}
# a Triton-language name as the generated source spells it (not `x.tl.y`, not `ctl.y`),
# or the start of one built at run time (f"tl.{kind}(...)": a text part ending in `tl.`)
EMITTED_NAME = re.compile(r"(?<![\w.])tl\.(?:[A-Za-z_]|$)")


def _sources(root: pathlib.Path = PACKAGE) -> dict[str, str]:
  return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}


def _is_triton(node) -> bool:
  """`triton`, or `__import__("triton")`."""
  return (isinstance(node, ast.Name) and node.id == "triton") or (
      isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
      and node.func.id == "__import__" and node.args
      and isinstance(node.args[0], ast.Constant) and node.args[0].value == "triton")


def compile_entry_uses(source: str) -> list[str]:
  """'line: what' for each use of Triton's compile entry points in one module."""
  out = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.ImportFrom):
      for alias in node.names:
        if alias.name in ENTRY_POINTS or (node.module == "triton" and alias.name == "compile"):
          out.append(f"{node.lineno}: imports {alias.name} from {node.module}")
    elif isinstance(node, ast.Attribute):
      if node.attr in ENTRY_POINTS:
        out.append(f"{node.lineno}: uses .{node.attr}")
      elif node.attr == "compile" and _is_triton(node.value):
        out.append(f"{node.lineno}: calls triton.compile")
  return out


def version_reads(source: str) -> list[str]:
  """'line: what' for each read of Triton's version in one module: `triton.__version__`,
  `getattr(triton, "__version__")`, `metadata.version("triton")`."""
  out = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Attribute) and node.attr == "__version__" and _is_triton(node.value):
      out.append(f"{node.lineno}: reads triton.__version__")
    elif isinstance(node, ast.Call) and node.args:
      func = node.func
      name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
      first = node.args[0]
      if name == "getattr" and len(node.args) > 1 and _is_triton(first) and isinstance(
          node.args[1], ast.Constant) and node.args[1].value == "__version__":
        out.append(f"{node.lineno}: reads triton.__version__ through getattr")
      elif name in ("version", "distribution") and isinstance(first, ast.Constant) \
          and first.value == "triton":
        out.append(f"{node.lineno}: reads the triton distribution's version")
  return out


def _docstrings(tree) -> set[int]:
  out = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
      body = node.body
      if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
          and isinstance(body[0].value.value, str):
        out.add(id(body[0].value))
  return out


def emitted_names(source: str) -> list[str]:
  """'line: text' for each string (f-strings' text parts included; docstrings, which
  describe and emit nothing, and comments apart) that spells a `tl.` name."""
  tree = ast.parse(source)
  docs = _docstrings(tree)
  return sorted({f"{node.lineno}: {node.value.strip()[:60]!r}" for node in ast.walk(tree)
                 if isinstance(node, ast.Constant) and isinstance(node.value, str)
                 and id(node) not in docs and EMITTED_NAME.search(node.value)})


def _offenders(sources: dict[str, str], check, allowed: str) -> list[str]:
  return [f"pallas_prof/{path}:{found}" for path, source in sources.items()
          if path != allowed for found in check(source)]


# --- the rules, on the package -------------------------------------------------------------

def test_only_triton_compat_uses_tritons_compile_entry_points():
  found = _offenders(_sources(), compile_entry_uses, COMPAT)
  assert not found, ("Triton's compile entry points outside triton_compat.py (call its "
                     "compile_source/gpu_target):\n" + "\n".join(found))


def test_only_triton_compat_reads_tritons_version():
  found = _offenders(_sources(), version_reads, COMPAT)
  assert not found, ("Triton's version read outside triton_compat.py (ask its "
                     "triton_version()/triton_release()):\n" + "\n".join(found))


def test_only_the_names_module_spells_a_triton_language_name():
  found = _offenders(_sources(), emitted_names, NAMES)
  assert not found, ("`tl.` names written outside backend/lowering/triton_names.py (emit "
                     "them through it: f\"{tl.where}(...)\"):\n" + "\n".join(found))


def test_the_checks_see_the_seam_itself():
  """The one place each rule allows is where the checks find what they look for: they
  read real code, not only the planted lines below."""
  compat = (PACKAGE / COMPAT).read_text()
  assert {"imports GPUTarget from triton.backends.compiler",
          "imports ASTSource from triton.compiler", "calls triton.compile"} <= {
      f.split(": ", 1)[1] for f in compile_entry_uses(compat)}
  assert any("distribution's version" in f for f in version_reads(compat))
  assert len(emitted_names((PACKAGE / NAMES).read_text())) > 40


# --- each check finds a planted violation ----------------------------------------------------

@pytest.mark.parametrize("planted", [
    "from triton.compiler import ASTSource\n",
    "def _f():\n  from triton.backends.compiler import GPUTarget as T\n  return T\n",
    "import triton\n\ndef _f(src, t):\n  return triton.compile(src, target=t)\n",
    "import triton.compiler\n\ndef _f(fn):\n  return triton.compiler.ASTSource(fn=fn, signature={})\n",
    "from triton import compile as triton_compile\n",
])
def test_the_entry_point_check_finds_a_planted_use(planted):
  path = "profiler/timing/own_kernels.py"
  sources = {path: (PACKAGE / path).read_text() + "\n\n" + planted}
  found = _offenders(sources, compile_entry_uses, COMPAT)
  assert found and all(f.startswith(f"pallas_prof/{path}:") for f in found)
  assert _offenders({path: (PACKAGE / path).read_text()}, compile_entry_uses, COMPAT) == []


@pytest.mark.parametrize("planted", [
    "import triton\nVERSION = triton.__version__\n",
    "def _v():\n  return __import__('triton').__version__\n",
    "def _v():\n  import triton\n  return getattr(triton, '__version__', None)\n",
    "from importlib import metadata\nVERSION = metadata.version('triton')\n",
])
def test_the_version_check_finds_a_planted_read(planted):
  path = "tune/blocks.py"
  sources = {path: (PACKAGE / path).read_text() + "\n\n" + planted}
  found = _offenders(sources, version_reads, COMPAT)
  assert len(found) == 1 and found[0].startswith(f"pallas_prof/{path}:")


@pytest.mark.parametrize("planted", [
    'def _emit(b, x):\n  b.emit(f"tl.debug_barrier()  # {x}")\n',
    'def _emit(x):\n  return f"{x}.to(tl.float32)"\n',
    '_DTYPE = "tl.int32"\n',
    'def _emit(kind, x):\n  return f"tl.{kind}({x}, axis=0)"\n',
])
def test_the_names_check_finds_a_planted_emission(planted):
  path = "backend/lowering/rules/misc.py"
  sources = {path: (PACKAGE / path).read_text() + "\n\n" + planted}
  found = _offenders(sources, emitted_names, NAMES)
  assert len(found) == 1 and found[0].startswith(f"pallas_prof/{path}:")


def test_the_names_check_leaves_docstrings_and_comments_alone():
  source = ('def _f(b):\n  """Emits tl.debug_barrier()."""\n'
            '  b.emit(f"{tl.debug_barrier}()")   # tl.debug_barrier, through the names\n')
  assert emitted_names(source) == []
