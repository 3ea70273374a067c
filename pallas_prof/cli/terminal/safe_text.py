"""Text from a run, made safe for a terminal.

A saved run's texts (kernel names, notes, the generated source, the user's lines, a
run directory's own name) are data someone else may have written: an escape
sequence in them would retitle the window, clear the screen or reorder what the
reader sees. `printable` shows every such character as a visible stand-in instead:

    C0 controls but newline and tab    their Control Pictures: ESC as U+241B, CR as U+240D
    DEL                                U+2421
    C1 controls, bidi overrides and    <U+XXXX>
    isolates, line/paragraph separators

The console (render.console) passes everything it prints through here, and the
CLI's one-line error messages too (cli/main.py).
"""
from __future__ import annotations

import re

# what reorders or breaks lines where the reader cannot see it: the bidi embeddings,
# overrides, isolates and marks, and the Unicode line and paragraph separators
_INVISIBLE = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
_CONTROL_PICTURES = 0x2400         # U+2400 + n pictures C0 control n
_DELETE_PICTURE = "\u2421"


def _stand_in(match: re.Match) -> str:
  code = ord(match.group())
  if code < 0x20:
    return chr(_CONTROL_PICTURES + code)
  if code == 0x7f:
    return _DELETE_PICTURE
  return f"<U+{code:04X}>"


def printable(text: str) -> str:
  """`text` with every control character (newline and tab aside), bidi control and
  line separator replaced by a visible stand-in; other text as it is."""
  return _UNSAFE.sub(_stand_in, text)
