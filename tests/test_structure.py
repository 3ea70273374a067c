"""The package's shape: no import cycle, modules small enough to read in one
sitting, folders small enough to find one's way in, backend/'s rooms importing along
the data flow, no OpenTelemetry under backend/, JAX's internals through compat/ only.

Read from the source with `ast` (nothing is imported), so a violation is
found whether or not the code path that would import it runs.
"""
from __future__ import annotations

import ast
import io
import os
import pathlib
import re
import tokenize

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "pallas_prof"

def _modules() -> dict[str, pathlib.Path]:
  """Dotted module name -> file, for every module of the package."""
  out = {}
  for path in sorted(PACKAGE.rglob("*.py")):
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
      parts = parts[:-1]
    out[".".join(parts)] = path
  return out


MODULES = _modules()


def _package_of(module: str, path: pathlib.Path) -> str:
  return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str, path: pathlib.Path) -> list[tuple[str, int]]:
  """(imported module, line) for every import statement in the file, at any
  depth (an import inside a function is still a dependency: it only moves the
  cycle to run time)."""
  tree = ast.parse(path.read_text(), str(path))
  package = _package_of(module, path)
  out = []
  for node in _run_time_nodes(tree):
    if isinstance(node, ast.Import):
      out += [(alias.name, node.lineno) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      if node.level:
        base = package.split(".")
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
      else:
        target = node.module or ""
      for alias in node.names:
        sub = f"{target}.{alias.name}"
        # `from pkg import submodule` depends on the submodule, not on pkg's __init__
        out.append((sub if sub in MODULES else target, node.lineno))
  return out


def _run_time_nodes(tree):
  """Every node of the tree but those under `if TYPE_CHECKING:` (imports only a type
  checker follows: they never run, so they tie nothing at run time)."""
  stack = [tree]
  while stack:
    node = stack.pop()
    yield node
    if isinstance(node, ast.If) and _is_type_checking(node.test):
      stack.extend(node.orelse)
      continue
    stack.extend(ast.iter_child_nodes(node))


def _is_type_checking(test) -> bool:
  return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
      (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _graph() -> dict[str, set[str]]:
  graph = {}
  for module, path in MODULES.items():
    graph[module] = {target for target, _ in _imports(module, path)
                     if target in MODULES and target != module}
  return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan)."""
  index, low, on_stack, stack, out = {}, {}, set(), [], []
  counter = [0]

  def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        out.append(sorted(component))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return out


def test_the_import_graph_sees_imports():
  """The checks below are only as good as the graph: it must see the imports
  a reader sees (relative, absolute, inside functions)."""
  graph = _graph()
  entry = graph["pallas_prof.backend.pallas_call_rule"]
  assert {"pallas_prof.backend.compat", "pallas_prof.backend.lowering.lower"} <= entry
  assert "pallas_prof.backend.lowering.rules.table" in \
      graph["pallas_prof.backend.lowering.rules.memory"]
  assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
  assert _cycles({"a": {"b"}, "b": set()}) == []


def test_backend_knows_nothing_of_opentelemetry():
  offenders = [f"{path.relative_to(PACKAGE)}:{line}: {target}"
               for module, path in MODULES.items() if module.startswith("pallas_prof.backend")
               for target, line in _imports(module, path)
               if target == "opentelemetry" or target.startswith("opentelemetry.")]
  assert not offenders, "OpenTelemetry imported under backend/:\n" + "\n".join(offenders)


COMPAT = "pallas_prof.backend.compat"           # a package: one module per area of JAX
# JAX's own Pallas Triton backend, deprecated and going away, is reached from one module
# of its own (where all of it may be absent)
BUILTIN_TRITON = "pallas_prof.backend.builtin_triton"


def _in_compat(module: str) -> bool:
  return module == COMPAT or module.startswith(COMPAT + ".")


def test_jax_internals_only_in_compat():
  offenders = [f"{path.relative_to(PACKAGE)}:{line}: {target}"
               for module, path in MODULES.items()
               if not _in_compat(module) and module != BUILTIN_TRITON
               for target, line in _imports(module, path)
               if target == "jax._src" or target.startswith("jax._src.")]
  assert not offenders, ("jax._src imported outside backend/compat/ (add a name there):\n"
                         + "\n".join(offenders))


JAX_TRITON_BACKEND = ("jax._src.pallas.triton", "jax.experimental.pallas.triton")


def _reaches_jax_triton_backend(target: str) -> bool:
  return any(target == m or target.startswith(m + ".") for m in JAX_TRITON_BACKEND)


def test_jax_triton_backend_only_in_builtin_triton_and_never_at_import():
  """JAX's deprecated Triton backend is imported by backend/builtin_triton.py alone, and
  inside its functions only: importing pallas-prof never needs it (the removal drill,
  tests/removal/test_drill.py, checks the running code)."""
  offenders = [f"{path.relative_to(PACKAGE)}:{line}: {target}"
               for module, path in MODULES.items() if module != BUILTIN_TRITON
               for target, line in _imports(module, path) if _reaches_jax_triton_backend(target)]
  assert not offenders, offenders
  path = MODULES[BUILTIN_TRITON]
  top = [node for node in ast.parse(path.read_text()).body
         if isinstance(node, (ast.Import, ast.ImportFrom))]
  at_import = [node.lineno for node in top
               for target in ([a.name for a in node.names] if isinstance(node, ast.Import)
                              else [node.module or ""])
               if _reaches_jax_triton_backend(target)]
  assert not at_import, at_import


@pytest.mark.parametrize("source, found", [
    ("from jax._src import core\n", True),
    ("def f():\n  import jax._src.pallas.core as pc\n", True),
    ("from jax import lax\n", False),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n  from jax._src import core\n", False),
    ("import typing\nif typing.TYPE_CHECKING:\n  pass\nelse:\n  from jax._src import core\n", True),
])
def test_the_checks_see_nested_and_aliased_imports(tmp_path, source, found):
  path = tmp_path / "m.py"
  path.write_text(source)
  targets = [t for t, _ in _imports("pallas_prof.m", path)]
  assert any(t.startswith("jax._src") for t in targets) == found


def test_no_import_cycles():
  """Data flows one way: a module never needs, even lazily inside a function,
  a module that needs it back."""
  cycles = _cycles(_graph())
  assert not cycles, "import cycles among pallas_prof's modules:\n" + "\n".join(
      " <-> ".join(c) for c in cycles)


# --- imports along the data flow ---------------------------------------------------------
# backend/ is cut into rooms along its data flow: lowering/ (jaxpr -> GeneratedKernel),
# compiling/ (-> CompiledKernel), running/ (-> the kernel's outputs). A room never imports a
# room downstream of it; the shared modules at backend/'s top (artifacts, errors, compat,
# options, ...) import no room, but for the one that ties them together; and backend/ knows
# nothing of what is built on it.
BACKEND = "pallas_prof.backend"
ROOMS = ("lowering", "compiling", "running")          # in the order data flows through them
ENTRY = "pallas_prof.backend.pallas_call_rule"         # the rule JAX calls: lowers, compiles, runs
BUILT_ON_BACKEND = ("tune", "cli", "profiler", "advice", "instrument")


def _room(module: str) -> str | None:
  """The room of a module of backend/ ("top" for the shared ones), None outside backend/."""
  if module != BACKEND and not module.startswith(BACKEND + "."):
    return None
  first = module[len(BACKEND) + 1:].split(".")[0]
  return first if first in ROOMS else "top"


def against_the_flow(module: str, target: str) -> str | None:
  """Why `module` importing `target` goes against the data flow; None if it does not."""
  here, there = _room(module), _room(target)
  if here is None:
    return None
  for name in BUILT_ON_BACKEND:
    if target == f"pallas_prof.{name}" or target.startswith(f"pallas_prof.{name}."):
      return f"backend/ imports pallas_prof.{name}, which is built on it"
  if here in ROOMS and there in ROOMS and ROOMS.index(there) > ROOMS.index(here):
    return f"{here}/ imports {there}/, downstream of it"
  if here == "top" and there in ROOMS and module != ENTRY:
    return f"a shared module of backend/ imports {there}/ (only {ENTRY} ties the rooms)"
  return None


def test_imports_follow_the_data_flow():
  """Imports inside functions and relative ones count (`_imports`): a lazy import of a
  room downstream still ties the rooms together."""
  found = sorted({f"{path.relative_to(PACKAGE)}:{line}: {target}: {why}"
                  for module, path in MODULES.items()
                  for target, line in _imports(module, path)
                  for why in [against_the_flow(module, target)] if why})
  assert not found, "imports against the data flow:\n" + "\n".join(found)


@pytest.mark.parametrize("module, target, against", [
    ("pallas_prof.backend.lowering.emit", "pallas_prof.backend.compiling.compile", True),
    ("pallas_prof.backend.lowering.rules.memory", "pallas_prof.backend.running.launch", True),
    ("pallas_prof.backend.compiling.compile", "pallas_prof.backend.running", True),
    ("pallas_prof.backend.artifacts", "pallas_prof.backend.lowering.codegen", True),
    ("pallas_prof.backend.compiling.warmup", "pallas_prof.tune.params", True),
    ("pallas_prof.backend.running.launch", "pallas_prof.profiler", True),
    ("pallas_prof.backend.hooks", "pallas_prof.instrument.observer", True),
    ("pallas_prof.backend.lowering.lower", "pallas_prof.advice.api", True),
    ("pallas_prof.backend.pallas_call_rule", "pallas_prof.cli.run", True),
    ("pallas_prof.backend.compiling.compile", "pallas_prof.backend.lowering.codegen", False),
    ("pallas_prof.backend.running.launch", "pallas_prof.backend.compiling.triton_run", False),
    ("pallas_prof.backend.lowering.lower", "pallas_prof.backend.kernel_files", False),
    ("pallas_prof.backend.pallas_call_rule", "pallas_prof.backend.running.launch", False),
    ("pallas_prof.backend.hooks", "pallas_prof.events", False),
    ("pallas_prof.cli.run", "pallas_prof.backend.running.runtime_errors", False),
])
def test_the_flow_check_finds_planted_imports(module, target, against):
  assert (against_the_flow(module, target) is not None) == against


def test_the_flow_check_sees_a_planted_import_inside_a_function(tmp_path):
  """The check reads the files as they are: a relative import inside a function of the
  lowering, reaching into compiling/ (planted in a copy of emit.py), is found."""
  path = tmp_path / "emit.py"
  path.write_text(MODULES["pallas_prof.backend.lowering.emit"].read_text()
                  + "\n\ndef _planted():\n  from ..compiling import compile_cache\n"
                  "  return compile_cache\n")
  module = "pallas_prof.backend.lowering.emit"
  found = [(target, why) for target, _ in _imports(module, path)
           for why in [against_the_flow(module, target)] if why]
  assert found == [("pallas_prof.backend.compiling.compile_cache",
                    "lowering/ imports compiling/, downstream of it")]


# What importing a module of backend/ loads, in a fresh process without pallas_prof's own
# __init__ (nothing but the module asked for and what it imports): a stand-in package
# over the same folder. Also lowers a kernel, bounds-checked and probed, so that
# the imports inside the lowering's functions run too.
_LOADED_BY_THE_LOWERING = r"""
import sys, types
package = types.ModuleType("pallas_prof")
package.__path__ = [sys.argv[1]]
sys.modules["pallas_prof"] = package
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from pallas_prof.backend.lowering.lower import lower_kernel
from pallas_prof.backend.options import LoweringOptions

def kernel(x_ref, o_ref):
  o_ref[...] = jnp.exp(x_ref[...]) * 2 + jnp.sum(x_ref[...])

out = jax.ShapeDtypeStruct((8, 100), jnp.float32)
closed = jax.make_jaxpr(lambda x: pl.pallas_call(kernel, out_shape=out)(x))(out)
[eqn] = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
for extra in ({}, {"check_bounds": True}, {"probes": True}, {"tma": True}):
  gk = lower_kernel(eqn.params["jaxpr"], eqn.params["grid_mapping"],
                    LoweringOptions(num_warps=4, num_stages=3, **extra))
  assert "def kernel" in gk.source or "@triton.jit" in gk.source, gk.source
print("\n".join(sorted(m for m in sys.modules if m.startswith("pallas_prof"))))
"""


def _loaded_by_the_lowering(package: pathlib.Path, tmp_path) -> list[str]:
  import subprocess
  import sys
  env = dict(os.environ, JAX_PLATFORMS="cpu", PALLAS_PROF_CACHE_DIR=str(tmp_path / "cache"),
             PYTHONPATH="")
  done = subprocess.run([sys.executable, "-c", _LOADED_BY_THE_LOWERING, str(package)],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  return done.stdout.split()


def _downstream_of_the_lowering(loaded: list[str]) -> list[str]:
  return [m for m in loaded if _room(m) in ("compiling", "running")]


def test_the_lowering_loads_neither_compiling_nor_running(tmp_path):
  loaded = _loaded_by_the_lowering(PACKAGE, tmp_path)
  # the whole lowering came, with the features the options asked for
  assert {f"{BACKEND}.lowering.rules.memory", f"{BACKEND}.lowering.features.bounds",
          f"{BACKEND}.lowering.features.probes"} <= set(loaded), loaded
  assert not _downstream_of_the_lowering(loaded), _downstream_of_the_lowering(loaded)


def test_the_loaded_check_finds_a_planted_import(tmp_path):
  """The same check on a copy of the package whose emit.py imports compiling/ (at import
  time, where the static check above would find it too) fails."""
  import shutil
  copy = tmp_path / "copy" / "pallas_prof"
  shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
  emit = copy / "backend" / "lowering" / "emit.py"
  emit.write_text(emit.read_text() + "\nfrom ..compiling import compile_cache  # noqa: E402\n")
  loaded = _loaded_by_the_lowering(copy, tmp_path)
  assert "pallas_prof.backend.compiling.compile_cache" in _downstream_of_the_lowering(loaded)


# --- folders small enough to find one's way in ---------------------------------------------
MAX_MODULES_PER_FOLDER = 15
# Folders allowed over the limit, each with the reason (none today: a new one needs one)
KNOWN_CROWDED: set[str] = set()


def crowded_folders(root: pathlib.Path, limit: int = MAX_MODULES_PER_FOLDER) -> dict[str, int]:
  """Package folders under `root` (itself included) holding more than `limit` modules,
  __init__.py not counted: {folder relative to root: modules}."""
  out = {}
  for init in sorted(root.rglob("__init__.py")):
    n = sum(1 for p in init.parent.glob("*.py") if p.name != "__init__.py")
    if n > limit:
      out[init.parent.relative_to(root).as_posix()] = n
  return out


def test_no_folder_holds_more_than_15_modules():
  crowded = crowded_folders(PACKAGE)
  over = {folder: n for folder, n in crowded.items() if folder not in KNOWN_CROWDED}
  assert not over, (f"folders of more than {MAX_MODULES_PER_FOLDER} modules (cut them into "
                    f"sub-packages along the data flow): {over}")
  cut = KNOWN_CROWDED - set(crowded)
  assert not cut, f"no longer over the limit: take them out of KNOWN_CROWDED: {sorted(cut)}"


def test_the_folder_check_finds_a_planted_crowd(tmp_path):
  (tmp_path / "sub" / "deeper").mkdir(parents=True)
  for folder, n in ((tmp_path, 15), (tmp_path / "sub", 16), (tmp_path / "sub" / "deeper", 3)):
    (folder / "__init__.py").write_text("")
    for i in range(n):
      (folder / f"m{i}.py").write_text("")
  (tmp_path / "sub" / "notes.txt").write_text("")
  assert crowded_folders(tmp_path) == {"sub": 16}
  (tmp_path / "m15.py").write_text("")
  assert crowded_folders(tmp_path) == {".": 16, "sub": 16}


# Modules small enough to read in one sitting. The exemption is for a rule file that
# is mostly a table of small rules, one per primitive, which reads as a list.
MAX_LINES = 520
TABLE_RULE_FILES = {"pallas_prof.backend.lowering.rules.elementwise"}


def test_modules_are_small_enough_to_read_in_one_sitting():
  too_long = [f"{path.relative_to(PACKAGE)}: {n} lines"
              for module, path in MODULES.items() if module not in TABLE_RULE_FILES
              for n in [path.read_text().count("\n")] if n > MAX_LINES]
  assert not too_long, f"modules over {MAX_LINES} lines (cut them along a seam):\n" + "\n".join(
      too_long)


def test_the_table_exemption_is_a_table():
  """elementwise.py stays exempt only while most of it is rules registered in its table."""
  path = MODULES["pallas_prof.backend.lowering.rules.elementwise"]
  source = path.read_text()
  registered = source.count("register(") + source.count("elementwise(") + source.count("_optional(")
  assert registered >= 40, f"{path.name} has {registered} table entries: no longer a table file"


def test_every_public_name_of_compat_is_used():
  """compat/ is the one place JAX's internals are touched: a shim nothing calls still
  has to be kept working at every JAX bump, so none stays (six did: lowering
  unregistration and restore, frame and interpreter helpers no module called)."""
  import re
  public = [n.name for m, path in MODULES.items() if _in_compat(m)
            for n in ast.parse(path.read_text()).body
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")]
  # the package's __init__ re-exports every name: a use is one outside the package
  others = "\n".join(p.read_text() for m, p in MODULES.items() if not _in_compat(m))
  unused = [n for n in public if not re.search(rf"\b{n}\b", others)]
  assert len(public) > 30 and not unused, f"backend/compat/ defines names no module uses: {unused}"


# --- no measured figures in code comments ------------------------------------------------
# A figure written into a comment rots: the code moves on and the number stays. Figures
# belong in bench/results with the command and commit that made them; a comment says why
# and names a constant or a bench script. A number with a unit of time, rate or share
# ("51-64 ms", "~5%", "1455 MHz", "4.13 TB/s") in a comment or docstring of pallas_prof/
# fails; text in quotes (an example of what the tool prints) is not a figure.
_UNITS = r"(?:ns|us|µs|ms|s|GB/s|TB/s|MB/s|GiB/s|TFLOP/s|GFLOP/s|MHz|GHz|%)"
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
FIGURE = re.compile(rf"(?<![\w.^]){_NUMBER}(?:\s?(?:-|to)\s?{_NUMBER})?\s?{_UNITS}(?![\w/])")
_QUOTED = re.compile(r"(?<!\w)\"[^\"]*\"|(?<!\w)'[^']*'|`[^`]*`")


def _comment_lines(source: str):
  """(line, text) of every comment and docstring line of a module's source."""
  for tok in tokenize.generate_tokens(io.StringIO(source).readline):
    if tok.type == tokenize.COMMENT:
      yield tok.start[0], tok.string
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
        and node.body and isinstance(node.body[0], ast.Expr) \
        and isinstance(node.body[0].value, ast.Constant) \
        and isinstance(node.body[0].value.value, str):
      for i, text in enumerate(node.body[0].value.value.splitlines()):
        yield node.body[0].lineno + i, text


def measured_figures(source: str) -> list[tuple[int, str]]:
  return [(line, m.group(0)) for line, text in _comment_lines(source)
          for m in FIGURE.finditer(_QUOTED.sub("", text))]


def test_no_measured_figures_in_code_comments():
  found = [f"{path.relative_to(PACKAGE)}:{line}: {figure!r}"
           for path in MODULES.values()
           for line, figure in measured_figures(path.read_text())]
  assert not found, ("measured figures in comments (move them to bench/results with their "
                     "command and commit, and say why in words):\n" + "\n".join(found))


@pytest.mark.parametrize("source, found", [
    ("x = 1  # a full collection: 51-64 ms on the H200 machine\n", ["51-64 ms"]),
    ('def f():\n  """Slowed the next launch by ~5% against ncu."""\n', ["5%"]),
    ("# ran at SM 1455 MHz of 1980\n", ["1455 MHz"]),
    ("# copy bandwidth 4.13 TB/s\n", ["4.13 TB/s"]),
    ("# took 0.25 s on a CPU machine\n", ["0.25 s"]),
    ('# prints "-44 % (335.9 -> 188.3 us)"\n', []),           # an example of output, quoted
    ("# 8 warps, 3 stages, sm_90, 2x smaller blocks, Triton 3.9's interpreter\n", []),
    ("RECOVERY_DELAY_S = 0.1   # twice nvbench's default\n", []),
])
def test_the_figure_check_finds_planted_figures(source, found):
  assert [figure.lstrip("~") for _, figure in measured_figures(source)] == found


# --- the profiler's rooms ----------------------------------------------------------------
# profiler/ is cut along its data flow (profiler/__init__.py draws it): each room may import
# the rooms named here and the shared modules at the profiler's top (the report's types, the
# CUDA driver, the launch spec), never the conductor (api.py, the package's __init__, and
# options.py, what profile() was asked, which checks it against the timing room's modes), which
# alone imports every room. A shared module imports no room. Imports inside functions count.
PROFILER = "pallas_prof.profiler"
PROFILER_ROOMS = {
    "static": set(),                     # the compiled code, read without a GPU
    "timing": set(),                     # replay, NVML, ceilings, in situ
    "sampling": {"static", "timing"},    # PC samples and ncu counters -> Attribution
    "probes": {"static", "timing"},      # the probed variant, replayed
}
PROFILER_CONDUCTORS = {PROFILER, f"{PROFILER}.api", f"{PROFILER}.options"}


def _profiler_room(module: str) -> str | None:
  """The room of a profiler module, "" for the profiler's top, None outside the profiler."""
  if module == PROFILER:
    return ""
  if not module.startswith(PROFILER + "."):
    return None
  head = module[len(PROFILER) + 1:].split(".")[0]
  return head if head in PROFILER_ROOMS else ""


def profiler_flow_violations(graph: dict[str, set[str]]) -> list[str]:
  out = []
  for module, targets in sorted(graph.items()):
    room = _profiler_room(module)
    if room is None or module in PROFILER_CONDUCTORS:
      continue
    for target in sorted(targets):
      to = _profiler_room(target)
      if to is None or to == room:
        continue
      if target in PROFILER_CONDUCTORS:
        out.append(f"{module} -> {target}: only the conductor imports the rooms, no room or "
                   "shared module imports it")
      elif to == "":
        continue                         # a shared module at the profiler's top
      elif room == "":
        out.append(f"{module} -> {target}: a shared module imports the room {to}/")
      elif to not in PROFILER_ROOMS[room]:
        out.append(f"{module} -> {target}: {room}/ may import "
                   f"{', '.join(sorted(PROFILER_ROOMS[room])) or 'no other room'}, not {to}/")
  return out


def test_the_profiler_rooms_are_the_ones_declared():
  """A new folder under profiler/ is declared above with the rooms it may import."""
  rooms = {p.name for p in (PACKAGE / "profiler").iterdir()
           if p.is_dir() and (p / "__init__.py").exists()}
  assert rooms == set(PROFILER_ROOMS)


def test_the_profiler_rooms_import_along_the_flow():
  violations = profiler_flow_violations(_graph())
  assert not violations, "imports against the profiler's flow:\n" + "\n".join(violations)


@pytest.mark.parametrize("module, target, allowed", [
    ("timing.replayer", "sampling.stalls", False),    # a base room reaching downstream
    ("static.correlate", "timing.replayer", False),   # the two base rooms stay apart
    ("sampling.ncu", "probes.probing", False),        # the two downstream rooms stay apart
    ("probes.probing", "sampling.attribution", False),
    ("schema", "probes.probe_results", False),        # a shared module importing a room
    ("timing.runner", "api", False),                  # a room importing the conductor
    ("static.cost", "", False),                       # ... or the package that holds it
    ("sampling.attribution", "static.correlate", True),
    ("probes.probing", "timing.throttle", True),
    ("timing.replayer", "driver", True),
    ("api", "probes.probing", True),
])
def test_the_profiler_flow_check_finds_planted_imports(module, target, allowed):
  def name(short):
    return f"{PROFILER}.{short}" if short else PROFILER
  violations = profiler_flow_violations({name(module): {name(target)}})
  assert (not violations) == allowed, violations


def test_the_profiler_flow_check_sees_imports_inside_functions(tmp_path):
  path = tmp_path / "planted.py"
  path.write_text("def f():\n  from ..sampling import stalls\n  return stalls\n")
  module = f"{PROFILER}.timing.planted"
  graph = {module: {t for t, _ in _imports(module, path) if t in MODULES}}
  assert graph[module] == {f"{PROFILER}.sampling.stalls"}
  assert profiler_flow_violations(graph)


# --- the span attribute keys, written once ------------------------------------------------
# instrument/conventions.py names every attribute key; the backend, which may not import it,
# and the saved-run readers, which must not load it (it brings OpenTelemetry and JAX), take
# theirs from pallas_prof/events.py (conventions.py re-exports them). A key spelled out as a
# string anywhere else in the package is a second definition that can drift from the first;
# a string in a key namespace of the conventions that they do not declare is a key defined
# nowhere (module names and file names, `jax.numpy` or `kernel.ptx`, are in no such
# namespace).
CONVENTIONS = ("pallas_prof.instrument.conventions", "pallas_prof.events")
_KEY_SHAPE = re.compile(r"[a-z_]+(?:\.[a-z_]+)+")
# the first part of pallas-prof's keys and of OpenTelemetry's it uses; not jax., triton. or
# pallas_prof., which module names share (jax.process_index, triton.stage are declared, so a
# literal of those is still found)
KEY_NAMESPACES = ("pallas", "jaxpr", "code", "profile", "nvml", "otel", "host", "process",
                  "service")


def _key_literals(source: str) -> list[tuple[int, str]]:
  return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
          if isinstance(node, ast.Constant) and isinstance(node.value, str)
          and _KEY_SHAPE.fullmatch(node.value)]


