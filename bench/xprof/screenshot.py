"""XProf's own UI, served locally on a profile pallas-prof wrote, in headless Chromium: a
screenshot of its trace viewer (issue 41 item 1, "a headless browser loads the XProf UI
locally on it"). A proof tool, not a test: it needs the xprof package, which pallas-prof
does not depend on.

    JAX_PLATFORMS=cpu pallas-prof run --xprof /tmp/xprof-logdir examples/softmax.py
    python3 bench/xprof/screenshot.py /tmp/xprof-logdir --xprof /tmp/xprof-venv/bin/xprof \\
        --png docs/images/xprof-trace-viewer.png

Starts `xprof --logdir DIR --port P` (XProf's own server, no TensorBoard), opens its page
in Chromium through the project's driver (pallas_prof/cli/html/browser.py), picks the
newest session and the Trace Viewer tool as a user would, waits for pallas-prof's plane
to be drawn, and saves the page. Stops the server it started.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _wait_for(url: str, seconds: float) -> None:
  deadline = time.time() + seconds
  while time.time() < deadline:
    try:
      urllib.request.urlopen(url, timeout=5).read()
      return
    except OSError:
      time.sleep(1)
  raise TimeoutError(f"XProf's server did not answer at {url} in {seconds:.0f} s")


def screenshot(logdir: str, xprof: str, png: str, wait_s: float) -> str:
  from pallas_prof.cli.html.browser import browser
  port = _free_port()
  server = subprocess.Popen([xprof, "--logdir", logdir, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    base = f"http://localhost:{port}/"
    _wait_for(base + "data/plugin/profile/runs", 120)
    with browser() as ctx:
      page = ctx.new_page()
      page.set_viewport_size({"width": 1600, "height": 1000})
      page.goto(base, wait_until="networkidle")
      page.get_by_text("Overview Page", exact=True).first.click()
      page.get_by_role("option", name="Trace Viewer").first.click()
      deadline = time.time() + wait_s
      text = ""
      while time.time() < deadline and "pallas-prof" not in text:
        time.sleep(2)
        text = " ".join(f.evaluate("document.body ? document.body.innerText : ''")
                        for f in page.frames)
      page.screenshot(path=png)
      return text
  finally:
    server.terminate()
    server.wait(timeout=30)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("logdir", help="the --xprof DIR of a pallas-prof run")
  parser.add_argument("--xprof", default="xprof", help="XProf's server command")
  parser.add_argument("--png", default="docs/images/xprof-trace-viewer.png")
  parser.add_argument("--wait", type=float, default=120, help="seconds to wait for the plane")
  args = parser.parse_args(argv)
  text = screenshot(args.logdir, args.xprof, args.png, args.wait)
  shown = "pallas-prof" in text
  print(f"wrote {args.png}; pallas-prof's plane {'shown' if shown else 'NOT found'} in the "
        "page's text")
  return 0 if shown else 1


if __name__ == "__main__":
  sys.exit(main())
