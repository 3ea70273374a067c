"""A small, strict unified-diff applier: the suite's "advised" column applies the diff
`pallas-prof advise` keeps (a split reduction, kind e) to a copy of the op's module, as a
user would with `patch -p1`, but with no fuzz and no offset: every hunk must match the
file at the very lines its header names, or DiffDoesNotApply says which hunk, which line,
what the diff expected and what the file has. A diff that applies with fuzz has been
applied to a file it was not made against, and a timing of that file would be a timing of
something advise never checked.

    patches = parse(diff_text)              # [FilePatch], one per file the diff touches
    new_text = patches[0].apply(old_text)
"""
from __future__ import annotations

import dataclasses
import re

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_NO_NEWLINE = "\\ No newline at end of file"


class DiffDoesNotApply(ValueError):
  """The diff is malformed, or one of its hunks does not match the file; the message says
  where and why."""


@dataclasses.dataclass(frozen=True)
class Hunk:
  old_start: int              # 1-based; with old_len 0, the line after which it inserts
  old_len: int
  new_start: int
  new_len: int
  lines: tuple[str, ...]      # each with its mark (" ", "-", "+") and its line ending

  @property
  def old(self) -> list[str]:
    return [x[1:] for x in self.lines if x[0] in " -"]

  @property
  def new(self) -> list[str]:
    return [x[1:] for x in self.lines if x[0] in " +"]


@dataclasses.dataclass(frozen=True)
class FilePatch:
  old_path: str               # as the header names it ("a/x/rms_norm.py")
  new_path: str
  hunks: tuple[Hunk, ...]

  def path(self, strip: int = 1) -> str:
    """The file's path with `strip` leading components removed (patch's -p)."""
    parts = self.old_path.split("/")
    return "/".join(parts[strip:]) if len(parts) > strip else parts[-1]

  def apply(self, text: str) -> str:
    """`text` with every hunk applied at its own lines; DiffDoesNotApply where any one does
    not match exactly."""
    lines = text.splitlines(True)
    out: list[str] = []
    at = 0                    # lines of `lines` consumed
    delta = 0                 # new line numbers minus old ones, from the hunks before
    for n, h in enumerate(self.hunks, 1):
      start = h.old_start if h.old_len == 0 else h.old_start - 1    # 0-based first old line
      where = f"{self.old_path}, hunk {n} (@@ -{h.old_start},{h.old_len} +{h.new_start},{h.new_len} @@)"
      if start < at:
        raise DiffDoesNotApply(f"{where}: it starts at line {h.old_start}, before the end of "
                               "the hunk before it (hunks must be in order, not overlapping)")
      # an empty side's start names the line before it (diff -u's convention)
      expected = h.old_start + delta + (h.old_len == 0) - (h.new_len == 0)
      if h.new_start != expected:
        raise DiffDoesNotApply(f"{where}: its new start {h.new_start} is not its old start "
                               f"{h.old_start} moved by the {delta:+d} lines the hunks before "
                               "it added")
      if start + h.old_len > len(lines):
        raise DiffDoesNotApply(f"{where}: it needs lines {start + 1}-{start + h.old_len}, the "
                               f"file has {len(lines)}")
      for i, want in enumerate(h.old):
        got = lines[start + i]
        if got != want:
          raise DiffDoesNotApply(f"{where} does not match the file at line {start + i + 1}: "
                                 f"the diff expects {want!r}, the file has {got!r}")
      out += lines[at:start] + h.new
      at = start + h.old_len
      delta += h.new_len - h.old_len
    return "".join(out + lines[at:])


def parse(diff: str) -> list[FilePatch]:
  """The file patches of a unified diff (difflib's, git's, diff -u's); DiffDoesNotApply
  for a header without its hunks, a hunk whose body does not have the lines its header
  counts, or a line that is none of context, removal and addition."""
  rows = diff.splitlines(True)
  patches: list[FilePatch] = []
  i = 0
  while i < len(rows):
    row = rows[i]
    if not row.startswith("--- "):
      if row.startswith(("@@", "+++ ")):
        raise DiffDoesNotApply(f"diff line {i + 1}: {row.rstrip()!r} outside a file's header")
      i += 1                  # git's "diff --git" / "index" lines, text before the diff
      continue
    if i + 1 >= len(rows) or not rows[i + 1].startswith("+++ "):
      raise DiffDoesNotApply(f"diff line {i + 1}: a '---' header without its '+++' line")
    old_path, new_path = _header_path(row), _header_path(rows[i + 1])
    i += 2
    hunks = []
    while i < len(rows) and rows[i].startswith("@@"):
      hunk, i = _hunk(rows, i)
      hunks.append(hunk)
    if not hunks:
      raise DiffDoesNotApply(f"{old_path}: a file header with no hunk")
    patches.append(FilePatch(old_path, new_path, tuple(hunks)))
  if not patches:
    raise DiffDoesNotApply("no file in the diff (no '--- ' header)")
  return patches


def _header_path(row: str) -> str:
  return row[4:].rstrip("\n").split("\t")[0].strip()


def _hunk(rows: list[str], i: int) -> tuple[Hunk, int]:
  m = _HUNK.match(rows[i])
  if m is None:
    raise DiffDoesNotApply(f"diff line {i + 1}: not a hunk header: {rows[i].rstrip()!r}")
  old_start, new_start = int(m.group(1)), int(m.group(3))
  old_len = 1 if m.group(2) is None else int(m.group(2))
  new_len = 1 if m.group(4) is None else int(m.group(4))
  body: list[str] = []
  olds = news = 0
  j = i + 1
  while (olds < old_len or news < new_len) and j < len(rows):
    row = rows[j]
    if row.rstrip("\n") == _NO_NEWLINE:
      if body:
        body[-1] = body[-1].rstrip("\n")
      j += 1
      continue
    mark = row[:1]
    if mark not in (" ", "-", "+"):
      if row in ("\n", "\r\n"):        # an empty context line whose space was stripped
        row, mark = " " + row, " "
      else:
        raise DiffDoesNotApply(f"diff line {j + 1}: {row.rstrip()!r} is not a context, "
                               "removed or added line")
    olds += mark in " -"
    news += mark in " +"
    body.append(row)
    j += 1
  if j < len(rows) and rows[j].rstrip("\n") == _NO_NEWLINE:
    body[-1] = body[-1].rstrip("\n")
    j += 1
  if (olds, news) != (old_len, new_len):
    raise DiffDoesNotApply(f"diff line {i + 1}: the hunk's header counts {old_len} old and "
                           f"{new_len} new lines, its body has {olds} and {news}")
  return Hunk(old_start, old_len, new_start, new_len, tuple(body)), j