def _declared_keys() -> set[str]:
  return {key for module in CONVENTIONS for _, key in _key_literals(MODULES[module].read_text())}


def attribute_keys_spelled_out(module_sources: dict[str, str]) -> list[str]:
  declared = _declared_keys()
  return [f"{module}:{line}: {key!r}" + ("" if key in declared else " (declared nowhere)")
          for module, source in sorted(module_sources.items())
          for line, key in _key_literals(source)
          if key in declared or key.split(".")[0] in KEY_NAMESPACES]


def _outside_the_conventions() -> dict[str, str]:
  return {m: p.read_text() for m, p in MODULES.items() if m not in CONVENTIONS}


def test_the_package_spells_out_no_attribute_key():
  assert {"pallas.kernel", "pallas.source_key", "jaxpr.primitive", "host.name",
          "otel.status"} <= _declared_keys()
  found = attribute_keys_spelled_out(_outside_the_conventions())
  assert not found, ("attribute keys written as strings (use their names from "
                     "instrument/conventions.py, or pallas_prof/events.py where instrument/ "
                     "may not be imported; declare a new key there):\n" + "\n".join(found))


@pytest.mark.parametrize("module", ["pallas_prof.backend.lowering.lower",
                                    "pallas_prof.cli.summary",
                                    "pallas_prof.instrument.perfetto_trace"])
