"""`pallas-prof run` and `advise` as a terminal user sees them (issue 39's proof): each
command runs under a pseudo-terminal of 100 columns and 40 rows (TERM=xterm-256color),
and what reaches the screen is read back: styles are on, yet no line is wider than the
terminal once the escape codes are stripped; the report's parts are there; nothing but
colour and style escapes (SGR) reaches it; no traceback.

On a CPU: the parts asserted are the CPU report's (static advice, no timings), and on a
GPU `advise` would spend its trial budget on every kernel."""
from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest
from rich.cells import cell_len

from pallas_prof.advice.schema import KINDS
from tests.cli.test_cli import EXAMPLES, ROOT

pytestmark = pytest.mark.no_gpu

COLUMNS, ROWS = 100, 40
SGR = re.compile(r"\x1b\[[0-9;]*m")
# what may reach the screen besides text and SGR: the line ends the terminal makes of "\n"
OTHER_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\r(?!\n)")

READS_PAST = '''\
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def window_kernel(start_ref, x_ref, o_ref):
  o_ref[...] = x_ref[pl.ds(start_ref[0], 24)] * 3.0


call = pl.pallas_call(window_kernel, out_shape=jax.ShapeDtypeStruct((24,), jnp.float32))
print(call(np.array([95], np.int32), np.arange(100, dtype=np.float32)))
'''


def in_a_terminal(tmp_path, *args, timeout: float = 120) -> tuple[int, str]:
  """`pallas-prof ARGS` with a pseudo-terminal of COLUMNS x ROWS as its stdin, stdout and
  stderr: (its exit status, everything it wrote there, as the terminal got it)."""
  env = dict(os.environ, TERM="xterm-256color", PALLAS_PROF_CACHE_DIR=str(tmp_path / "cache"),
             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  for name in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "PALLAS_PROF_TRACE"):
    env.pop(name, None)                # the terminal's own size and colours, as a user's
  screen, terminal = os.openpty()
  fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
  process = subprocess.Popen([sys.executable, "-m", "pallas_prof", *args], stdin=terminal,
                             stdout=terminal, stderr=terminal, env=env, cwd=tmp_path,
                             start_new_session=True)
  os.close(terminal)
  chunks, deadline = [], time.monotonic() + timeout
  try:
    while time.monotonic() < deadline:
      ready, _, _ = select.select([screen], [], [], 1.0)
      if not ready:
        continue
      try:
        data = os.read(screen, 1 << 16)
      except OSError:                  # EIO: every writer of the terminal has closed it
        break
      if not data:
        break
      chunks.append(data)
    else:
      process.kill()
      pytest.fail(f"pallas-prof {' '.join(args)} did not end in {timeout} s")
  finally:
    os.close(screen)
  return process.wait(timeout=30), b"".join(chunks).decode("utf-8")


def screen_lines(raw: str) -> list[str]:
  """What the terminal shows, line by line: with every SGR escape stripped, and the
  other control characters left for the caller to find."""
  return SGR.sub("", raw).replace("\r\n", "\n").split("\n")


def assert_fits_the_terminal(raw: str) -> str:
  """The checks every command's screen passes; returns its text with whitespace runs as
  single spaces (the report wraps its long lines)."""
  assert SGR.search(raw), "no colour or style reached the terminal"
  plain = "\n".join(screen_lines(raw))
  assert not OTHER_CONTROLS.findall(plain) and "\x1b" not in plain, \
      sorted(set(OTHER_CONTROLS.findall(plain)))
  wide = [(cell_len(line), line) for line in screen_lines(raw) if cell_len(line) > COLUMNS]
  assert not wide, f"lines wider than the terminal's {COLUMNS} columns: {wide}"
  assert "Traceback" not in plain, plain
  return " ".join(plain.split())


def assert_report_parts(words: str, kernel: str, out) -> None:
  """The run report's parts, in their order: the kernels table (its header, then the
  kernel's row), the hot equations, the advice, the closing line that says where the
  run is."""
  at = 0
  for part in (" kernel grid stages ", f" {kernel}#", f"hot equations of {kernel}#",
               f"advice for {kernel}#", f"wrote {out}/ (report.json, report.html"):
    found = words.find(part, at)
    assert found >= 0, f"{part!r} is not after {words[:at][-200:]!r}: {words}"
    at = found + len(part)


def assert_actions_and_their_legend(words: str) -> None:
  """Each action shown is marked by its kind, and the legend says what each kind shown
  means, once."""
  kinds = sorted(set(re.findall(r" \d+\. \[([a-d])\] ", words)))
  assert kinds, f"no action shown: {words}"
  assert words.count(" kinds: ") == 1, words
  legend = words.split(" kinds: ", 1)[1]
  assert legend.startswith("; ".join(f"[{k}] {KINDS[k]}" for k in kinds)), legend


# the matmul example: its CPU run's advice has actions to show (vector_add's programs are
# too small to split, so its advice proposes none)
def test_run_in_a_terminal(tmp_path):
  out = tmp_path / "run"
  code, raw = in_a_terminal(tmp_path, "run", "--out", str(out),
                            os.path.join(EXAMPLES, "matmul.py"))
  assert code == 0, raw
  words = assert_fits_the_terminal(raw)
  assert "matmul 256x256x256 bfloat16: relative error = " in words   # the script's own output
  assert_report_parts(words, "matmul_kernel", out)
  assert_actions_and_their_legend(words)
  assert (out / "report.json").exists()


def test_advise_in_a_terminal(tmp_path):
  out = tmp_path / "advise"
  code, raw = in_a_terminal(tmp_path, "advise", "--out", str(out), "--tuning-file",
                            str(tmp_path / "tuning.json"), os.path.join(EXAMPLES, "matmul.py"))
  assert code == 0, raw
  words = assert_fits_the_terminal(raw)
  # said before the script runs (its first line), as long as the terminal is wide
  assert screen_lines(raw)[0].startswith("pallas-prof advise: no NVIDIA GPU"), raw
  assert 'each action marked "not measured: no GPU". Running the script now.' in words
  assert_report_parts(words, "matmul_kernel", out)
  assert_actions_and_their_legend(words)
  assert (out / "report.json").exists()


def test_a_kernel_that_fails_in_a_terminal(tmp_path):
  """The run-time error box, drawn for the terminal, names the ref as the kernel does."""
  (tmp_path / "reads_past.py").write_text(READS_PAST)
  out = tmp_path / "run"
  code, raw = in_a_terminal(tmp_path, "run", "--out", str(out), "reads_past.py")
  assert code == 1, raw
  words = assert_fits_the_terminal(raw)
  assert "╭─ pallas-prof: kernel `window_kernel` failed at run time, at `get`" in words
  assert "<- x_ref[d:d+24]" in words and "blocks start_ref: i32[1], x_ref: f32[100]" in words
  assert_report_parts(words, "window_kernel", out)
