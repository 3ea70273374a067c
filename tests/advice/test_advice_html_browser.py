"""The advice panel of report.html in a real browser (Debian's headless Chromium, as
tests/cli/test_html_browser.py): beside the heated lines, each diagnosis marking its
equation's lines when hovered, the ranked actions with what they save."""
from __future__ import annotations

import pytest

from pallas_prof.cli.html.browser import browser, open_report

from .test_advise_cli import SCRIPT, _cli

pytestmark = [pytest.mark.browser, pytest.mark.no_gpu]   # the CPU run's page


@pytest.fixture(scope="module")
def page_path(tmp_path_factory):
  out = tmp_path_factory.mktemp("advice_html") / "run"
  result = _cli("advise", "--out", str(out), "--tuning-file", str(out) + ".tuning.json", SCRIPT)
  assert result.returncode == 0, result.stdout + result.stderr
  return str(out / "report.html")


def test_the_advice_panel_beside_the_heated_lines(page_path):
  with browser() as ctx, open_report(ctx, page_path) as (page, errors, remote):
    assert page.get_attribute("body", "data-ready") == "1"
    assert page.locator("aside.advice").count() == 4            # one panel per kernel
    section = page.locator("section.kernel", has_text="exp_kernel#")
    panel = section.locator("aside.advice")
    assert panel.count() == 1 and "not measured: no GPU" in panel.locator("h3").inner_text()
    page.set_viewport_size({"width": 1920, "height": 1000})
    sources = section.locator(".sources").bounding_box()
    box = panel.bounding_box()
    assert box["x"] >= sources["x"] + sources["width"] - 1      # to the right of the listings
    assert abs(box["y"] - sources["y"]) < 40                      # on the same row
    # narrower, three columns would leave the code too little room (issue 39): it goes under
    page.set_viewport_size({"width": 1400, "height": 1000})
    sources = section.locator(".sources").bounding_box()
    box = panel.bounding_box()
    assert box["y"] >= sources["y"] + sources["height"] - 1 and box["x"] == sources["x"]
    first = panel.locator("li.diagnosis").first
    assert first.inner_text().startswith("cos/exp/sin take")
    # hovering the diagnosis marks its equation's lines in the user's source
    eqn = first.get_attribute("data-e")
    first.hover()
    linked = section.locator(".user-source tr.linked")
    assert linked.count() == 1
    assert eqn in linked.first.get_attribute("data-e").split()
    assert "jnp.sin(jnp.cos(jnp.exp(x)))" in linked.first.inner_text()
    assert first.evaluate("li => li.classList.contains('linked')")
    first.hover()
    page.mouse.move(0, 0)                                         # and lets go when left
    assert section.locator(".user-source tr.linked").count() == 0
    row = page.locator("section.kernel", has_text="row_kernel#").locator(
        "aside.advice table.actions tr.action").first
    cells = row.locator("td").all_inner_texts()
    assert cells[:2] == ["1", "a"] and cells[2].startswith("num_warps 1 -> 4")
    assert "compiler_params=pallas_prof.CompilerParams(num_warps=4" in cells[2]
    assert cells[3] == "not measured: no GPU"
    # the line to paste wraps between its arguments and stays inside the panel
    apply = row.locator(".apply")
    assert apply.evaluate("d => d.scrollWidth <= d.clientWidth")
    assert apply.locator("wbr").count() > 3
    # the add kernel's block-shape variant: kind c, compiled for sm_90, not timed, its outputs
    # compared under the interpreter
    add = page.locator("section.kernel", has_text="add_kernel#").locator("aside.advice")
    first_action = add.locator("table.actions tr.action").first.locator("td").all_inner_texts()
    assert first_action[1] == "c" and "block 64 -> 256" in first_action[2]
    assert "compiled:" in first_action[2]
    assert first_action[3] == "not measured: no GPU; outputs equal under the interpreter"
    assert errors == [] and remote == []
