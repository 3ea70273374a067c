"""Fuzz reproducers live in bench/corpus/, not among the results: bench/results/ holds no
reproducer script or `_repro` folder, each corpus folder is named in the corpus README
with a record in bench/results/."""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "results")
CORPUS = os.path.join(ROOT, "bench", "corpus")


def reproducers_among(results: str) -> list[str]:
  """Paths under `results` that are reproducers: a `_repro` folder or a repro_*.py script."""
  found = []
  for folder, dirs, files in os.walk(results):
    found += [os.path.join(folder, d) for d in dirs if d.endswith("_repro")]
    found += [os.path.join(folder, f) for f in files if re.fullmatch(r"repro_.*\.py", f)]
  return sorted(os.path.relpath(p, results) for p in found)


def test_the_results_hold_no_reproducer():
  assert reproducers_among(RESULTS) == [], "move reproducers to bench/corpus/"


def test_the_check_finds_a_planted_reproducer(tmp_path):
  (tmp_path / "fuzz_x_repro" / "unshrunk").mkdir(parents=True)
  (tmp_path / "archive").mkdir()
  (tmp_path / "archive" / "repro_values_0_1.py").write_text("")
  assert reproducers_among(str(tmp_path)) == ["archive/repro_values_0_1.py", "fuzz_x_repro"]


def test_each_corpus_folder_is_named_with_its_record():
  with open(os.path.join(CORPUS, "README.md")) as f:
    readme = f.read()
  folders = sorted(d for d in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, d)))
  assert len(folders) >= 3
  for folder in folders:
    assert f"`{folder}/`" in readme, f"bench/corpus/README.md does not name {folder}/"
    record = folder[:-len("_repro")] + ".json"
    assert os.path.exists(os.path.join(RESULTS, record)), f"{folder}: no record {record}"
    scripts = [f for _, _, files in os.walk(os.path.join(CORPUS, folder)) for f in files
               if f.endswith(".py")]
    assert scripts, f"{folder} holds no reproducer"

