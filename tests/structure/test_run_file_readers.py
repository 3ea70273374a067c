"""Who reads a run directory: cli/run_directory.py and the file layer under it are the one
reader of a run's and a kernel's records, the place where a damaged file is explained once
(cli/saved_runs/files.py says what is wrong with the bytes, cli/saved_runs/kernel.py and
serial.py with the values). A module that opens or json.loads one of those files itself
reads it a second way, and a damaged file then fails there as a traceback.

Read from the source with `ast` (nothing is imported), as tests/test_structure.py does.
"""
from __future__ import annotations

import ast

from tests.test_structure import MODULES

# the files a run writes as records (report.json) and each kernel's (kernels/<label>/)
RUN_FILES = ("report.json", "kernel.json", "compiled.json", "spec.json")
# their names in pallas_prof/run_layout.py, where every writer and reader takes them from
LAYOUT_NAMES = ("REPORT", "KERNEL", "COMPILED", "SPEC")
READERS = {
    "pallas_prof.cli.run_directory": "the one reader of run and kernel directories",
    "pallas_prof.cli.saved_runs.files": "run_directory's file layer (bounded, no link out)",
    # RunReport.load (public) reads report.json's bytes through saved_runs/files.py and
    # decodes them; run_directory.read_report calls it (run_directory imports report, so
    # report cannot call back into run_directory without an import cycle)
    "pallas_prof.cli.report": "report.json's decoder, over saved_runs/files.py",
    # compiled.json and spec.json are the artifacts' own layout: the disk cache and the
    # profiler's child processes load them, and backend/ may not import cli/
    "pallas_prof.backend.artifacts": "CompiledKernel.load",
    "pallas_prof.backend.running.launch_spec": "LaunchSpec.load (the profiler's children)",
}
# builtin open() (os.open, which the run's writer uses, is not a reader), json.load, the
# safe readers (safe_files.read_regular, saved_runs/files.py's) and pathlib's
_OPENERS = {"load", "read_regular", "read_json", "read_text", "read_bytes"}


def _names_run_file(node, bound: set[str]) -> bool:
  """Whether the expression names a run's record file: the literal, or a name bound to
  an expression that does (REPORT = "report.json"; path = os.path.join(d, REPORT))."""
  for sub in ast.walk(node):
    if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and \
        sub.value.endswith(RUN_FILES):
      return True
    if isinstance(sub, ast.Name) and (sub.id in bound or sub.id in LAYOUT_NAMES):
      return True
    if isinstance(sub, ast.Attribute) and sub.attr in LAYOUT_NAMES:   # run_layout.REPORT
      return True
  return False


def raw_run_file_reads(source: str) -> list[int]:
  """Lines of the source that open, json.load or read a run's record file by its name."""
  tree = ast.parse(source)
  bound: set[str] = set()
  for _ in range(3):              # names bound to names bound to a file name
    for node in ast.walk(tree):
      if isinstance(node, ast.Assign) and _names_run_file(node.value, bound):
        bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
  found = []
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
      continue
    reads = (isinstance(node.func, ast.Name) and node.func.id in _OPENERS | {"open"}) or \
        (isinstance(node.func, ast.Attribute) and node.func.attr in _OPENERS)
    named = [*node.args, *([node.func.value] if isinstance(node.func, ast.Attribute) else [])]
    if reads and any(_names_run_file(a, bound) for a in named):
      found.append(node.lineno)
  return sorted(set(found))


def test_only_the_run_directory_reads_a_runs_record_files():
  texts = {m: p.read_text() for m, p in MODULES.items() if m not in READERS}
  found = [f"{m}:{line}" for m, text in texts.items()        # (parsed where a name is)
           if any(name in text for name in (*RUN_FILES, *LAYOUT_NAMES))
           for line in raw_run_file_reads(text)]
  assert not found, ("a run's record files read outside cli/run_directory.py (read them "
                     "through run_directory.load_kernel, read_report or load_aliases):\n"
                     + "\n".join(found))


def test_the_run_file_check_finds_planted_reads():
  planted = ('import json, os, pathlib\nREPORT = "report.json"\n'
             'def a(d):\n  path = os.path.join(d, REPORT)\n  with open(path) as f:\n'
             '    return json.load(f)\n'
             'def b(d):\n  return json.load(open(os.path.join(d, "kernel.json")))\n'
             'def c(d):\n  return pathlib.Path(d, "compiled.json").read_text()\n'
             'def fine(d):\n  os.open(os.path.join(d, REPORT), os.O_WRONLY)\n'
             '  return open(os.path.join(d, "kernel.cubin"), "rb").read()\n')
  assert raw_run_file_reads(planted) == [5, 8, 10]
  # by run_layout's names, as the package spells them now
  planted = ("import json, os\nfrom pallas_prof import run_layout\n"
             "from pallas_prof.run_layout import KERNEL\n"
             "def a(d):\n  return json.load(open(os.path.join(d, KERNEL)))\n"
             "def b(d):\n  return read_json(d, run_layout.SPEC)\n"
             "def fine(d):\n  return open(os.path.join(d, run_layout.CUBIN), 'rb').read()\n")
  assert raw_run_file_reads(planted) == [5, 7]
