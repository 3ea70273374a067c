"""Annotated error reports: seven failure classes, each pointing at the user's
line, marking the failing equation in the jaxpr, giving a hint; the failing
equation's span (or the failing compile's) is ERROR with the exception."""
from __future__ import annotations

import io
import os
import re

import jax
import pytest
from rich.console import Console

import pallas_prof
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend import kernel_registry
from pallas_prof.instrument import error_text, render_error
from tests.instrument import failing_kernels
from tests.instrument.spans import by_id, traced

KERNELS_FILE = os.path.realpath(failing_kernels.__file__)

# case -> (primitive of the failing equation or None for a kernel-level error,
#          words the reason must contain, words the hint must contain)
EXPECTED = {
    "unsupported_primitive": ("sort", "no lowering rule", "sort outside the pallas_call"),
    "unsupported_parameter": ("dot_general", "ANY_F8_ANY_F8_F32", "F32_F32_F32"),
    "non_pow2_reshape": ("reshape", "(6, 10) to (3, 20)", "power-of-two"),
    "complex_dtype": ("convert_element_type", "complex64", "real and imaginary parts"),
    "scratch_shapes": (None, "scratch_shapes", "registers"),
    "shared_memory": ("get", "bytes of shared memory", "fewer num_stages"),
    "triton_frontend": ("get", "maximum tensor numel", "smaller blocks"),
}


def _tagged_line(case: str) -> int:
  with open(KERNELS_FILE) as f:
    (line,) = [i for i, text in enumerate(f, start=1) if text.rstrip().endswith(f"# FAILS: {case}")]
  return line


def _fail(case: str):
  """Lowers (and for compile failures compiles) the case; returns the LoweringError."""
  fn, args, stage = failing_kernels.cases()[case]
  jax.clear_caches()
  kernel_registry.clear()
  if stage == "lower" or jax.default_backend() != "cpu":
    # (on a GPU the lowering compiles too: the custom call carries the PTX)
    with pytest.raises(pallas_prof.LoweringError) as info:
      fn.lower(*args)
    return info.value
  fn.lower(*args)
  (record,) = kernel_registry.kernels()
  backend_compile.clear_memory_cache()
  with pytest.raises(pallas_prof.LoweringError) as info:
    backend_compile.compile_kernel(record.generated, ("cuda", 90), use_disk_cache=False)
  return info.value


def _section(text: str, header: str) -> list[str]:
  lines = text.splitlines()
  start = next(i for i, line in enumerate(lines) if line.strip().startswith(header))
  end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
  return lines[start + 1:end]


