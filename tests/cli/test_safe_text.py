"""Text from a saved run reaches the terminal without its control characters
(cli/terminal/safe_text.py, and the console that applies it to everything it prints)."""
from __future__ import annotations

import io
import json

import pytest
from rich.text import Text

from pallas_prof.cli.main import main
from pallas_prof.cli.terminal import layout
from pallas_prof.cli.terminal.render import console
from pallas_prof.cli.terminal.safe_text import printable

TITLE = "\x1b]0;owned\x07"          # sets the terminal's title
CLEAR = "\x1b[2J"                   # clears the screen
BIDI = "\u202e"                     # right-to-left override: reorders what follows


def raw_controls(text: str) -> list[str]:
  """The characters of `text` a terminal would act on rather than show."""
  return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
          or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"]


@pytest.mark.parametrize("text, shown", [
    ("a\x1bb", "a\u241bb"),                      # ESC as its Control Picture
    ("tab\tand\nnewline", "tab\tand\nnewline"),  # layout stays
    ("cr\r", "cr\u240d"),
    ("del\x7f", "del\u2421"),
    ("c1\x9b", "c1<U+009B>"),                    # the one-byte CSI
    (f"x{BIDI}y", "x<U+202E>y"),
    ("line\u2028sep", "line<U+2028>sep"),
    ("µs – ok ✓", "µs – ok ✓"),                 # other text as it is
])
def test_printable_shows_controls_visibly(text, shown):
  assert printable(text) == shown
  assert printable(printable(text)) == shown      # the console may pass text twice


def test_the_console_prints_no_control_characters_and_no_markup():
  out = io.StringIO()
  con = console(out)
  con.print(Text(f"name{TITLE}{CLEAR}{BIDI} [bold]kept[/bold]"))
  con.print(f"a plain string {CLEAR}")
  con.print(layout.table("kernels", [layout.Col("kernel")], [[f"k{CLEAR}#1"]], 80))
  text = out.getvalue()
  assert not raw_controls(text), [hex(ord(c)) for c in raw_controls(text)]
  assert "name\u241b]0;owned" in text and "\u241b[2J" in text and "<U+202E>" in text
  assert "[bold]kept[/bold]" in text                       # markup is printed, not obeyed
  assert "k\u241b[2J#1" in text


def test_an_error_message_quoting_saved_text_is_made_printable(tmp_path):
  """The CLI's one-line errors quote a run's names: main() passes them through
  printable too (this one lists the report's kernels, one with an escape in its label)."""
  report = {"schema": "pallas-prof/run/1", "kernels": [{"label": f"k{CLEAR}#1", "name": "k"}]}
  (tmp_path / "report.json").write_text(json.dumps(report))
  with pytest.raises(SystemExit) as e:
    main(["show", "other", "--dir", str(tmp_path)])
  message = str(e.value.code)
  assert message.startswith("pallas-prof: no kernel 'other'") and "k\u241b[2J#1" in message
  assert not raw_controls(message)
