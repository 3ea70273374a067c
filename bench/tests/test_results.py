"""bench/results: the current summary (README.md) and the archive (archive/README.md) name
records that are there, commands whose scripts can still be found, and no record beside the
summary that it does not name; patches and large logs are kept compressed (issue 31, item 8).

A record is named in backticks, alone (`suite_h200_d17c20b.json`, `sanitizer_h200_eccb7e4/`,
`suite_h200_69690a1_{split,chained,summed}.json`), or linked ([text](archive/README.md)),
relative to the README's own folder. A recorded command keeps the script path it ran with;
such a path must exist now or be listed, with where it is now, in the summary's table of
moved scripts."""
from __future__ import annotations

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "results")
SUMMARY = os.path.join(RESULTS, "README.md")
ARCHIVE = os.path.join(RESULTS, "archive", "README.md")
READMES = [SUMMARY, ARCHIVE]

_RECORD = re.compile(r"[\w.*{},+-]+(?:/[\w.*{},+-]+)*(?:\.(?:json|jsonl|gz|log|txt|md|xml|patch|svg|png"
                     r"|tgz)|/)")
_SCRIPT = re.compile(r"(?<![\w/.-])(bench/[\w/.-]+\.(?:py|sh))(?![\w])")
_CODE = re.compile(r"`([^`\n]+)`")
_TOP = ("bench/", "tests/", "pallas_prof/", "examples/", "tools/", ".")


def _read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


def _exists(folder: str, name: str) -> bool:
  """name under folder, with {a,b} alternatives (each must be there) and globs."""
  brace = re.search(r"\{([^}]*)\}", name)
  if brace:
    return all(_exists(folder, name[:brace.start()] + alt + name[brace.end():])
               for alt in brace.group(1).split(","))
  return bool(glob.glob(os.path.join(folder, name)))


def named_records(text: str) -> list[str]:
  """The record files and folders a README names: lone backticked names and link targets
  (placeholders such as <commit>, and names of the project's code, left out)."""
  names = [span for span in _CODE.findall(text) if " " not in span]
  names += re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
  return [n for n in names if _RECORD.fullmatch(n) and not n.startswith(_TOP)
          and not re.match(r"[a-z]+://", n)]


def moved_scripts(summary: str) -> dict[str, str]:
  """old path -> new path, from the summary's table of moved scripts (`bench/<folder>/` and
  the names that were `bench/<name>`) and its list of probes moved earlier."""
  moves = {}
  for row in re.findall(r"^\| `(bench/\w+/)` \|[^|]*\| ([^|]+) \|$", summary, re.M):
    folder, names = row
    for name in re.findall(r"`([\w.]+)`", names):
      moves[f"bench/{name}"] = folder + name
  earlier = re.search(r"the one-off probes moved to `bench/probes/`: (.*?)\.\n", summary, re.S)
  for old in re.findall(r"`(bench/[\w.]+)`", earlier.group(1) if earlier else ""):
    moves[old] = "bench/probes/" + old.split("/", 1)[1]
  return moves


def missing_records(readme: str, text: str | None = None) -> list[str]:
  text = _read(readme) if text is None else text
  folder = os.path.dirname(readme)
  return sorted({n for n in named_records(text) if not _exists(folder, n)})


def lost_scripts(text: str, moves: dict[str, str]) -> list[str]:
  """Script paths (in prose or in a recorded command) that are neither there nor moved to a
  path that is there."""
  lost = set()
  for path in _SCRIPT.findall(text):
    now = path if os.path.exists(os.path.join(ROOT, path)) else moves.get(path)
    if not now or not os.path.exists(os.path.join(ROOT, now)):
      lost.add(path)
  return sorted(lost)


@pytest.mark.parametrize("readme", READMES, ids=lambda p: os.path.relpath(p, RESULTS))
def test_every_record_a_results_readme_names_is_there(readme):
  assert named_records(_read(readme)), "no record read out of the README: the reader is broken"
  missing = missing_records(readme)
  assert not missing, f"{os.path.relpath(readme, ROOT)} names records that are not there: {missing}"


@pytest.mark.parametrize("readme", READMES, ids=lambda p: os.path.relpath(p, RESULTS))
def test_every_script_a_recorded_command_runs_can_be_found(readme):
  moves = moved_scripts(_read(SUMMARY))
  lost = lost_scripts(_read(readme), moves)
  assert not lost, (f"{os.path.relpath(readme, ROOT)} names scripts that are not there and not in "
                    f"the summary's table of moved scripts: {lost}")


