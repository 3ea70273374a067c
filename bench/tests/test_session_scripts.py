"""Every file a GPU session's shell script names is there: bench/gpu_session.sh's steps (and
the other shell scripts of bench/, tests/ and tools/) run on the device, where a path moved
since (a bench script into its room, a test file renamed) costs a device call to find. The
check reads each repository path out of the script text, as a person would, and fails on a
planted old one."""
from __future__ import annotations

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = sorted(p for folder in ("bench", "tests", "tools")
                 for p in glob.glob(os.path.join(ROOT, folder, "**", "*.sh"), recursive=True))

# A repository path: one of the project's top folders, then path characters; a `::test_name`
# after a test file ends it. A path followed by `<`, `$` or `{` is a placeholder
# (bench/results/sanitizer_<commit>/, examples/$e.py), not a file.
_PATH = re.compile(r"(?<![\w/.$-])((?:bench|tests|examples|pallas_prof|tools)/[\w./*-]*)(.?)")


def named_paths(text: str) -> list[str]:
  """The repository paths a shell script names, in order, placeholders left out."""
  found = []
  for m in _PATH.finditer(text):
    path, after = m.group(1).rstrip("."), m.group(2)
    if after in ("<", "$", "{") or path.endswith("_"):
      continue
    found.append(path)
  return found


def missing_paths(text: str, root: str = ROOT) -> list[str]:
  """The named paths that match no file or folder under root (globs expanded)."""
  return [p for p in named_paths(text) if not glob.glob(os.path.join(root, p))]


def test_the_session_driver_and_its_steps_are_read():
  session = os.path.join(ROOT, "bench", "gpu_session.sh")
  assert session in SCRIPTS
  with open(session) as f:
    paths = named_paths(f.read())
  # the step scripts a session runs most: the suite, the fuzzer, the sanitizer, the advice
  for step in ("bench/suite/suite.py", "bench/fuzz/fuzz.py", "bench/sanitize/sanitize_gpu.sh",
               "bench/advice/advice_known_answers.py", "tests/backend/running/test_bounds_gpu.py"):
    assert step in paths, f"{step} not read out of gpu_session.sh"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_path_a_session_script_names_is_there(script):
  with open(script) as f:
    missing = missing_paths(f.read())
  assert not missing, (f"{os.path.relpath(script, ROOT)} names paths that are not in the "
                       f"repository (moved? say where in the script): {missing}")


def test_a_planted_missing_path_is_found(tmp_path):
  """gpu_session.sh with its suite step put back at the path it had before bench/ had rooms,
  and a test file that does not exist: both reported, nothing else."""
  with open(os.path.join(ROOT, "bench", "gpu_session.sh")) as f:
    text = f.read()
  assert "python3 bench/suite/suite.py" in text
  planted = text.replace("python3 bench/suite/suite.py", "python3 bench/suite.py", 1)
  planted += "\nstep_gone() {\n  python3 -m pytest tests/backend/test_gone.py::test_x\n}\n"
  assert missing_paths(text) == []
  assert missing_paths(planted) == ["bench/suite.py", "tests/backend/test_gone.py"]


@pytest.mark.parametrize("text, paths", [
    ("timeout 60 python3 bench/cost/tma.py --steps exact", ["bench/cost/tma.py"]),
    ("pytest tests/backend/test_elementwise.py::test_convert_float64 -n 8",
     ["tests/backend/test_elementwise.py"]),
    ("# copy it to bench/results/sanitizer_<commit>/", []),
    ('run "examples/$e.py"', []),
    ("python3 bench/fuzz/fuzz_replay.py bench/results/fuzz_cpu_*_sm90.json --device gpu",
     ["bench/fuzz/fuzz_replay.py", "bench/results/fuzz_cpu_*_sm90.json"]),
    ('--out "$OUT/bench/x.json" /tmp/site/bench/y.py', []),
    ("(bench/probes/worker_start_phases.py).", ["bench/probes/worker_start_phases.py"]),
])
def test_paths_are_read_as_a_person_reads_them(text, paths):
  assert named_paths(text) == paths
