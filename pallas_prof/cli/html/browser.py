"""Open report.html in headless Chromium: the page's DOM, its JavaScript errors, a screenshot.

    python3 -m pallas_prof.cli.html.browser RUN_DIR [RUN_DIR...] --png OUT.png

renders report.html for each run directory (from its report.json) and saves a
full-page screenshot. It drives Debian's Chromium (/usr/bin/chromium, or
$PALLAS_PROF_CHROMIUM) through Playwright's Python package; Playwright's own
browser download is never used. The browser test (tests/cli/test_html_browser.py)
goes through the same `open_report`.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile

from ... import settings
from . import write_html

# as the machine's notes give them: without the background-networking flags Chromium
# keeps trying hosts that a closed network refuses
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync")


class BrowserMissing(RuntimeError):
  pass


def chromium_path() -> str:
  path = settings.value("PALLAS_PROF_CHROMIUM") or shutil.which("chromium") \
      or shutil.which("chromium-browser")
  if not path:
    raise BrowserMissing("no Chromium found: apt-get install -y chromium (.ci/run installs it), "
                         "or set PALLAS_PROF_CHROMIUM to a Chromium binary")
  return path


@contextlib.contextmanager
def browser():
  """A headless Chromium with a fresh profile directory, closed on exit."""
  try:
    # lazy: optional: playwright.sync_api may be absent
    from playwright.sync_api import sync_playwright
  except ImportError:
    raise BrowserMissing("the Python package playwright is not installed: "
                         "pip install -e '.[test]'") from None
  with tempfile.TemporaryDirectory(prefix="pallas-prof-chromium-") as profile, \
       sync_playwright() as pw:
    ctx = pw.chromium.launch_persistent_context(
        profile, executable_path=chromium_path(), headless=True,
        args=[f for f in CHROMIUM_FLAGS if f != "--headless"],
        viewport={"width": 1440, "height": 1000})
    try:
      yield ctx
    finally:
      ctx.close()


@contextlib.contextmanager
def open_report(ctx, html_path: str):
  """The page of `html_path` loaded from file://, with a list of its JavaScript errors
  (uncaught exceptions and console errors) and of any request that left the file."""
  page = ctx.new_page()
  errors: list[str] = []
  remote: list[str] = []
  page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
  page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}")
          if m.type == "error" else None)
  page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:",
                                                                            "about:")) else None)
  page.goto("file://" + os.path.abspath(html_path), wait_until="load")
  try:
    yield page, errors, remote
  finally:
    page.close()


def screenshot(run_dirs: list[str], png: str, *, width: int = 1440, top: int = 0,
               height: int | None = None) -> list[str]:
  """Renders each run's report.html and saves screenshots (png, png-2, ...): the whole
  page, or `height` pixels of it from `top`."""
  written = []
  with browser() as ctx:
    for i, d in enumerate(run_dirs):
      html = write_html(d) if os.path.isdir(d) else d
      out = png if i == 0 else f"{os.path.splitext(png)[0]}-{i + 1}.png"
      with open_report(ctx, html) as (page, errors, remote):
        page.set_viewport_size({"width": width, "height": 1000})
        if height:
          page.screenshot(path=out, full_page=True,
                          clip={"x": 0, "y": top, "width": width, "height": height})
        else:
          page.screenshot(path=out, full_page=True)
        if errors or remote:
          print(f"{html}: {errors + remote}", file=sys.stderr)
      written.append(out)
  return written


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("run_dirs", nargs="+", help="run directories (or report.html files)")
  ap.add_argument("--png", required=True, help="screenshot path (more runs: -2, -3 appended)")
  ap.add_argument("--width", type=int, default=1440)
  ap.add_argument("--height", type=int, help="only this many pixels of the page (from --top)")
  ap.add_argument("--top", type=int, default=0)
  args = ap.parse_args(argv)
  for path in screenshot(args.run_dirs, args.png, width=args.width, top=args.top,
                         height=args.height):
    print(path)
  return 0


if __name__ == "__main__":
  sys.exit(main())