def test_the_table_of_moved_scripts_points_at_scripts_that_are_there():
  moves = moved_scripts(_read(SUMMARY))
  assert moves["bench/suite.py"] == "bench/suite/suite.py"
  assert moves["bench/bitwise_probe.py"] == "bench/probes/bitwise_probe.py"
  assert len(moves) >= 43
  for old, new in moves.items():
    assert os.path.exists(os.path.join(ROOT, new)), f"{old} -> {new}, which is not there"
    assert not os.path.exists(os.path.join(ROOT, old)), f"{old} is listed as moved but is still there"


def test_the_summary_names_every_record_beside_it():
  """Each file and folder of bench/results/ (not the archive) is named in the summary, by its
  name or its stem (X.json names X.jsonl.gz, X.log.gz and X_repro/ beside it)."""
  text = _read(SUMMARY)
  unnamed = []
  for entry in sorted(os.listdir(RESULTS)):
    if entry in ("README.md", "archive"):
      continue
    stem = re.sub(r"(\.jsonl\.gz|\.json|\.log\.gz|\.txt\.gz|\.xml\.gz|\.txt|\.log|\.md|_repro)$", "", entry)
    if stem not in text:
      unnamed.append(entry)
  assert not unnamed, f"records beside the summary that it does not name (name them or archive them): {unnamed}"


def test_the_summarys_topic_links_reach_its_headings():
  text = _read(SUMMARY)
  anchors = {re.sub(r"[^\w\- ]", "", line[3:].strip().lower()).replace(" ", "-")
             for line in text.splitlines() if line.startswith("## ")}
  links = re.findall(r"\]\(#([^)]+)\)", text)
  assert links and set(links) <= anchors, set(links) - anchors


def test_the_summary_keeps_the_latest_gpu_calls_and_issue_32s_fuzz_totals():
  text = _read(SUMMARY)
  assert "### The next session's three H200 calls" in text
  assert "### The session of 2026-12-03, 18:14-18:52 UTC: three H200 calls" in text
  assert "### The session of 2026-12-03 22:41 to 12-04 01:20 UTC: three H200 calls" in text
  assert "GPU fuzz programs in all, four sessions: 99,772" in text


def test_patches_and_large_logs_are_compressed():
  plain = []
  for path in glob.glob(os.path.join(ROOT, "bench", "**", "*"), recursive=True):
    name = os.path.basename(path)
    if not os.path.isfile(path) or name.endswith(".gz"):
      continue
    if name.endswith((".patch", ".diff")) or (
        name.endswith((".log", ".txt", ".xml")) and os.path.getsize(path) > 40_000):
      plain.append(os.path.relpath(path, ROOT))
  assert not plain, f"gzip these (and name the .gz where a README names them): {plain}"


def test_the_checks_find_what_was_planted(tmp_path):
  """A README naming a record that is not there, a file of a folder, a brace set with one
  member gone, and a recorded command whose script is neither there nor in the table."""
  (tmp_path / "there.json").write_text("{}")
  (tmp_path / "runs").mkdir()
  (tmp_path / "a_x.json").write_text("{}")
  readme = str(tmp_path / "README.md")
  text = ("Records: `there.json`, `gone.json`, `runs/`, `runs/one.log.gz`, `a_{x,y}.json`,\n"
          "[the archive](archive/README.md), `suite_h200_<commit>.json`, `.log.gz`,\n"
          "`pallas_prof/backend/x.py`; ran `python3 bench/suite.py --quick` and\n"
          "`bash bench/no_such_step.sh`, and `python3 bench/suite/suite.py`.\n")
  assert missing_records(readme, text) == ["a_{x,y}.json", "archive/README.md", "gone.json",
                                           "runs/one.log.gz"]
  moves = {"bench/suite.py": "bench/suite/suite.py"}
  assert lost_scripts(text, moves) == ["bench/no_such_step.sh"]
  assert lost_scripts(text, {}) == ["bench/no_such_step.sh", "bench/suite.py"]
  assert lost_scripts(text, {"bench/suite.py": "bench/suite/gone.py"}) == [
      "bench/no_such_step.sh", "bench/suite.py"]