def test_the_key_check_finds_a_planted_literal(module):
  source = MODULES[module].read_text()
  planted = source + '\n\ndef _planted(span):\n  span.set("pallas.source_key", "k")\n'
  assert attribute_keys_spelled_out({"m": source}) == []
  assert attribute_keys_spelled_out({"m": planted}) == [
      f"m:{planted.count(chr(10))}: 'pallas.source_key'"]


def test_the_key_check_finds_a_planted_undeclared_key():
  planted = ('def f(span, origin):\n  span.set("pallas.new_figure", 1)\n'
             '  return origin.get("process.parent_pid"), "jax.numpy", "kernel.ptx"\n')
  assert attribute_keys_spelled_out({"m": planted}) == [
      "m:2: 'pallas.new_figure' (declared nowhere)",
      "m:3: 'process.parent_pid' (declared nowhere)"]


# --- the transcendental primitives, known once ---------------------------------------------
# The lowering's rule table records which primitives evaluate transcendental functions (each
# rule's `work`); a collection of their names written out anywhere else is a second list that
# misses the next rule added (the advice's missed log2).
RULE_MODULES = "pallas_prof.backend.lowering.rules"
# Modules whose lists of such names are of something else, each with the reason
OTHER_NAMES = {"pallas_prof.backend.compiling.libdevice_link":
               "libdevice's functions (__nv_expf, ...) that one link prepares together"}


