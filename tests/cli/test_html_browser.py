"""report.html in a real browser: Debian's headless Chromium driven by Playwright.

No skip: without Chromium these tests fail and say how to install it (.ci/run
installs it). One browser serves every page of the module.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pallas_prof.cli import html
from pallas_prof.cli.html.browser import browser, open_report
from pallas_prof.cli.report import RunReport
from tests.cli.test_html import ROOT, gpu_pipeline_run, hostile_run

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium():
  with browser() as ctx:
    yield ctx


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
  """`pallas-prof run examples/softmax.py` on this CPU: the page it wrote."""
  out = tmp_path_factory.mktemp("html") / "softmax"
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  result = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out", str(out),
                           os.path.join(ROOT, "examples", "softmax.py")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  assert "report.html" in result.stdout                 # the run's last line names the page
  return out / "report.html"


def _attribution(page_path) -> dict:
  """The run's one kernel's attribution in report.json, beside its report.html."""
  report = json.loads((page_path.parent / "report.json").read_text())
  (kernel,) = report["profiles"][0]["kernels"]
  return kernel["attribution"]


def test_cpu_run_page_shows_the_kernel_its_lines_and_no_roofline(chromium, cpu_run):
  with open_report(chromium, str(cpu_run)) as (page, errors, remote):
    assert page.get_attribute("body", "data-ready") == "1"          # the page's script ran
    section = page.locator("section.kernel")
    assert section.count() == 1
    assert page.inner_text("section.kernel h2.kernel-label").startswith("softmax_kernel#")
    user = page.locator(".user-source tr.hot")
    texts = user.all_inner_texts()
    titles = [user.nth(i).get_attribute("title") for i in range(user.count())]
    # each heated line: its weight, and its equations named when the line is pointed at
    assert any("e = jnp.exp(x)" in t and title == "[4] exp" for t, title in zip(texts, titles)), \
        (texts, titles)
    assert all(t.split("\t")[1].endswith("%") for t in texts)
    assert "SASS instructions" in page.inner_text("p.basis")
    # a CPU run: no roofline and no GPU card, but what it knows: the work model and the
    # per-equation breakdown the terminal prints, the instruction mix beside each line
    assert page.locator(".roofline-box").count() == 0 and page.locator("svg.roofline").count() == 0
    work = page.inner_text(".work-box")
    assert "No roofline" in work and "memory traffic" in work and "500 KiB" in work, work
    assert "GPU during the timed launches" not in page.inner_text("section.kernel")
    rows = page.locator("figure.equations tbody tr").all_inner_texts()
    # the page's weight is report.json's (the figure itself depends on Triton's ptxas)
    weights = {e["index"]: e["weight"] for e in _attribution(cpu_run)["equations"]}
    assert rows[0].startswith(f"{weights[4] * 100:.1f}%"), (rows[0], weights[4])
    assert weights[4] == max(weights.values())
    assert "[4] exp" in rows[0] and "e = jnp.exp(x)" in rows[0]
    assert "special function 8" in rows[0], rows[0]
    assert "worker wait" not in page.inner_text(".charts")     # no worker on a CPU run
    # PTX and SASS are there, collapsed until asked for
    stages = page.locator("details.stage")
    assert stages.count() == 2 and not page.locator("details.stage[open]").count()
    page.click("details.stage >> nth=0 >> summary")
    assert stages.first.evaluate("d => d.open")
    assert page.locator(".stage-ptx tr.hot").first.is_visible()
    assert page.locator(".stage-ptx tr.hot").count() > 50          # instructions, heated
    # hovering the user's exp line marks the generated lines of the same equation
    page.hover(".user-source tr[data-e='4']")
    linked = page.locator(".generated tr.linked")
    titles = [linked.nth(i).get_attribute("title") for i in range(linked.count())]
    assert titles and all(t == "[4] exp" for t in titles), titles
    assert "libdevice.exp(sub)" in linked.first.inner_text()
    assert errors == [] and remote == []


def _visible_in(page, box: str, row) -> bool:
  top = page.locator(box).first.bounding_box()
  r = row.bounding_box()
  return top["y"] <= r["y"] and r["y"] + r["height"] <= top["y"] + top["height"]


def test_hovering_scrolls_the_other_listing_to_the_lines(chromium, tmp_path):
  """flash attention's generated source is longer than its pane: pointing at the last line
  of the user's kernel brings the lines it became into view, and the page stays put."""
  from tests.cli.test_cli import pallas_prof
  out = tmp_path / "flash"
  result = pallas_prof("run", "--no-trace", "--out", str(out),
                       os.path.join(ROOT, "examples", "flash_attention.py"))
  assert result.returncode == 0, result.stderr
  with open_report(chromium, str(out / "report.html")) as (page, errors, remote):
    generated = ".listing.generated"
    assert page.locator(generated).evaluate("b => b.scrollHeight > b.clientHeight")
    last = page.locator(".user-source tr[data-e]").last
    last.hover()
    linked = page.locator(".generated tr.linked")
    assert linked.count() > 0 and page.locator(generated).evaluate("b => b.scrollTop") > 0
    assert _visible_in(page, generated, linked.first)
    # the table of equations points the same way
    page.locator("figure.equations tbody tr").first.hover()
    assert _visible_in(page, generated, page.locator(".generated tr.linked").first)
    assert errors == [] and remote == []


