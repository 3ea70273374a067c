"""Reports inline in Jupyter and IPython (pallas_prof/notebook.py): the page in an iframe, well
formed, self-contained, with the user's lines heated; the tables as text."""
from __future__ import annotations

import html
import html.parser
import linecache
import os
import re
import types

from pallas_prof import notebook
from pallas_prof.cli.report import RunReport

from .test_html import gpu_pipeline_run

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class _Checker(html.parser.HTMLParser):
  """Every element closed, in order (void elements aside); the iframes' srcdoc kept; each
  attribute that would fetch something (src, href to another host) noted."""

  def __init__(self):
    super().__init__(convert_charrefs=True)
    self.open: list[tuple[str, tuple]] = []
    self.problems: list[str] = []
    self.frames: list[dict] = []
    self.fetches: list[str] = []
    self.text: list[str] = []

  def handle_starttag(self, tag, attrs):
    a = dict(attrs)
    if tag == "iframe":
      self.frames.append(a)
    for name in ("src", "href"):
      value = a.get(name) or ""
      if re.match(r"\s*(https?:)?//", value):
        self.fetches.append(f"<{tag} {name}={value}>")
    if tag not in VOID:
      self.open.append((tag, self.getpos()))

  def handle_startendtag(self, tag, attrs):
    self.handle_starttag(tag, attrs)
    if tag not in VOID:
      self.open.pop()

  def handle_endtag(self, tag):
    if not self.open or self.open[-1][0] != tag:
      self.problems.append(f"</{tag}> at {self.getpos()} closes {self.open[-1:]}")
      return
    self.open.pop()

  def handle_data(self, data):
    self.text.append(data)


def _checked(text: str) -> _Checker:
  checker = _Checker()
  checker.feed(text)
  checker.close()
  assert not checker.problems, checker.problems[:5]
  assert not checker.open, checker.open[:5]
  return checker


def _inline_page(markup: str) -> _Checker:
  """The notebook's output: one iframe whose srcdoc is a well-formed, self-contained page."""
  outer = _checked(markup)
  assert len(outer.frames) == 1 and "srcdoc" in outer.frames[0], markup[:300]
  assert "".join(outer.text).strip() == ""             # nothing outside the frame
  page = outer.frames[0]["srcdoc"]
  assert page.startswith("<!DOCTYPE html>")
  inner = _checked(page)
  assert not inner.fetches, inner.fetches               # no network: CSS, script, charts inline
  return inner


def _listing(page: str, cls: str) -> str:
  """The HTML of a listing of the page (listing.html.j2): "user-source" or "generated"."""
  m = re.search(rf'<div class="listing {cls}">(.*?)\n</div>', page, re.S)
  assert m, f"no {cls} listing"
  assert 'class="absent"' not in m.group(1), m.group(1)[:500]
  return m.group(1)


def _heated_rows(listing: str) -> dict[str, float]:
  """The source text of each heated row of a listing, with its heat."""
  rows = re.findall(r'<tr[^>]* class="hot[^"]*" style="--heat:([0-9.]+)"><td class="n">\d+</td>'
                    r'<td class="w">[^<]*</td><td class="src"[^>]*>([^<]*)', listing)
  return {html.unescape(text).strip(): float(heat) for heat, text in rows}


def _page(markup: str) -> str:
  return html.unescape(markup.split('srcdoc="', 1)[1].rsplit('"></iframe>', 1)[0])


