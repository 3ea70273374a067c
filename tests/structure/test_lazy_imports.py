"""Lazy imports earn their place (issue 42, item 8): an import of a pallas_prof module
inside a function stays there only if moving it to the module's top-level imports would

(a) make the module load, when it is imported, a package from outside the standard
    library (JAX, Triton, NumPy, rich, OpenTelemetry...) that it does not load already:
    the import buys start-up time (the CLI's commands that read a saved run, and
    `import pallas_prof`, load no JAX); or
(b) close a circle of imports that run when modules are imported; or
(c) it is listed in EXCEPTIONS below, with its reason.

Anything else is hoisted. What a module loads when imported is read from the source
with `ast` (nothing is imported): its top-level imports (not those under
`if TYPE_CHECKING:`, nor inside functions), followed through pallas_prof's modules, and
the packages above each module imported (importing a.b.c runs a/__init__ and a/b/__init__).
An import under a top-level `if` is neither: it runs only when its condition holds.
"""
from __future__ import annotations

import ast
import copy
import functools
import io
import pathlib
import sys
import tokenize

from tests.test_structure import MODULES, PACKAGE, _imports

ROOT = "pallas_prof"
# why an import stays inside its function though the rule above does not ask for it, by
# file (all its imports of the package) or "file -> module". Keep it short.
_RUN_BY_THE_WORKER = ("the compile worker runs this file by its path, without the package: "
                      "an import of the package works only in what the package's side calls")
_HELP = ("start-up of --help: cli/main.py builds every command's parser, so `pallas-prof --help` "
         "imports this module; the import adds a part of the package (several modules) that "
         "only the command itself needs")
_TUNED_ONLY = ("the first GPU lowering imports tune/params.py (the warm-up thread ahead of it): "
               "the profiler's replay modules load only when a kernel is tuned")
EXCEPTIONS: dict[str, str] = {
    "backend/compiling/worker_main.py": _RUN_BY_THE_WORKER,
    "backend/compiling/triton_run.py": _RUN_BY_THE_WORKER,
    "backend/compiling/triton_compat.py": _RUN_BY_THE_WORKER,
    "backend/compiling/ptx_rewrites.py": _RUN_BY_THE_WORKER,
    "backend/compiling/libdevice_link.py": _RUN_BY_THE_WORKER,
    "backend/compiling/warmup.py -> pallas_prof.backend.lowering.rules":
        "the warm-up imports the lowering rules in its own thread while the compile worker "
        "boots: that head start is the import's purpose",
    "cli/main.py -> pallas_prof.cli.run_directory": _HELP,
    "cli/main.py -> pallas_prof.cli.report": _HELP,
    "cli/advise.py -> pallas_prof.backend.kernel_registry": _HELP,
    "cli/advise.py -> pallas_prof.advice.api": _HELP,
    "cli/tune.py -> pallas_prof.tune.validate": _HELP,
    "cli/tune.py -> pallas_prof.tune.tuned_file": _HELP,
    "cli/targets/view.py -> pallas_prof.advice.engine":
        "`pallas-prof show` imports this view for every kernel; only --target's table reads "
        "the advice rules, and hoisted they would load the advice package with every show",
    "advice/api.py -> pallas_prof.profiler":
        "profile() comes from the profiler package's __getattr__ (PEP 562), which this rule "
        "reads as the package alone: hoisted, it would load profiler/api.py, every room of "
        "the profiler and NumPy even where the caller hands in a profile already taken",
    "instrument/errors.py -> pallas_prof.backend.lowering.rules":
        "guarded: an error's report still renders where the lowering rules fail to import; "
        "hoisted, that failure would stop instrument/ (the spans) from importing at all",
    "tune/params.py -> pallas_prof.profiler.launchspec": _TUNED_ONLY,
    "tune/params.py -> pallas_prof.profiler.timing.replayer": _TUNED_ONLY,
}


