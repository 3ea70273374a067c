"""The README is a short quickstart and the docs stand on their own (issue 30, item 1):
a virtual environment first, the test command, no page outside the project, every link
and picture there, the run command's options before the script."""
from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
DOCS = os.path.join(ROOT, "docs")


def _pages() -> list[str]:
  return [README] + sorted(os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))


def _read(path: str) -> str:
  with open(path, encoding="utf-8") as f:
    return f.read()


def test_the_readme_is_a_short_quickstart():
  text = _read(README)
  assert len(text.splitlines()) <= 150, "the README is the quickstart: depth goes in docs/"
  run = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && " \
        "pallas-prof run examples/softmax.py"
  assert run in text
  assert "\n    bash tools/test.sh\n" in text
  assert "pip install" not in text.split(run)[0]          # nothing installs before the venv
  commands = [line for line in text.splitlines() if line.startswith("    ")]
  assert not any("apt-get" in line for line in commands)   # tools/test.sh guards its own
  # `run` installs the backend by itself, and its options go before the script
  assert "need not call\n`pallas_prof.install()`" in text or "need not call `pallas_prof.install()`" in text
  assert "pallas-prof run [options] script.py [script args]" in text
  assert not re.search(r"pallas-prof run \S+\.py [^\n#]*--out", text)
  assert "from pallas_prof import triton as plgpu  # instead of: from jax.experimental.pallas " \
         "import triton as plgpu" in text
  for size in ("850 MB", "XDG_CACHE_HOME", "PALLAS_PROF_NO_RECEIVER_INSTALL=1"):
    assert size in text


def test_no_page_points_outside_the_project():
  for path in _pages():
    text = _read(path)
    for outside in ("../shared", "shared folder", "/work/", "DESIGN.md"):
      assert outside not in text, f"{os.path.relpath(path, ROOT)} mentions {outside!r}"


def test_every_link_and_picture_is_there():
  for path in _pages():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _read(path)):
      if re.match(r"[a-z]+://", target):
        continue
      full = os.path.normpath(os.path.join(os.path.dirname(path), target))
      assert os.path.exists(full), f"{os.path.relpath(path, ROOT)} links to missing {target}"


def test_the_screenshots_are_small_pngs():
  images = os.path.join(DOCS, "images")
  shots = [f for f in os.listdir(images) if f.endswith(".png")]
  assert {"report-cpu.png", "report-run-time-failure.png"} <= set(shots)
  for name in shots:
    with open(os.path.join(images, name), "rb") as f:
      data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 300_000, name


def test_each_readme_command_is_one_the_cli_has():
  from pallas_prof.cli.main import _parser
  commands = set(_parser()._subparsers._group_actions[0].choices)
  used = set(re.findall(r"^    pallas-prof (\w+)(?![.\w])", _read(README), re.M))
  assert used and used <= commands, used - commands


def test_the_readme_says_what_the_test_command_does_when_a_leg_fails():
  """The README said "the first leg that fails stops the script"; tools/test.sh runs
  every leg whatever the one before it did and fails if any did."""
  script = _read(os.path.join(ROOT, "tools", "test.sh"))
  text = " ".join(_read(README).split())
  assert 'failed="$failed $l"' in script and "exit 1" in script     # every leg, then the verdict
  assert "stops the script" not in text
  assert "Both legs run even when the first fails, and the script fails if either did" in text


def test_development_says_what_the_test_command_does_when_a_leg_fails():
  """docs/development.md said a failed leg stops the script before the next; tools/test.sh
  runs every leg and fails if any did, as the README says (issue 48, item 16)."""
  script = _read(os.path.join(ROOT, "tools", "test.sh"))
  text = " ".join(_read(os.path.join(DOCS, "development.md")).split())
  assert 'failed="$failed $l"' in script and "== FAILED leg(s):" in script
  assert "stops the script" not in text
  assert "Both legs run even when the first fails, and the script fails if either did" in text
