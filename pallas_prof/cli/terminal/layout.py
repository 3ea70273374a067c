"""Tables that fit a width: which columns give way, and how.

rich shrinks every column of a table that is too wide, numbers included, and
can squeeze a column to nothing. Here a table is laid out before rich sees
it: each column's natural width is its longest line; if the table is wider
than the console, the columns that may give way shrink, in the order of their
`give` (1 first: long text such as source lines; 2: labels; higher later), each
down to its `least` width. Numbers (give 0) never shrink. A column that gives way
either wraps at spaces (`wrap`) or ends in an ellipsis. Every cell is a Text,
so nothing is read as rich markup.
"""
from __future__ import annotations

import dataclasses

from rich import box
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

GAP = 2            # the space between two columns (padding 1 on each side, collapsed)
NARROW_GAP = 1     # the box's separator alone, where two spaces would cut a label
BREAK = "\x1f"     # in a cell of a `breaks` column: a space, or a line break when narrow


@dataclasses.dataclass(frozen=True)
class Col:
  header: str                 # may hold "\n": a header of several lines
  right: bool = False         # right-aligned (numbers)
  give: int = 0               # 0: never shrinks; 1 shrinks first, then 2, then 3 ...
  wrap: bool = False          # shrinks by wrapping at spaces, not by an ellipsis
  least: int = 8              # narrowest it shrinks to
  breaks: bool = False        # shrinks by a line break at each BREAK in its cells


def _natural(col: Col, cells: list[str]) -> int:
  lines = col.header.split("\n") + [c for cell in cells
                                    for c in cell.replace(BREAK, " ").split("\n")]
  return max(cell_len(line) for line in lines)


def _least(col: Col, cells: list[str]) -> int:
  if col.breaks:
    chunks = [c for cell in cells for c in cell.split(BREAK)] + col.header.split("\n")
    return max(cell_len(c) for c in chunks)
  if col.wrap:
    # a word is never cut: the longest one is as narrow as it gets
    words = [w for cell in cells for w in cell.split()] + col.header.split()
    return max([col.least] + [cell_len(w) for w in words])
  return max(col.least, max((cell_len(h) for h in col.header.split("\n")), default=0))


def gap(cols: list[Col], rows: list[list[str]], width: int) -> int:
  """GAP, or NARROW_GAP where the labels (the last to give way) would have to with GAP."""
  columns = [[row[i] for row in rows] for i in range(len(cols))]
  last = max((c.give for c in cols), default=0)
  shrunk = sum(_least(c, cells) if 0 < c.give < last else _natural(c, cells)
               for c, cells in zip(cols, columns, strict=True))
  return GAP if shrunk + GAP * (len(cols) - 1) <= width else NARROW_GAP


def widths(cols: list[Col], rows: list[list[str]], width: int, gap: int = GAP) -> list[int]:
  """Each column's width so that the table is at most `width` wide (where it can be)."""
  columns = [[row[i] for row in rows] for i in range(len(cols))]
  out = [_natural(c, cells) for c, cells in zip(cols, columns, strict=True)]
  excess = sum(out) + gap * (len(cols) - 1) - width
  for give in sorted({c.give for c in cols if c.give > 0}):
    if excess <= 0:
      break
    shrinkable = [i for i, c in enumerate(cols) if c.give == give]
    room = {i: max(0, out[i] - _least(cols[i], columns[i])) for i in shrinkable}
    total = sum(room.values())
    if not total:
      continue
    take = min(excess, total)
    # in proportion to what each can give; the rounding remainder from the widest
    cuts = {i: take * room[i] // total for i in shrinkable}
    left = take - sum(cuts.values())
    for i in sorted(shrinkable, key=lambda i: -(room[i] - cuts[i])):
      if left <= 0:
        break
      extra = min(left, room[i] - cuts[i])
      cuts[i] += extra
      left -= extra
    for i, cut in cuts.items():
      out[i] -= cut
    excess -= take
  return out


def natural_width(cols: list[Col], rows: list[list[str]]) -> int:
  columns = [[row[i] for row in rows] for i in range(len(cols))]
  natural = sum(_natural(c, cells) for c, cells in zip(cols, columns, strict=True))
  return natural + GAP * (len(cols) - 1)


def table(title: str, cols: list[Col], rows: list[list[str]], width: int,
          caption: str | None = None) -> Table:
  spacing = gap(cols, rows, width)
  t = Table(title=Text(title, style="bold"), title_justify="left", box=box.SIMPLE_HEAD,
            pad_edge=False, collapse_padding=True, show_edge=False,
            padding=(0, 1) if spacing == GAP else (0, 0))
  sized = widths(cols, rows, width, spacing)
  broken = set()     # the `breaks` columns narrower than their cells
  for i, (col, w) in enumerate(zip(cols, sized, strict=True)):
    t.add_column(Text(col.header), justify="right" if col.right else "left", width=w,
                 no_wrap=not col.wrap, overflow="fold" if col.wrap else "ellipsis")
    if col.breaks and w < _natural(col, [row[i] for row in rows]):
      broken.add(i)
  for row in rows:
    t.add_row(*(Text(cell.replace(BREAK, "\n" if i in broken else " "))
                for i, cell in enumerate(row)))
  if caption:
    t.caption = Text(caption)
    t.caption_justify = "left"
  return t