def _import_lines_under(tree: ast.AST, kinds: tuple[type, ...]) -> set[int]:
  """Lines of the import statements somewhere under a node of one of `kinds`."""
  lines: set[int] = set()
  for node in ast.walk(tree):
    if isinstance(node, kinds):
      lines |= {n.lineno for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))}
  return lines


def _is_ours(target: str) -> bool:
  return target.split(".")[0] == ROOT


def _third_party(target: str) -> bool:
  top = target.split(".")[0]
  return bool(top) and top != ROOT and top != "__future__" and top not in sys.stdlib_module_names


def _ancestors(module: str) -> list[str]:
  parts = module.split(".")
  return [".".join(parts[:i]) for i in range(1, len(parts))]


def _known(target: str, modules) -> str:
  """The module an import loads: the target, or the nearest package above a name that
  is no module (`from .x import y` where y is a function)."""
  while target and target not in modules:
    target = target.rpartition(".")[0]
  return target


class ImportTime:
  """What each module of a tree loads when it is imported."""

  def __init__(self, modules: dict[str, pathlib.Path]):
    self.modules = dict(modules)
    self.top: dict[str, set[str]] = {}        # module -> pallas_prof modules it imports at load
    self.packages: dict[str, set[str]] = {}   # module -> outside packages it imports at load
    self.lazy: dict[str, list[tuple[str, int]]] = {}
    for module, path in modules.items():
      self._read(module, path)

  def _read(self, module: str, path: pathlib.Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    inside = _import_lines_under(tree, (ast.FunctionDef, ast.AsyncFunctionDef))
    # an import under a top-level `if` (PALLAS_PROF_TRACE=1's tracing) runs only when
    # asked: it is not what importing the module loads, nor a lazy import to judge
    maybe = _import_lines_under(tree, (ast.If,)) - inside
    self.top[module], self.packages[module], self.lazy[module] = set(), set(), []
    for target, line in _imports(module, path):
      if _is_ours(target):
        target = _known(target, self.modules)
        if line in inside:
          self.lazy[module].append((target, line))
        elif target and target != module and line not in maybe:
          self.top[module].add(target)
      elif _third_party(target) and line not in inside | maybe:
        self.packages[module].add(target.split(".")[0])

  def with_file(self, module: str, path: pathlib.Path) -> "ImportTime":
    """This tree with `module` read from `path` (a planted copy), the rest read once."""
    other = copy.copy(self)
    other.modules = {**self.modules, module: path}
    other.top, other.packages, other.lazy = dict(self.top), dict(self.packages), dict(self.lazy)
    other._read(module, path)
    return other

  def loads(self, start: str, loaded: frozenset[str] = frozenset()) -> set[str]:
    """The pallas_prof modules importing `start` runs, given that `loaded` are in
    sys.modules already (their packages above are not imported again)."""
    seen, todo = set(), [start]
    while todo:
      module = todo.pop()
      if module in seen or module not in self.modules:
        continue
      seen.add(module)
      todo += [a for a in _ancestors(module) if a not in loaded]
      todo += sorted(self.top[module])
    return seen

  @functools.cache
  def outside_packages(self, module: str) -> frozenset[str]:
    return frozenset(p for m in self.loads(module) for p in self.packages[m])

  def verdict(self, module: str, target: str) -> str | None:
    """Why `module` may import `target` inside a function (None: it should not)."""
    added = self.outside_packages(target) - self.outside_packages(module)
    if added:
      return "(a) start-up: would load " + ", ".join(sorted(added))
    if module in self.loads(target, frozenset(_ancestors(module))):
      return f"(b) circle: {target} loads {module} when imported"
    for key in (self.file(module), f"{self.file(module)} -> {target}"):
      if key in EXCEPTIONS:
        return "(c) listed: " + EXCEPTIONS[key]
    return None

  def file(self, module: str) -> str:
    return self.modules[module].as_posix().rpartition(f"/{ROOT}/")[2]

  def unjustified(self) -> dict[str, list[str]]:
    """file -> 'pallas_prof/file:line: imports X inside a function', for each lazy import
    the rule does not justify."""
    out: dict[str, list[str]] = {}
    for module in sorted(self.lazy):
      for target, line in sorted(set(self.lazy[module]), key=lambda t: (t[1], t[0])):
        if self.verdict(module, target) is None:
          out.setdefault(self.file(module), []).append(
              f"{ROOT}/{self.file(module)}:{line}: imports {target} inside a function")
    return out


@functools.cache
def _package_tree() -> ImportTime:
  return ImportTime(MODULES)


def test_every_lazy_import_buys_start_up_time_or_breaks_a_circle():
  found = [line for lines in _package_tree().unjustified().values() for line in lines]
  assert not found, (
      "imports inside functions that neither keep a package from loading at import time "
      "nor break an import circle: move them to the module's top-level imports (or list "
      "the file in EXCEPTIONS with the reason):\n" + "\n".join(found))


def _planted(tmp_path, relative: str, source: str) -> tuple[str, pathlib.Path]:
  """A copy of pallas_prof/`relative` with `source` appended, and its module name."""
  module = ROOT + "." + relative[:-3].replace("/", ".")
  path = tmp_path / ROOT / relative
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(MODULES[module].read_text() + "\n\n" + source)
  return module, path


def test_the_rule_finds_a_planted_lazy_import(tmp_path):
  """cli/processes.py loads rich already; pallas_prof.serial loads nothing more."""
  module, path = _planted(tmp_path, "cli/processes.py",
                          "def _planted(x):\n  from ..serial import to_json\n  return to_json(x)\n")
  line = len(path.read_text().splitlines()) - 1
  found = _package_tree().with_file(module, path).unjustified()
  assert f"pallas_prof/cli/processes.py:{line}: imports pallas_prof.serial inside a function" \
      in found["cli/processes.py"]


def test_a_lazy_import_that_keeps_jax_out_is_justified(tmp_path):
  """settings.py loads the standard library alone: backend/compat.py would bring JAX."""
  module, path = _planted(tmp_path, "settings.py",
                          "def _planted():\n  from .backend import compat\n  return compat\n")
  tree = _package_tree().with_file(module, path)
  assert "jax" in tree.verdict(module, "pallas_prof.backend.compat")
  assert "settings.py" not in tree.unjustified()


def test_a_lazy_import_that_breaks_a_circle_is_justified(tmp_path):
  (tmp_path / ROOT).mkdir()
  files = {"": "", ".first": "from .second import g\n",
           ".second": "def g():\n  from .first import f\n  return f\n"}
  modules = {}
  for name, source in files.items():
    path = tmp_path / ROOT / ((name[1:] + ".py") if name else "__init__.py")
    path.write_text(source)
    modules[ROOT + name] = path
  tree = ImportTime(modules)
  assert tree.verdict(ROOT + ".second", ROOT + ".first").startswith("(b) circle")
  assert tree.unjustified() == {}


def test_the_warm_up_thread_and_the_worker_files_are_the_listed_exceptions():
  tree = _package_tree()
  assert tree.verdict("pallas_prof.backend.compiling.warmup",
                      "pallas_prof.backend.lowering.rules").startswith("(c)")
  listed = {key.split(" -> ")[0] for key in EXCEPTIONS}
  assert all((PACKAGE / file).exists() for file in listed), listed


def _needless_exceptions(tree: ImportTime, exceptions: dict[str, str]) -> list[str]:
  """The "file -> module" entries that name no import inside a function of the file, or one
  the rule keeps without them (start-up or circle): a hoisted import leaves no entry behind."""
  by_file = {tree.file(module): module for module in tree.modules}
  out = []
  for key in exceptions:
    file, _, target = key.partition(" -> ")
    module = by_file.get(file)
    lazy = {t for t, _ in tree.lazy.get(module, [])}
    if target and (target not in lazy or tree.verdict(module, target)[:3] in ("(a)", "(b)")):
      out.append(key)
  return out


def test_each_listed_import_is_still_lazy_and_needs_its_entry():
  assert _needless_exceptions(_package_tree(), EXCEPTIONS) == []


def test_a_hoisted_or_start_up_import_is_a_needless_entry():
  stale = {"cli/main.py -> pallas_prof.cli.tune": "hoisted: no longer inside a function",
           "settings.py -> pallas_prof.backend.compat": "not imported by settings.py at all",
           "cli/main.py -> pallas_prof.cli.run": "kept by the rule: run.py loads JAX"}
  assert sorted(_needless_exceptions(_package_tree(), stale)) == sorted(stale)


# --- each lazy import says why, where it stands (issue 50, item 6) --------------------------
# An import inside a function carries its reason in a comment on its line or the line above
# ("# lazy: jax is slow to import and `pallas-prof --help` must not wait for it", "# lazy:
# breaks the circle X -> Y"); a run of imports, one right after the other, shares the
# comment above its first. The rule above says whether a reason exists for the package's own
# modules; this one that the reader is told it at the import, for every import.

def _comment_lines(source: str) -> set[int]:
  return {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(source).readline)
          if tok.type == tokenize.COMMENT}


