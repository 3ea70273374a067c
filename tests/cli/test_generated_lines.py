"""The generated source's lines as code: the comment the lowering writes after each
equation's line (`  # [4] exp @ kernel.py:31`) comes off through the kernel's own records
(GeneratedKernel.code_lines), for `pallas-prof show`, report.html's listing and the
interpreter's errors alike, whatever the user's file is called."""
from __future__ import annotations

import argparse
import importlib.util
import io
import re

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

from pallas_prof.backend.equation_text import without_line_comment
from pallas_prof.backend.lowering.lower import lower_kernel
from pallas_prof.backend.options import LoweringOptions

KERNEL = """
import jax.numpy as jnp

def kernel(x_ref, o_ref):
  o_ref[...] = jnp.exp(x_ref[...]) * 2.0
"""


@pytest.fixture(scope="module")
def spaced_kernel(tmp_path_factory):
  """A kernel lowered from a file whose name has a space in it: its line comments read
  `# [1] exp @ my kernel.py:5`."""
  path = tmp_path_factory.mktemp("spaced") / "my kernel.py"
  path.write_text(KERNEL)
  spec = importlib.util.spec_from_file_location("my_kernel", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  out = jax.ShapeDtypeStruct((8, 128), jnp.float32)
  closed = jax.make_jaxpr(lambda x: pl.pallas_call(module.kernel, out_shape=out)(x))(out)
  [eqn] = [e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call"]
  return lower_kernel(eqn.params["jaxpr"], eqn.params["grid_mapping"],
                      LoweringOptions(num_warps=4, num_stages=3))


def test_code_lines_take_off_each_equations_comment_and_nothing_else(spaced_kernel):
  gk = spaced_kernel
  source, code = gk.source.splitlines(), gk.code_lines()
  assert len(code) == len(source) and gk.line_map
  assert any("@ my kernel.py:" in source[n - 1] for n in gk.line_map)
  for n, i in gk.line_map.items():
    assert source[n - 1] == code[n - 1].ljust(len(source[n - 1]) - len(
        gk.eqns[i].line_comment)) + gk.eqns[i].line_comment
    assert "# [" not in code[n - 1] and code[n - 1].strip()
  assert [t for n, t in enumerate(source, 1) if n not in gk.line_map] == \
      [t for n, t in enumerate(code, 1) if n not in gk.line_map]


def test_a_line_saved_with_a_comment_of_another_form_is_cut_at_its_tag():
  """A kernel saved by an older pallas-prof, whose comment its records no longer spell."""
  assert without_line_comment("    x = tl.exp(a)   # [3] exp @ k.py:9", "  # [3] exp @ k.py:9") \
      == "    x = tl.exp(a)"
  assert without_line_comment("    x = tl.exp(a)   # [3] exp at line 9", "  # [3] exp @ k.py:9") \
      == "    x = tl.exp(a)"
  assert without_line_comment("    y = x + 1", "  # [4] add @ k.py:10") == "    y = x + 1"


def test_show_prints_the_source_without_the_comments_the_tags_repeat(spaced_kernel, monkeypatch,
                                                                      tmp_path):
  """`pallas-prof show` cut the comment with a pattern that took the location for one word:
  a file named `my kernel.py` kept every line's comment beside its tag."""
  from pallas_prof.cli import run_directory, show
  gk = spaced_kernel
  monkeypatch.setattr(run_directory, "locate_kernel", lambda name, d: (str(tmp_path), "k"))
  monkeypatch.setattr(run_directory, "load_kernel_or_exit", lambda kdir, run_dir: (gk, None))
  monkeypatch.setattr(show, "_attribution_by_dir", lambda run_dir, kdir: None)
  printed = io.StringIO()
  monkeypatch.setattr(show, "console", lambda: __import__("rich").console.Console(
      file=printed, width=400, color_system=None))
  args = argparse.Namespace(kernel=gk.name, dir=None, eject=None, user=False, wide=True)
  assert show.show(args) == 0
  listing = [ln for ln in printed.getvalue().splitlines() if re.match(r"\s*\d+ ", ln)]
  assert len(listing) == len(gk.source.splitlines())
  tagged = [ln for ln in listing if re.match(r"\s*\d+ +\[\d+\]", ln)]
  assert len(tagged) == len(gk.line_map)
  assert not [ln for ln in tagged if "# [" in ln or "my kernel.py" in ln], tagged