@pytest.mark.no_gpu     # its kernel reads past its buffers: on a GPU, an illegal address
def test_a_run_time_failure_page_marks_the_line(chromium, tmp_path):
  from tests.cli.test_cli import pallas_prof
  from testkit.scripts import READS_PAST
  script = tmp_path / "reads_past.py"
  script.write_text(READS_PAST)
  out = tmp_path / "out"
  assert pallas_prof("run", "--out", str(out), str(script)).returncode == 1
  with open_report(chromium, str(out / "report.html")) as (page, errors, remote):
    panel = page.inner_text("section.error")
    assert panel.startswith("failed at run time: kernel"), panel
    assert "element(s) outside x_ref" in panel and "what to do:" in panel
    assert page.locator("pre.error-report .failing").all_inner_texts() == [
        "  >> 7 |   o_ref[...] = x_ref[pl.ds(i * 8 + 4, 8)] * 2.0"]
    failing = page.locator(".user-source tr.failing")
    assert failing.count() == 1 and "x_ref[pl.ds(i * 8 + 4, 8)]" in failing.inner_text()
    assert "EXIT CODE\n1\n" in page.inner_text("header.top")
    assert errors == [] and remote == []


def test_recorded_gpu_run_page_draws_the_roofline(chromium, tmp_path):
  d = gpu_pipeline_run(tmp_path)
  page_path = html.write_html(d)
  with open_report(chromium, page_path) as (page, errors, remote):
    labels = page.locator("section.kernel h2.kernel-label").all_inner_texts()
    assert len(labels) == 8 and any(t.startswith("matmul_kernel#8608b1") for t in labels)
    points = page.locator(".roofline-box svg circle.kernel-point")
    assert points.count() == 8
    box = points.first.bounding_box()
    assert box is not None and box["width"] > 4                    # drawn, not just present
    assert "copy 4.14 TB/s" in page.inner_text(".roofline-box >> nth=0")
    assert errors == [] and remote == []


def test_hostile_text_stays_text(chromium, tmp_path):
  run, d = hostile_run(tmp_path)
  path = tmp_path / "report.html"
  path.write_text(html.render_html(RunReport.from_dict(run), d))
  with open_report(chromium, str(path)) as (page, errors, remote):
    dialogs = []
    page.on("dialog", lambda dlg: (dialogs.append(dlg.message), dlg.dismiss()))
    page.reload()
    assert page.locator("script").count() == 1 and page.locator("img").count() == 0
    assert "<script>alert(1)</script>" in page.inner_text(".user-source")
    failing = page.locator("pre.error-report .failing").all_inner_texts()
    assert failing == ["  >> 5 |   y = <script>alert(3)</script>"]
    assert dialogs == [] and errors == [] and remote == []


def test_a_javascript_error_is_caught(chromium, tmp_path):
  """The check the tests above rely on: a page whose script throws is reported."""
  run, d = hostile_run(tmp_path)
  page_text = html.render_html(RunReport.from_dict(run), d).replace("</body>",
                                               "<script>undefinedFunction()</script></body>")
  path = tmp_path / "broken.html"
  path.write_text(page_text)
  with open_report(chromium, str(path)) as (page, errors, remote):
    assert any("undefinedFunction" in e for e in errors), errors


def test_run_wrote_the_page_and_report_rewrites_it(cpu_run, tmp_path):
  from tests.cli.test_cli import pallas_prof
  page = cpu_run.read_text()
  run_dir = cpu_run.parent
  elsewhere = tmp_path / "again.html"
  result = pallas_prof("report", str(run_dir), "--html", "--html-out", str(elsewhere))
  assert result.returncode == 0 and result.stdout.strip() == str(elsewhere)
  assert elsewhere.read_text() == page             # the page comes from report.json alone