def _transcendental_names() -> frozenset[str]:
  from pallas_prof.backend.lowering import rules
  return rules.primitives_doing(rules.TRANSCENDENTAL)


def transcendental_lists(module_sources: dict[str, str], names: frozenset[str]) -> list[str]:
  """module:line of every set, list, tuple or dict literal of strings that is a list of
  transcendental primitives: three or more of them, and most of its strings (a list of
  something else, the foldable primitives or libdevice's common functions, names a few in
  passing)."""
  out = []
  for module, source in sorted(module_sources.items()):
    for node in ast.walk(ast.parse(source)):
      items = node.keys if isinstance(node, ast.Dict) else \
          node.elts if isinstance(node, (ast.Set, ast.List, ast.Tuple)) else []
      strings = {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}
      named = strings & names
      if len(named) >= 3 and len(named) >= 0.75 * len(strings):
        out.append(f"{module}:{node.lineno}: {sorted(named)}")
  return out


def test_transcendental_primitives_are_listed_by_the_rule_table_alone():
  names = _transcendental_names()
  assert {"exp", "tanh", "logistic"} <= names
  found = transcendental_lists({m: p.read_text() for m, p in MODULES.items()
                                if m != RULE_MODULES and not m.startswith(RULE_MODULES + ".")
                                and m not in OTHER_NAMES},
                               names)
  assert not found, ("transcendental primitives listed outside the rule table (use "
                     "rules.primitives_doing(TRANSCENDENTAL)):\n" + "\n".join(found))