def test_a_profile_of_this_process_shows_inline_with_heat_on_the_users_lines(tmp_path):
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl

  import pallas_prof
  from pallas_prof.backend import kernel_registry

  # the kernel defined in a notebook cell: code run from no file, which IPython keeps in
  # linecache under a name of its own with no modification time (its compilerop does so)
  cell_name = str(tmp_path / "ipykernel_0" / "3041493352.py")     # never written to disk
  cell = ("import jax.numpy as jnp\n\n"
          "def double_exp_kernel(x_ref, o_ref):\n"
          "  o_ref[...] = jnp.exp(x_ref[...]) * 2.0\n")
  linecache.cache[cell_name] = (len(cell), None, cell.splitlines(keepends=True), cell_name)
  scope: dict = {}
  exec(compile(cell, cell_name, "exec"), scope)
  double_exp_kernel = scope["double_exp_kernel"]

  pallas_prof.install()
  try:
    kernel_registry.clear()
    x = jnp.linspace(-1.0, 1.0, 8 * 128, dtype=jnp.float32).reshape(8, 128)
    out = pl.pallas_call(double_exp_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    assert jnp.allclose(out, jnp.exp(x) * 2.0)
    report = pallas_prof.profile()
  finally:
    pallas_prof.uninstall()
  assert not os.path.exists(cell_name)
  markup = notebook.profile_html(report)
  _inline_page(markup)
  page = _page(markup)
  registers = report.kernels[0].static.resources["registers"]
  assert re.search(rf"<dt>registers</dt><dd>{registers}</dd>", page), "no registers shown"
  user = _heated_rows(_listing(page, "user-source"))
  assert user.get("o_ref[...] = jnp.exp(x_ref[...]) * 2.0") == 1.0, user
  generated = _listing(page, "generated")
  assert "double_exp_kernel" in generated and _heated_rows(generated)
  # the equations table's source column: the cell's line too (issue 48, item 18)
  cells = [html.unescape(c) for c in re.findall(r'<td class="mono src-cell"[^>]*>([^<]*)</td>',
                                                page)]
  assert "o_ref[...] = jnp.exp(x_ref[...]) * 2.0" in cells, cells
  # in a terminal: the tables `pallas-prof run` prints, the cell's line among them
  assert "double_exp_kernel" in str(report) and "hot equations" in str(report)
  assert "jnp.exp(x_ref[...]) * 2.0" in str(report), str(report)
  # saved as a run and loaded back: the page of the folder RunReport.load read
  run_dir = str(tmp_path / "run")
  os.mkdir(run_dir)
  notebook.profile_run(report, run_dir).save(run_dir)
  run = RunReport.load(run_dir)
  saved = notebook.run_html(run)
  _inline_page(saved)
  from pallas_prof.cli.html import render_html
  assert _page(saved) == render_html(run, run_dir)              # report.html's own page
  assert _heated_rows(_listing(_page(saved), "user-source")) == user
  assert _heated_rows(_listing(_page(saved), "generated"))
  linecache.cache.pop(cell_name)
  # where the cell is gone (another process): said, not invented
  gone = _page(notebook.run_html(run))
  assert "is not on this machine" in gone and "jnp.exp(x_ref" not in gone.split(
      "listing user-source", 1)[1].split("listing generated", 1)[0]


def test_a_run_report_prints_its_tables_as_text_inside_jupyter_too(tmp_path, monkeypatch):
  """Inside Jupyter rich sends what a console prints to the notebook as a display of its
  own: the tables must come back as text all the same (they are the text/plain output)."""
  import rich.console
  monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
  run = RunReport.load(gpu_pipeline_run(tmp_path))
  text = notebook.run_text(run)
  assert text.startswith("pallas-prof pipeline.py") and "kernels" in text
  assert all(k.label in text for k in run.kernels)


def test_reports_show_themselves_without_the_extension(tmp_path):
  """As JAX arrays do (issue 48, item 19): IPython and Jupyter call `_repr_html_` and
  `_repr_pretty_` of whatever a cell ends with; no `%load_ext` was needed before a report
  showed more than its one line."""
  import pallas_prof
  from pallas_prof.profiler.schema import ProfileReport
  run_dir = gpu_pipeline_run(tmp_path)
  run = RunReport.load(run_dir)
  assert run._repr_html_() == notebook.run_html(run)
  _inline_page(run._repr_html_())
  printed = types.SimpleNamespace(text=[])
  printer = types.SimpleNamespace(text=printed.text.append)
  run._repr_pretty_(printer, False)
  assert printed.text == [notebook.run_text(run)]
  profile = pallas_prof.profile([])           # no kernels: the page still draws
  assert isinstance(profile, ProfileReport)
  _inline_page(profile._repr_html_())
  printed.text.clear()
  profile._repr_pretty_(printer, False)
  assert printed.text == [str(profile)]


def test_the_extension_registers_both_reports_with_ipythons_formatters():
  """load_ipython_extension through a stand-in of IPython's formatter registry (IPython is
  not a dependency of pallas-prof; docs/notebooks.md shows it run in Jupyter)."""
  registered: dict[str, dict] = {"text/html": {}, "text/plain": {}}

  class Formatter:
    def __init__(self, mime):
      self.mime = mime

    def for_type(self, cls, func):
      registered[self.mime][cls] = func

  ipython = types.SimpleNamespace(display_formatter=types.SimpleNamespace(
      formatters={m: Formatter(m) for m in registered}))
  from pallas_prof import notebook as extension
  from pallas_prof.profiler.schema import ProfileReport
  extension.load_ipython_extension(ipython)
  assert registered["text/html"] == {RunReport: notebook.run_html,
                                     ProfileReport: notebook.profile_html}
  assert set(registered["text/plain"]) == {RunReport, ProfileReport}