LONG_LINES = '''\
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def long_lines_kernel(x_ref, o_ref):
  x = x_ref[...].astype(jnp.float32)
  scaled_by_a_name_long_enough_to_need_its_own_line = x * 0.5 + jnp.exp(-x) * 0.25 + jnp.abs(x) * 0.125 + jnp.sin(x) * 0.0625 + jnp.cos(x) * 0.03125
  o_ref[...] = (scaled_by_a_name_long_enough_to_need_its_own_line / jnp.sum(scaled_by_a_name_long_enough_to_need_its_own_line, axis=-1, keepdims=True)).astype(o_ref.dtype)


x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128) / 1000
y = pl.pallas_call(long_lines_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
print(float(y.sum()))
'''

# a user line is clipped when some of its text lies outside what its box shows: the
# listing's own box for the kernel's lines, the cell's for the table of equations
_CLIPPED_USER_LINES = """() => {
  const clipped = [];
  const within = (range, box) => [...range.getClientRects()].every(r =>
      r.left >= box.left - 0.5 && r.right <= box.left + box.width + 0.5);
  const check = (cell, holder, what) => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const r = holder.getBoundingClientRect();
    const shown = {left: r.left + holder.clientLeft, width: holder.clientWidth};
    if (holder.scrollWidth > holder.clientWidth || cell.scrollWidth > cell.clientWidth
        || !within(range, shown))
      clipped.push(what + ": " + cell.textContent);
  };
  for (const cell of document.querySelectorAll('.user-source td.src'))
    check(cell, cell.closest('.listing'), 'your kernel');
  for (const cell of document.querySelectorAll('figure.equations td.src-cell'))
    check(cell, cell, 'equations');
  return clipped;
}"""


def _user_lines_shown(page) -> list[str]:
  return [cell.evaluate("c => c.firstChild ? c.firstChild.textContent : ''")
          for cell in page.locator(".user-source td.src").all()]


@pytest.fixture(scope="module")
def long_lines_run(tmp_path_factory):
  """A kernel whose lines are longer than any pane: the page `run` wrote, and the lines."""
  from tests.cli.test_cli import pallas_prof
  d = tmp_path_factory.mktemp("long_lines")
  script = d / "long_lines.py"
  script.write_text(LONG_LINES)
  result = pallas_prof("run", "--no-trace", "--out", str(d / "out"), str(script))
  assert result.returncode == 0, result.stdout + result.stderr
  return d / "out" / "report.html", LONG_LINES.splitlines()


@pytest.mark.parametrize("width", [1280, 1400, 1920])
def test_no_user_line_is_clipped_at_common_widths(chromium, cpu_run, long_lines_run, width):
  """Issue 39, item 6: at 1400 px the softmax kernel's last line was cut behind a scroll
  bar (`o_ref[...] = (e / jnp.sum(e, axis=1, keep`). Each line of the user's kernel, and
  each user line of the table of equations, is shown whole: its text as in the file, none
  of it outside the box that shows it, no horizontal scroll bar."""
  long_page, long_source = long_lines_run
  softmax_source = open(os.path.join(ROOT, "examples", "softmax.py")).read().splitlines()
  for path, source in ((cpu_run, softmax_source), (long_page, long_source)):
    with open_report(chromium, str(path)) as (page, errors, remote):
      page.set_viewport_size({"width": width, "height": 1000})
      shown = _user_lines_shown(page)
      numbers = [int(n) for n in page.locator(".user-source td.n").all_inner_texts()]
      assert shown and shown == [source[n - 1] for n in numbers]
      assert max(map(len, shown)) > 70                 # lines long enough to be at risk
      assert page.evaluate(_CLIPPED_USER_LINES) == [], (path, width)
      # the generated source beside them keeps a third of the row or more
      generated = page.locator(".listing.generated").first.bounding_box()
      row = page.locator(".sources").first.bounding_box()
      assert generated["width"] >= row["width"] / 3 and generated["y"] == row["y"], generated
      assert errors == [] and remote == []


def test_the_clipping_check_finds_a_cut_line(chromium, cpu_run):
  """The check above, on the page with the listings' old rule (lines never wrap): the
  long softmax line at 1400 px is found."""
  with open_report(chromium, str(cpu_run)) as (page, errors, remote):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.add_style_tag(content=".user-source table.code td.src { white-space: pre; }"
                               ".sources { grid-template-columns: 1fr 1fr; }")
    clipped = page.evaluate(_CLIPPED_USER_LINES)
    assert any("jnp.sum(e, axis=1, keepdims=True)" in c for c in clipped), clipped
