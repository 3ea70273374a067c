"""A kernel that fails while it runs (issue 30, items 3 and 4): `except pallas_prof.BoundsError`
catches it on the CPU, in both modes, on the first call and after a call that worked (when
JAX would run the program from C++); it names the equation and the user's line; it arrives
once, without the callback's traceback; an error of the user's own callback is untouched."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend.lowering.features import bounds
from pallas_prof.instrument import error_text, render_error
from pallas_prof.backend.running import interpreter_runtime, runtime_errors
from testkit.helpers import pallas, random_array

S = jax.ShapeDtypeStruct
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _window_kernel(s_ref, x_ref, o_ref):
  o_ref[...] = x_ref[pl.ds(s_ref[0], 24)] * 3          # THE-READ


def _line(needle: str) -> int:
  import inspect
  lines, first = inspect.getsourcelines(_window_kernel)
  return first + next(i for i, text in enumerate(lines) if needle in text)


# without the bounds-checked mode only the CPU catches such a read (Triton's interpreter
# checks every access); on a GPU it is an illegal address that ends the CUDA context
@pytest.fixture(params=[pytest.param("default", marks=pytest.mark.no_gpu), "bounds"])
def mode(request):
  bounds.set_check_bounds(request.param == "bounds")
  try:
    yield request.param
  finally:
    bounds.set_check_bounds(None)


@pytest.mark.parametrize("jitted", [True, False], ids=["jit", "eager"])
def test_a_read_outside_the_ref_is_a_bounds_error_every_time(mode, jitted, rng):
  x = random_array(rng, (100,), "float32")
  call = pallas(_window_kernel, S((24,), jnp.float32), name=f"window_{mode}")
  call = jax.jit(call) if jitted else call
  ok = call(np.array([7], np.int32), x)               # a call that works: JAX's fast path next
  np.testing.assert_allclose(np.asarray(ok), x[7:31] * 3, rtol=1e-6)
  for start in (90, 95):                               # twice: the cached program raises too
    with pytest.raises(pallas_prof.BoundsError) as info:
      jax.block_until_ready(call(np.array([start], np.int32), x))
    e = info.value
    assert isinstance(e, pallas_prof.KernelRuntimeError) and isinstance(e, IndexError)
    assert not isinstance(e, jax.errors.JaxRuntimeError)
    assert isinstance(e.jax_error, jax.errors.JaxRuntimeError)    # what jaxlib raised, kept
    assert e.kernel == f"window_{mode}" and e.primitive == "get"
    assert e.location == f"{__file__}:{_line('THE-READ')}", e.location
    text = str(e)
    assert "Traceback" not in text and "CpuCallback" not in text, text
    if mode == "bounds":
      assert f"reads x_ref (shape (100,), float32) at index [100:{start + 24}]" in text and f"{start - 76} lane(s)" in text, text
    else:
      assert f"reads {start - 76} element(s) outside x_ref" in text and "PALLAS_PROF_CHECK=bounds" in e.hint
  # the process goes on
  np.testing.assert_allclose(np.asarray(call(np.array([0], np.int32), x)), x[:24] * 3, rtol=1e-6)


# on a CPU JAX keeps no runtime token of a failed callback; a GPU does, and JAX's exit
# handlers then print the failure again: this stands in for that token. On a GPU the
# real one is met by tests/cli/test_newcomer.py's bounds-checked run-time failure.
@pytest.mark.no_gpu
def test_a_reported_failure_leaves_no_token_to_raise_it_again_at_exit(mode, monkeypatch, rng):
  from jax._src import dispatch

  class FailedTokens(type(dispatch.runtime_tokens)):
    """JAX's runtime token set holding a failed program's token: waiting on it raises."""

    def block_until_ready(self):
      if "failed" in self.output_runtime_tokens:
        raise jax.errors.JaxRuntimeError("INTERNAL: CpuCallback error calling callback")
      super().block_until_ready()

  failed = FailedTokens()
  failed.output_runtime_tokens["failed"] = None
  monkeypatch.setattr(dispatch, "runtime_tokens", failed)
  x = random_array(rng, (100,), "float32")
  call = pallas(_window_kernel, S((24,), jnp.float32), name=f"window_tokens_{mode}")
  with pytest.raises(pallas_prof.BoundsError):
    jax.block_until_ready(call(np.array([95], np.int32), x))
  assert "failed" not in failed.output_runtime_tokens
  failed.block_until_ready()                    # what JAX's exit handler does: nothing left


@pytest.mark.no_gpu
def test_another_failure_under_the_interpreter_is_a_kernel_runtime_error(monkeypatch, rng):
  def broken(*args, **kwargs):
    raise ZeroDivisionError("a failure inside the interpreter")

  monkeypatch.setattr(interpreter_runtime, "launch", broken)
  call = pallas(_window_kernel, S((24,), jnp.float32), name="window_broken")
  with pytest.raises(pallas_prof.KernelRuntimeError) as info:
    jax.block_until_ready(call(np.array([0], np.int32), random_array(rng, (100,), "float32")))
  e = info.value
  assert not isinstance(e, pallas_prof.BoundsError)
  assert "ZeroDivisionError: a failure inside the interpreter" in e.reason
  assert "pallas-prof bug" in e.hint


def _loop_kernel(x_ref, o_ref):
  def body(i, acc):
    return acc + x_ref[pl.ds(i * 8, 8)]         # a loop body gives the ref a letter of its own
  o_ref[...] = jax.lax.fori_loop(0, 40, body, jnp.zeros((8,), jnp.float32))


@pytest.mark.parametrize("case", ["window", "loop"])
def test_the_report_names_the_refs_as_the_kernel_does(mode, case, rng):
  """Issue 39: the run-time report said `e:f32[24] <- b[d:d+24]` beside `reads x_ref`;
  the equation, the blocks and the message now name the ref `x_ref`, as the kernel
  (and the bounds check) does."""
  if case == "window":
    call = pallas(_window_kernel, S((24,), jnp.float32), name=f"named_window_{mode}")
    args, refs = (np.array([95], np.int32), random_array(rng, (100,), "float32")), \
        "s_ref: i32[1], x_ref: f32[100], o_ref: f32[24]"
  else:
    call = pallas(_loop_kernel, S((8,), jnp.float32), name=f"named_loop_{mode}")
    args, refs = (random_array(rng, (24,), "float32"),), "x_ref: f32[24], o_ref: f32[8]"
  with pytest.raises(pallas_prof.BoundsError) as info:
    jax.block_until_ready(call(*args))
  e = info.value
  reports = {"message": str(e), "report": error_text(e), "terminal": _on_a_terminal(e)}
  for kind, text in reports.items():
    (equation,) = [line for line in text.splitlines() if re.search(r"\bequation:? ", line)]
    assert re.search(r"<- x_ref\[\w+:\w+\+(24|8)\]", equation), (kind, text)
    # no ref is named by a letter of the jaxpr: `<- b[`, `<- e[`
    assert not re.search(r"<- [a-z]{1,2}\[", equation), (kind, text)
  assert re.search(r"blocks: +" + re.escape(refs) + "\n", reports["report"]), reports["report"]
  assert "x_ref" not in e.eqn.text        # the record keeps JAX's text: renamed as it is said


def _on_a_terminal(error) -> str:
  from rich.console import Console
  out = io.StringIO()
  render_error(error, Console(file=out, force_terminal=True, width=200, color_system=None))
  return out.getvalue()


def test_a_failure_of_the_users_own_callback_is_left_as_jax_raises_it():
  def mine(x):
    raise KeyError("the user's own callback")

  f = jax.jit(lambda x: jax.pure_callback(mine, S((3,), jnp.float32), x))
  runtime_errors.callbacks_lowered()       # as after any CPU kernel: the Python path
  with pytest.raises(jax.errors.JaxRuntimeError, match="the user's own callback"):
    jax.block_until_ready(f(jnp.ones(3)))


PROGRAM = textwrap.dedent("""
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl
    import pallas_prof
    pallas_prof.install()

    def kernel(x_ref, o_ref):
      o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 8 + 4, 8)] * 2.0

    f = jax.jit(pl.pallas_call(kernel, grid=(4,), in_specs=[pl.BlockSpec((32,), lambda i: (0,))],
                               out_specs=pl.BlockSpec((8,), lambda i: (i,)),
                               out_shape=jax.ShapeDtypeStruct((32,), jnp.float32)))
    f(jnp.arange(32, dtype=jnp.float32)).block_until_ready()
    """)


@pytest.mark.no_gpu
@pytest.mark.parametrize("full", [False, True], ids=["default", "PALLAS_PROF_TRACEBACK=1"])
def test_uncaught_it_is_said_once_and_short(tmp_path, full):
  script = tmp_path / "reads_past.py"
  script.write_text(PROGRAM)
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  env.pop("PALLAS_PROF_TRACEBACK", None)
  if full:
    env["PALLAS_PROF_TRACEBACK"] = "1"
  done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                        timeout=300)
  assert done.returncode == 1
  err = done.stderr
  # the last program reads 4 elements past x_ref's end, counted against x_ref
  assert err.count("reads 4 element(s) outside x_ref") == (1 if not full else err.count(
      "reads 4 element(s) outside x_ref")), err
  assert "pallas_prof.BoundsError: the kernel failed under Triton's interpreter" in err, err
  assert f"{script}:8" in err, err
  if full:     # everything kept: JAX's log of the callback and the interpreter's frames
    assert "jax.pure_callback failed" in err and "triton/runtime/interpreter.py" in err, err
  else:
    assert "jax.pure_callback failed" not in err and "interpreter.py" not in err, err
    assert len(err.splitlines()) < 20, err
