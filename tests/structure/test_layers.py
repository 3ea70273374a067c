"""Layers point one way (issue 42, item 6): the package's top-level rooms (a folder or a
module right under pallas_prof/) import each other without a circle, and only the CLI,
and the entry modules that must, import pallas_prof.cli.

Read from the source with `ast`, as tests/test_structure.py reads it (nothing is
imported). Here an import a type checker alone follows (`if TYPE_CHECKING:`) counts too:
it never runs, but it still says that one room needs another's names, and it is how
events.py once closed a circle with the backend and tune/ that send its events.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

from tests.test_structure import MODULES, _cycles, _package_of

# Who may import pallas_prof.cli besides the CLI itself, and why.
CLI_IMPORTERS = {
    "pallas_prof.__main__": "`python -m pallas_prof` is the command",
    "pallas_prof.notebook": "`%load_ext pallas_prof.notebook` is an entry point like a "
                            "command: it runs the cell's kernels as a run and draws it with "
                            "the CLI's views",
    "pallas_prof": "the package's root installs the CLI's view of a ProfileReport into "
                   "profiler/presentation.py, as it installs the tuner into the backend's "
                   "hooks, so that the profiler imports no view",
}
CLI = "pallas_prof.cli"


def _every_import(module: str, path: pathlib.Path) -> list[tuple[str, int]]:
  """(imported module, line) for every import in the file: inside functions and under
  `if TYPE_CHECKING:` too."""
  package = _package_of(module, path)
  out = []
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      out += [(alias.name, node.lineno) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      target = node.module or ""
      if node.level:
        base = package.split(".")
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
      for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append((sub if sub in MODULES else target, node.lineno))
  return out


def _is_cli(module: str) -> bool:
  return module == CLI or module.startswith(CLI + ".")


def cli_imports(modules: dict[str, pathlib.Path]) -> list[str]:
  """'file:line: imports X' for each import of pallas_prof.cli from outside it, but by
  the modules CLI_IMPORTERS names."""
  return sorted({f"{path.relative_to(path.parents[len(module.split('.')) - 1])}:{line}: "
                f"imports {target}"
                for module, path in modules.items()
                if not _is_cli(module) and module not in CLI_IMPORTERS
                for target, line in _every_import(module, path) if _is_cli(target)})


def room(module: str) -> str:
  """pallas_prof.backend.lowering.lower -> backend; pallas_prof.events -> events."""
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else "pallas_prof (the root)"


def room_graph(modules: dict[str, pathlib.Path]) -> dict[str, set[str]]:
  graph: dict[str, set[str]] = {room(m): set() for m in modules}
  for module, path in modules.items():
    for target, _ in _every_import(module, path):
      if target.split(".")[0] == "pallas_prof" and room(target) != room(module):
        graph[room(module)].add(room(target))
        graph.setdefault(room(target), set())
  return graph


def test_only_the_cli_and_its_entry_modules_import_the_cli():
  found = cli_imports(MODULES)
  assert not found, ("pallas_prof.cli imported from below it (move what is needed down "
                     "to a neutral module, or install it from above):\n" + "\n".join(found))


def test_the_cli_check_finds_a_planted_import(tmp_path):
  """The old upward import of profiler/schema.py, put back into a copy of the file."""
  module = "pallas_prof.profiler.schema"
  path = tmp_path / "pallas_prof" / "profiler" / "schema.py"
  path.parent.mkdir(parents=True)
  path.write_text(MODULES[module].read_text() + "\n\ndef _planted(report):\n"
                  "  from ..cli.terminal.profile_view import profile_text\n"
                  "  return profile_text(report)\n")
  found = cli_imports({**MODULES, module: path})
  assert len(found) == 1 and found[0].startswith("pallas_prof/profiler/schema.py:")
  assert found[0].endswith("imports pallas_prof.cli.terminal.profile_view")


def test_the_cli_check_sees_a_type_checking_import(tmp_path):
  path = tmp_path / "pallas_prof" / "gate" / "figures.py"
  path.parent.mkdir(parents=True)
  path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                  "  from ..cli.report import RunReport\n")
  found = cli_imports({"pallas_prof.gate.figures": path})
  assert found == ["pallas_prof/gate/figures.py:3: imports pallas_prof.cli.report"]


def test_no_circle_between_the_top_level_rooms():
  circles = _cycles(room_graph(MODULES))
  assert not circles, "top-level rooms that import each other in a circle:\n" + "\n".join(
      " <-> ".join(c) for c in circles)


@pytest.mark.parametrize("planted", [
    # events.py's old payload types: the backend sends events, events reads tune/'s record
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n  from .tune.records import TuningRecord\n",
    # a lazy import inside a function ties the rooms as well
    "def _planted():\n  from .cli import units\n",
])
def test_the_room_check_finds_a_planted_circle(tmp_path, planted):
  module = "pallas_prof.events"
  path = tmp_path / "events.py"
  path.write_text(MODULES[module].read_text() + "\n\n" + planted)
  circles = _cycles(room_graph({**MODULES, module: path}))
  assert circles and any("events" in c for c in circles)


def test_event_payloads_sit_on_the_ground_floor():
  """What the events carry imports nothing of the package: the backend, tune/, the
  profiler and the advice all build on it."""
  for module in ("pallas_prof.event_payloads", "pallas_prof.events"):
    inside = {t for t, _ in _every_import(module, MODULES[module])
              if t.split(".")[0] == "pallas_prof"}
    assert inside <= {"pallas_prof.event_payloads"}, (module, inside)