def test_the_transcendental_check_finds_a_planted_list():
  planted = 'SLOW = {"exp", "log", "tanh", "digamma"}\nOK = ("exp", "log", "tanh", "add", "mul")\n'
  assert transcendental_lists({"m": planted}, _transcendental_names()) == [
      "m:1: ['exp', 'log', 'tanh']"]


# --- the generated line's equation comment, written and read in one module -----------------
# codegen keeps a line's code, equation and note apart; the comment `  # [4] exp @ k.py:31` is
# made from the equation's record and taken off through GeneratedKernel.code_lines, both in
# backend/equation_text.py. Another module cutting "# [" out of the source's text is a second
# reading of it that misses what the first one knows (a file name with a space).
LINE_COMMENT_MODULE = "pallas_prof.backend.equation_text"


def line_comment_readers(module_sources: dict[str, str]) -> list[str]:
  found = []
  for module, source in sorted(module_sources.items()):
    tree = ast.parse(source)
    docstrings = {id(parent.body[0].value) for parent in ast.walk(tree)
                  if isinstance(parent, (ast.Module, ast.FunctionDef, ast.ClassDef))
                  and parent.body and isinstance(parent.body[0], ast.Expr)}
    for node in ast.walk(tree):
      if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
          "# [" in node.value and id(node) not in docstrings:
        found.append(f"{module}:{node.lineno}: {node.value!r}")
  return found