def unexplained_lazy_imports(source: str) -> list[int]:
  """The lines of the imports inside functions of one module that no comment explains."""
  comments = _comment_lines(source)
  tree = ast.parse(source)
  out, seen = set(), set()
  for function in ast.walk(tree):
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
      continue
    for block in ast.walk(function):
      for body in (getattr(block, f, None) for f in ("body", "orelse", "finalbody")):
        if not isinstance(body, list):
          continue
        run_start = None
        for i, node in enumerate(body):
          if not isinstance(node, (ast.Import, ast.ImportFrom)):
            run_start = None
            continue
          follows = i and isinstance(body[i - 1], (ast.Import, ast.ImportFrom)) \
              and body[i - 1].end_lineno == node.lineno - 1
          run_start = run_start if follows and run_start is not None else node.lineno
          explained = set(range(node.lineno - 1, node.end_lineno + 1)) | {run_start - 1}
          if node.lineno not in seen and not comments & explained:
            out.add(node.lineno)
          seen.add(node.lineno)
  return sorted(out)


def test_every_lazy_import_says_why():
  found = [f"pallas_prof/{path.relative_to(PACKAGE).as_posix()}:{line}"
           for path in sorted(PACKAGE.rglob("*.py"))
           for line in unexplained_lazy_imports(path.read_text())]
  assert not found, (
      "imports inside functions without a comment saying why they are there (on the line or "
      "the line above: '# lazy: ...'), or move them to the module's top:\n" + "\n".join(found))


PLANTED = '''\
import os


def explained():
  # lazy: jax is slow to import
  import jax
  import jax.numpy as jnp
  return jax, jnp


def on_its_line():
  from . import cycle  # lazy: breaks the circle cycle -> here
  return cycle


def bare(x):
  y = x + 1
  import numpy as np
  return np.asarray(y)


def after_a_statement():
  import triton  # lazy: keeps triton out of the import
  x = 1
  import numpy
  if x:
    import json
    return json, numpy, triton
'''


def test_the_reason_check_finds_planted_imports():
  assert unexplained_lazy_imports(PLANTED) == [18, 25, 27]


def test_a_planted_import_in_a_package_module_is_found():
  source = (PACKAGE / "cli/main.py").read_text()
  assert unexplained_lazy_imports(source) == []
  planted = source + "\n\ndef _planted():\n  from .report import RunReport\n  return RunReport\n"
  assert unexplained_lazy_imports(planted) == [len(planted.splitlines()) - 1]