@pytest.mark.parametrize("case", list(EXPECTED))
def test_error_report(case):
  primitive, reason_words, hint_words = EXPECTED[case]
  with traced() as exporter:
    err = _fail(case)
  text = error_text(err)
  line = _tagged_line(case)
  if primitive is None:
    # a kernel-level error points at the pallas_call that was made (here: the
    # caller of .lower()) and names the kernel's definition line
    assert f"{KERNELS_FILE}:{line}" in text or f"{failing_kernels.__file__}:{line}" in text
    assert "--> " in text
  else:
    # the user's file:line, with the line itself marked in the source context
    assert f"--> {KERNELS_FILE}:{line}" in text or f"--> {failing_kernels.__file__}:{line}" in text
    source = _section(text, "-->")
    (marked_source,) = [s for s in source if s.lstrip().startswith(">>")]
    assert f"{line} |" in marked_source and f"# FAILS: {case}" in marked_source
  # the reason, the hint, the kernel's name
  assert reason_words in text and err.reason in text
  assert err.hint and hint_words in err.hint and f"hint: {err.hint}" in text
  assert f"kernel `{err.kernel}`" in text
  # the refs as the kernel names them, not by the jaxpr's letters
  refs = failing_kernels.ref_names(case)
  (blocks,) = [t for t in text.splitlines() if t.lstrip().startswith("blocks:")]
  assert re.findall(r"(\w+): \w+\[", blocks.split("blocks:")[1]) == refs, blocks
  jaxpr = _section(text, "jaxpr of the kernel")
  assert all(f" {ref}:Ref" in jaxpr[0] for ref in refs), jaxpr[0]
  marked = [j for j in jaxpr if j.lstrip().startswith(">>")]
  if primitive is None:
    # a kernel-level error: the pallas_call itself stands for the equation; no
    # equation of the kernel's jaxpr is marked
    assert err.eqn is not None and err.eqn.primitive == "pallas_call" and not marked
  else:
    # the failing equation is marked in the jaxpr, with its avals and rule named
    assert err.eqn.primitive == primitive
    assert err.eqn.file == failing_kernels.__file__ and err.eqn.line == line
    assert marked
    first = marked[0]
    if primitive == "get":
      assert " <- " in first
    else:
      assert f"= {primitive}" in first
    (facts,) = [t for t in text.splitlines() if t.lstrip().startswith("equation:")]
    eqn_text = err.named(err.eqn.text)          # its refs as the kernel names them
    assert f"[{err.eqn.index}] {eqn_text}" in facts
    # one naming throughout: the equation line says what the marked jaxpr line says
    # the mark is where the lowering recorded the equation in the printed jaxpr
    assert err.eqn.jaxpr_line is not None
    printed = err.jaxpr_text.splitlines()[err.eqn.jaxpr_line].strip()
    assert err.named(printed) == first.lstrip(" >").strip()
    binder = first.lstrip(" >").split()[0].split(":")[0]
    assert eqn_text.split()[0].split(":")[0] == binder
    if "[...]" not in eqn_text:
      assert " ".join(first.lstrip(" >").split()) in " ".join(eqn_text.split())
    assert "operands:" in text and ", ".join(map(str, err.eqn.in_avals)) in text
    # refused in the user's terms: no path into pallas-prof's rule table (issue 39)
    assert "rule:" not in text and "pallas_prof.backend" not in text, text
  # spans: the failing equation's span (lowering) or the compile's (Triton) is ERROR
  spans = exporter.get_finished_spans()
  errors = [s for s in spans if s.status.status_code.name == "ERROR"]
  assert errors
  _, _, stage = failing_kernels.cases()[case]
  if stage == "lower" and primitive is not None:
    (failing,) = [s for s in spans if s.name.startswith("lower ")
                  and s.attributes["jaxpr.eqn_index"] == err.eqn.index]
    assert failing.status.status_code.name == "ERROR"
    assert failing.events[0].name == "exception"
    assert failing.attributes["code.lineno"] == line
  elif stage == "lower":
    (kernel,) = [s for s in spans if s.name.startswith("pallas_call ")]
    assert kernel.status.status_code.name == "ERROR" and kernel.events[0].name == "exception"
  else:
    (compile_span,) = [s for s in spans if s.name == f"compile {err.kernel}"]
    assert compile_span.status.status_code.name == "ERROR"
    assert compile_span.events[0].name == "exception"
    assert compile_span.attributes["pallas.failed_eqn_index"] == err.eqn.index
    assert compile_span.attributes["code.lineno"] == line
    index = by_id(spans)
    (eqn_link,) = [link for link in compile_span.links
                   if link.attributes["pallas.link"] == "failing equation"]
    linked = index[eqn_link.context.span_id]
    assert linked.attributes["jaxpr.eqn_index"] == err.eqn.index


def test_triton_failure_names_the_failing_stage():
  with traced() as exporter:
    err = _fail("triton_frontend")
  assert err.stage == "ttir"
  spans = exporter.get_finished_spans()
  (stage_span,) = [s for s in spans if s.name == "compile ttir"]
  assert stage_span.status.status_code.name == "ERROR"
  assert "numel" in error_text(err)


def test_render_plain_when_not_a_terminal():
  err = _fail("non_pow2_reshape")
  out = io.StringIO()
  render_error(err, Console(file=out, force_terminal=False, width=200))
  assert out.getvalue() == error_text(err)
  assert "\x1b[" not in out.getvalue()


def test_render_rich_on_a_terminal():
  err = _fail("non_pow2_reshape")
  out = io.StringIO()
  render_error(err, Console(file=out, force_terminal=True, width=200, color_system="truecolor"))
  text = out.getvalue()
  assert "\x1b[" in text                                   # styled
  assert "pallas-prof: cannot lower `reshape`" in text
  assert f"{_tagged_line('non_pow2_reshape')}" in text
  assert err.hint in text