def test_the_line_comment_is_made_and_read_in_one_module():
  found = line_comment_readers({m: p.read_text() for m, p in MODULES.items()
                                if m != LINE_COMMENT_MODULE})
  assert not found, ("the generated line's comment handled outside backend/equation_text.py "
                     "(use GeneratedKernel.code_lines):\n" + "\n".join(found))


def test_the_line_comment_check_finds_a_planted_reader():
  planted = 'def f(t):\n  """Cuts `# [n]` off."""\n  return t.split("  # [")[0]\n'
  assert line_comment_readers({"m": planted}) == ["m:3: '  # ['"]


# --- the tuning file, written and read through one record ----------------------------------
# tune/tuned_file.py's TuningFile (of TuningEntry) is the one writer and the one checked
# reader of the file PALLAS_PROF_TUNED applies; a module building the file's entries as dicts
# of its own is a second writer, which can write what the reader refuses.
TUNED_FILE = "pallas_prof.tune.tuned_file"
# tune/validate.py's table of an entry's field checks names the same keys: the reader's own
# schema (tuned_file.py's reader calls it), not an entry written
ENTRY_SCHEMA = "pallas_prof.tune.validate"
_ENTRY_KEYS = {"source", "target", "gpu", "best", "default"}


def tuning_entry_dicts(module_sources: dict[str, str]) -> list[str]:
  return [f"{module}:{node.lineno}" for module, source in sorted(module_sources.items())
          for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Dict)
          and _ENTRY_KEYS <= {k.value for k in node.keys if isinstance(k, ast.Constant)}]


def test_tuning_files_are_written_through_the_record_alone():
  found = tuning_entry_dicts({m: p.read_text() for m, p in MODULES.items()
                              if m not in (TUNED_FILE, ENTRY_SCHEMA)})
  assert not found, ("tuning file entries built outside tune/tuned_file.py (make a "
                     "TuningEntry and write a TuningFile):\n" + "\n".join(found))


def test_the_tuning_entry_check_finds_a_planted_dict():
  planted = ('e = {"kernel": k, "source": s, "target": t, "gpu": g, "best": b, '
             '"default": d}\nother = {"best": 1}\n')
  assert tuning_entry_dicts({"m": planted}) == ["m:1"]