def test_a_lowering_error_outside_pallas_prof_run_is_one_clean_report(tmp_path):
  """A program run with plain python: the message once (JAX used to chain a copy
  of it), the user's frames only (the lowering's ~40 were shown between)."""
  import subprocess
  import sys
  script = tmp_path / "bad_kernel.py"
  script.write_text(
      "import jax, jax.numpy as jnp\n"
      "from jax.experimental import pallas as pl\n"
      "import pallas_prof\n"
      "pallas_prof.install()\n"
      "def kernel(x_ref, o_ref):\n"
      "  o_ref[...] = jnp.sort(x_ref[...])\n"
      "x = jnp.ones((16,), jnp.float32)\n"
      "pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))(x)\n")
  # the checkout under test, installed or not
  root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
  env.pop("JAX_TRACEBACK_FILTERING", None)
  proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                        timeout=300)
  assert proc.returncode == 1
  err = proc.stderr
  assert err.count("cannot lower `sort`") == 1, err
  assert err.count("hint: sorting inside a kernel") == 1, err
  assert f"{script}:6 (in kernel)" in err and f'File "{script}", line 8' in err
  assert "pallas_prof/backend" not in err and "Traceback" in err, err
  assert len(err.splitlines()) < 20, err


def test_report_is_the_same_when_jax_would_colour_its_jaxprs(monkeypatch):
  """On a terminal JAX colours what it prints; the report parses the printed jaxpr
  (the marked equation, the refs' names), so under colour the mark was lost, the
  blocks read `m: f32[48], m: f32[48]` (the `m` of an escape code) and the escape
  codes broke the panel's borders."""
  from jax._src import pretty_printer
  monkeypatch.setattr(pretty_printer, "CAN_USE_COLOR", True)   # as under a terminal
  err = _fail("unsupported_primitive")
  text = error_text(err)
  assert "\x1b" not in err.jaxpr_text and "\x1b" not in err.eqn.text and "\x1b" not in text
  assert [j for j in _section(text, "jaxpr of the kernel") if j.lstrip().startswith(">>")]
  (blocks,) = [t for t in text.splitlines() if t.lstrip().startswith("blocks:")]
  names = [part.split(":")[0].strip() for part in blocks.split(":", 1)[1].split(",")]
  assert len(set(names)) == len(names), blocks


def _digamma_kernel(x_ref, o_ref):
  o_ref[...] = jax.lax.digamma(x_ref[...])            # THE-DIGAMMA


def _lower_digamma():
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  x = jnp.arange(1, 65, dtype=jnp.float32)
  call = pl.pallas_call(_digamma_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        compiler_params=pallas_prof.CompilerParams())
  jax.clear_caches()
  with pytest.raises(pallas_prof.LoweringError) as info:
    jax.jit(call).lower(x)
  return info.value


def _digamma_line() -> int:
  with open(__file__) as f:
    return next(i for i, t in enumerate(f, 1) if t.rstrip().endswith("# THE-DIGAMMA"))


def test_an_unsupported_primitive_is_said_in_the_users_terms_not_our_rule_table():
  """lax.digamma in a kernel: the report named `RULES[digamma] = pallas_prof.backend.
  lowering.rules.elementwise._unsupported.<locals>.rule` (issue 39 item 5). It names the
  equation, the user's line and what to do, and nothing of pallas-prof's source."""
  text = error_text(_lower_digamma())
  assert f"{os.path.realpath(__file__)}:{_digamma_line()}" in text or \
      f"{__file__}:{_digamma_line()}" in text, text
  assert "= digamma" in text and "hint: compute it outside the kernel" in text, text
  assert "rule:" not in text and "pallas_prof." not in text and "<locals>" not in text, text


def test_a_rule_that_breaks_still_names_itself_for_the_bug_report(monkeypatch):
  """A rule's own failure is pallas-prof's bug: there the rule's name is what to report."""
  from pallas_prof.backend.lowering import dispatch

  def broken(ctx, *operands, **params):
    raise RuntimeError("a bug in the rule")

  original = dispatch.rule_for
  monkeypatch.setattr(dispatch, "rule_for", lambda primitive: broken
                      if primitive.name == "digamma" else original(primitive))
  text = error_text(_lower_digamma())
  assert "internal error in the `digamma` rule" in text and "rule:" in text, text


@pytest.mark.parametrize("terminal", [False, True])
def test_render_masks_what_the_redactor_masks(terminal):
  """`pallas-prof run` passes its redactor (pallas_prof/redaction): a secret in the error's
  texts (here an environment variable's value in the user's path) is printed masked, on
  a terminal's panel and in plain text alike."""
  from pallas_prof.redaction import Redactor
  err = _fail("non_pow2_reshape")
  folder = os.path.dirname(KERNELS_FILE)
  out = io.StringIO()
  render_error(err, Console(file=out, force_terminal=terminal, width=400, color_system=None),
               redact=Redactor({"TEST_SERVICE_TOKEN": folder}))
  assert folder not in out.getvalue() and f"***{os.sep}failing_kernels.py" in out.getvalue()
  assert "cannot lower `reshape`" in out.getvalue()
