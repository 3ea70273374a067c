"""Bad input gets a clear error, never a wrong number (issue 38, item 4): invalid block
sizes and grids of a pallas_call, invalid PALLAS_PROF_* variables, and a grid the CPU
interpreter would take hours on.

Each case asserts the three properties of the fault suite: the error names the
problem, the BlockSpec or grid and the user's file:line (or the answer is right); nothing
ran or was persisted (no kernel recorded, no generated source in the cache, a script's
marker file absent); where a run was going on, its report exists.
"""
from __future__ import annotations

import glob
import json
import os
import pathlib
import queue
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof import settings
from pallas_prof.backend import kernel_registry, kernel_files
from pallas_prof.backend.running import long_runs
from testkit.helpers import pallas
from tests.test_settings import CASES

S = jax.ShapeDtypeStruct
F32 = jnp.float32
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _here() -> int:
  """The caller's line: the line a BlockSpec is written on."""
  return sys._getframe(1).f_lineno


def _plus_one(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1


def _ones(x_ref, o_ref):
  o_ref[...] = jnp.ones(o_ref.shape, o_ref.dtype)     # the input's block is never read


def _writes_nothing(x_ref, o_ref):
  pass


# name -> a function returning (the call, its arguments, the BlockSpec's line or None
# for the pallas_call's, what the message must say)
BAD_CALLS: dict = {}


def bad_call(name):
  def register(builder):
    BAD_CALLS[name] = builder
    return builder
  return register


def _x(shape=(16,)):
  return jnp.arange(int(np.prod(shape)), dtype=F32).reshape(shape)


@bad_call("negative_block_in_and_out")
def _negative(name):
  # the issue's case: all zeros and exit 0
  spec, line = pl.BlockSpec((-4,), lambda i: (i,)), _here()
  fn = pallas(_plus_one, S((16,), F32), grid=(4,), in_specs=[spec], out_specs=spec, name=name)
  return fn, (_x(),), line, ("BlockSpec of x_ref (input 0) is -4", "1 or more")


@bad_call("negative_block_unread_input")
def _negative_unread(name):
  spec, line = pl.BlockSpec((-4,), lambda i: (i,)), _here()
  fn = pallas(_ones, S((16,), F32), grid=(4,), in_specs=[spec],
              out_specs=pl.BlockSpec((4,), lambda i: (i,)), name=name)
  return fn, (_x(),), line, ("BlockSpec of x_ref (input 0) is -4",)


@bad_call("negative_block_output_only")
def _negative_out(name):
  spec, line = pl.BlockSpec((-4,), lambda i: (i,)), _here()
  fn = pallas(_writes_nothing, S((16,), F32), grid=(4,),
              in_specs=[pl.BlockSpec((4,), lambda i: (i,))], out_specs=spec, name=name)
  return fn, (_x(),), line, ("BlockSpec of o_ref (output 0) is -4",)


@bad_call("zero_block_in_and_out")
def _zero(name):
  spec, line = pl.BlockSpec((0,), lambda i: (i,)), _here()
  fn = pallas(_plus_one, S((16,), F32), grid=(4,), in_specs=[spec], out_specs=spec, name=name)
  return fn, (_x(),), line, ("BlockSpec of x_ref (input 0) is 0", "1 or more")


@bad_call("zero_block_unread_input")
def _zero_unread(name):
  spec, line = pl.BlockSpec((0,), lambda i: (i,)), _here()
  fn = pallas(_ones, S((16,), F32), grid=(4,), in_specs=[spec],
              out_specs=pl.BlockSpec((4,), lambda i: (i,)), name=name)
  return fn, (_x(),), line, ("BlockSpec of x_ref (input 0) is 0",)


@bad_call("negative_second_dimension")
def _negative_2d(name):
  spec, line = pl.BlockSpec((4, -8), lambda i: (i, 0)), _here()
  fn = pallas(_plus_one, S((8, 8), F32), grid=(2,), in_specs=[spec], out_specs=spec, name=name)
  return fn, (_x((8, 8)),), line, ("dimension 1 of the BlockSpec of x_ref", "(4, -8)")


@bad_call("negative_beside_squeezed")
def _negative_squeezed(name):
  spec, line = pl.BlockSpec((None, -8), lambda i: (i, 0)), _here()
  fn = pallas(_plus_one, S((8, 8), F32), grid=(8,), in_specs=[spec], out_specs=spec, name=name)
  return fn, (_x((8, 8)),), line, ("dimension 1 of the BlockSpec of x_ref", "(None, -8)")


@bad_call("element_zero")
def _element_zero(name):
  spec, line = pl.BlockSpec((pl.Element(0),), lambda i: (i * 4,)), _here()
  fn = pallas(_plus_one, S((16,), F32), grid=(4,), in_specs=[spec], out_specs=spec, name=name)
  return fn, (_x(),), line, ("BlockSpec of x_ref (input 0) is 0",)


@bad_call("element_negative_unread_input")
def _element_negative(name):
  spec, line = pl.BlockSpec((pl.Element(-4),), lambda i: (i * 4,)), _here()
  fn = pallas(_ones, S((16,), F32), grid=(4,), in_specs=[spec],
              out_specs=pl.BlockSpec((4,), lambda i: (i,)), name=name)
  return fn, (_x(),), line, ("BlockSpec of x_ref (input 0) is -4",)


@bad_call("negative_block_under_vmap")
def _negative_vmap(name):
  spec, line = pl.BlockSpec((-4,), lambda i: (i,)), _here()
  call = pallas(_plus_one, S((16,), F32), grid=(4,), in_specs=[spec], out_specs=spec, name=name)
  return jax.vmap(call), (jnp.ones((3, 16), F32),), line, ("BlockSpec of x_ref", "-4")


@bad_call("empty_array_whole_block")
def _empty_array(name):
  # the default BlockSpec of an empty array is a block of size 0 (JAX's interpret mode
  # divides by it); its index map is JAX's, so the error is at the pallas_call
  fn = pallas(_plus_one, S((0,), F32), name=name)
  return fn, (jnp.zeros((0,), F32),), None, ("is 0", "empty along dimension 0")


@bad_call("negative_grid")
def _negative_grid(name):
  spec = pl.BlockSpec((4,), lambda i: (i,))
  fn = pallas(_plus_one, S((16,), F32), grid=(-4,), in_specs=[spec], out_specs=spec, name=name)
  return fn, (_x(),), None, ("dimension 0 of the grid (-4,) is -4", "0 or more")


@bad_call("negative_grid_second_dimension")
def _negative_grid_2d(name):
  spec = pl.BlockSpec((4, 4), lambda i, j: (i, j))
  fn = pallas(_plus_one, S((8, 8), F32), grid=(2, -2), in_specs=[spec], out_specs=spec,
              name=name)
  return fn, (_x((8, 8)),), None, ("dimension 1 of the grid (2, -2) is -2",)


@bad_call("two_negative_grid_dimensions")
def _negative_grid_pair(name):
  # JAX's interpret mode runs this one: (-2) * (-2) = 4 programs, at negative ids
  spec = pl.BlockSpec((4, 4), lambda i, j: (i, j))
  fn = pallas(_plus_one, S((8, 8), F32), grid=(-2, -2), in_specs=[spec], out_specs=spec,
              name=name)
  return fn, (_x((8, 8)),), None, ("dimension 0 of the grid (-2, -2) is -2",)


@bad_call("negative_scratch_shape")
def _negative_scratch(name):
  from jax.experimental.pallas import tpu as pltpu

  def kernel(x_ref, o_ref, scratch_ref):
    o_ref[...] = x_ref[...]

  spec = pl.BlockSpec((4,), lambda i: (i,))
  fn = pallas(kernel, S((16,), F32), grid=(4,), in_specs=[spec], out_specs=spec, name=name,
              scratch_shapes=[pltpu.VMEM((-4,), F32)])
  return fn, (_x(),), None, ("scratch_shapes[0]: shape (-4,): dimension 0 is -4",)


def _lowering_error(fn, args):
  """The LoweringError of calling fn, and the line of the call (the pallas_call's, eager)."""
  try:
    jax.block_until_ready(fn(*args))
  except pallas_prof.LoweringError as e:
    [frame] = [f for f in traceback.extract_tb(e.__traceback__) if f.name == "_lowering_error"]
    return e, frame.lineno
  raise AssertionError("no LoweringError: the call ran")


def _generated_sources(name: str) -> list[str]:
  return glob.glob(os.path.join(kernel_files.cache_dir(), "kernels", f"{name}_*.py"))


@pytest.mark.fault("bad_input")
@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_block_or_grid_is_a_lowering_error_at_the_users_line(case):
  name = f"bad_input_{case}"
  fn, args, spec_line, needles = BAD_CALLS[case](name)
  kernel_registry.clear()
  error, call_line = _lowering_error(fn, args)
  message = str(error)
  # the problem, the kernel, the user's line and what to do next
  for needle in needles:
    assert needle in message, message
  assert f"kernel `{name}`" in message and "hint:" in message, message
  assert error.eqn.file == __file__, message
  if spec_line is not None:    # at the BlockSpec's line, the pallas_call's named beside it
    assert error.eqn.line == spec_line, message
    assert f"at {__file__}:{spec_line}" in message
    assert f"pallas_call: {__file__}:{call_line}" in message, message
  else:
    assert error.eqn.line == call_line and f"at {__file__}:{call_line}" in message, message
  # nothing ran, nothing was written for a later process to find
  assert not [r for r in kernel_registry.kernels() if r.name == name]
  assert not _generated_sources(name)
  # and the same call fails the same way again (no state left half-made)
  again, _ = _lowering_error(fn, args)
  assert again.reason == error.reason


@pytest.mark.fault("bad_input")
def test_a_negative_block_under_run_is_reported_and_stops_the_script(tmp_path):
  """The issue's case through `pallas-prof run`: it printed all zeros and exited 0."""
  script = tmp_path / "negative_block.py"
  marker = tmp_path / "went_on"
  script.write_text(textwrap.dedent(f"""
      import jax, jax.numpy as jnp
      from jax.experimental import pallas as pl

      def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

      spec = pl.BlockSpec((-4,), lambda i: (i,))
      y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32),
                         grid=(4,), in_specs=[spec], out_specs=spec)(jnp.arange(16.0))
      open({str(marker)!r}, "w").write(str(y))
      """))
  out = tmp_path / "out"
  result = _pallas_prof("run", "--no-analysis", "--out", str(out), str(script),
                        env_cache=tmp_path / "cache")
  text = result.stdout + result.stderr
  assert result.returncode == 1, text
  assert f"{script}:8" in text and "BlockSpec of x_ref (input 0) is -4" in text, text
  assert not marker.exists()
  assert not glob.glob(str(tmp_path / "cache" / "kernels" / "kernel_*.py"))
  report = json.loads((out / "report.json").read_text())
  (entry,) = report["errors"]
  assert entry["location"] == f"{script}:8" and "is -4" in entry["reason"]
  assert report["kernels"] == []


def _pallas_prof(*args, env_cache, extra_env=None, timeout=600):
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             PALLAS_PROF_CACHE_DIR=str(env_cache))
  for key in [k for k in env if k.startswith("PALLAS_PROF_") and k != "PALLAS_PROF_CACHE_DIR"]:
    del env[key]
  env.update(extra_env or {})
  return subprocess.run([sys.executable, "-m", "pallas_prof", *args], capture_output=True,
                        text=True, env=env, cwd=ROOT, timeout=timeout)


# --- PALLAS_PROF_* variables -------------------------------------------------------------

def _marker_script(tmp_path) -> tuple:
  """A script that runs a kernel and leaves a marker file: what must not happen when `run`
  refuses."""
  script, marker = tmp_path / "uses_a_kernel.py", tmp_path / "script_ran"
  script.write_text(textwrap.dedent(f"""
      import jax, jax.numpy as jnp
      from jax.experimental import pallas as pl

      def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

      y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))(
          jnp.arange(16.0))
      open({str(marker)!r}, "w").write(str(y))
      """))
  return script, marker


@pytest.mark.fault("bad_input")
@pytest.mark.parametrize("name", sorted(CASES))
def test_run_refuses_a_bad_variable_before_the_script_runs(name, tmp_path):
  """PALLAS_PROF_CUDA_DRIVER_VERSION=abc and PALLAS_PROF_LIBDEVICE=/nonexistent crashed
  `run` after the script had run, so the run was lost."""
  bad, why = CASES[name][1]
  script, marker = _marker_script(tmp_path)
  out, cache = tmp_path / "out", tmp_path / "cache"
  extra = {name: bad}
  if name == "PALLAS_PROF_CACHE_DIR":
    cache = pathlib.Path(bad)
  result = _pallas_prof("run", "--out", str(out), str(script), env_cache=cache, extra_env=extra,
                        timeout=300)
  text = result.stderr
  assert result.returncode == 2, result.stdout + text
  # the variable, its value, why and what it accepts; and that nothing ran
  assert f"pallas-prof run: {name}={bad!r}: " in text and why in text, text
  assert settings.variable(name).accepts in text and "the script was not run" in text, text
  assert "Traceback" not in text, text
  assert not marker.exists() and not out.exists()
  if name != "PALLAS_PROF_CACHE_DIR":
    assert not cache.exists()
  # the same command without the bad value runs (nothing was left behind to trip on)
  if name == "PALLAS_PROF_CUDA_DRIVER_VERSION":
    good = _pallas_prof("run", "--no-analysis", "--out", str(out), str(script), env_cache=cache,
                        timeout=600)
    assert good.returncode == 0 and marker.exists(), good.stdout + good.stderr
    assert (out / "report.json").exists()


def _recorded(fn):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    result = fn()
  return result, caught


@pytest.mark.fault("bad_input")
def test_an_unknown_check_warns_at_the_users_pallas_call_and_runs_unchecked(monkeypatch):
  """PALLAS_PROF_CHECK=garbage warned at pallas_call_rule.py, not at the user's line."""
  monkeypatch.setattr(settings, "_warned", set())
  monkeypatch.setenv("PALLAS_PROF_CHECK", "garbage")
  x = _x()
  fn = pallas(_plus_one, S((16,), F32), name="bad_input_check_garbage")
  line = sys._getframe().f_lineno + 1
  out, caught = _recorded(lambda: jax.block_until_ready(fn(x)))
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + 1)
  mine = [w for w in caught if issubclass(w.category, settings.EnvironmentVariableWarning)]
  assert len(mine) == 1, [str(w.message) for w in caught]
  assert (mine[0].filename, mine[0].lineno) == (__file__, line), (mine[0].filename,
                                                                   mine[0].lineno)
  assert "PALLAS_PROF_CHECK='garbage'" in str(mine[0].message)
  assert "it accepts bounds" in str(mine[0].message)
  [rec] = [r for r in kernel_registry.kernels() if r.name == "bad_input_check_garbage"]
  assert not rec.generated.check_bounds             # unchecked, as if unset
  # said once: the next call is quiet
  _, again = _recorded(lambda: jax.block_until_ready(fn(x)))
  assert not [w for w in again if issubclass(w.category, settings.EnvironmentVariableWarning)]


_LIBRARY_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.cli.run_steps.kernels import ensure_compiled

pallas_prof.install()

def kernel(x_ref, o_ref):
  o_ref[...] = jnp.exp(x_ref[...]) + 1

x = jnp.linspace(-1.0, 1.0, 16)
y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))(x)
np.testing.assert_allclose(np.asarray(y), np.exp(np.asarray(x)) + 1, rtol=1e-6)
errors = []
for rec in kernel_registry.kernels():
  ensure_compiled(rec, errors)        # compiled for sm_90: where the bad values crashed
assert not errors, errors
print("compiled", rec.compiled.target)
"""


@pytest.mark.fault("bad_input")
def test_install_warns_at_the_users_line_and_goes_on_with_the_defaults(tmp_path):
  """In the user's own program, bad values are said at install() and read as unset: the
  kernel runs and compiles (the compile read both variables where `run` had crashed)."""
  script = tmp_path / "library_use.py"
  script.write_text(_LIBRARY_SCRIPT)
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             PALLAS_PROF_CACHE_DIR=str(tmp_path / "cache"))
  for key in [k for k in env if k.startswith("PALLAS_PROF_") and k != "PALLAS_PROF_CACHE_DIR"]:
    del env[key]
  bad = dict(env, PALLAS_PROF_CUDA_DRIVER_VERSION="abc", PALLAS_PROF_LIBDEVICE="/nonexistent")
  result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=bad, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  assert "compiled" in result.stdout
  said = [line for line in result.stderr.splitlines() if "EnvironmentVariableWarning" in line]
  assert len(said) == 2, result.stderr
  for line, name in zip(said, ("PALLAS_PROF_LIBDEVICE", "PALLAS_PROF_CUDA_DRIVER_VERSION")):
    assert line.startswith(f"{script}:8: ") and f"{name}=" in line, line
  # a later process without them inherits nothing: no warning, the same answer
  clean = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=600)
  assert clean.returncode == 0 and "Warning" not in clean.stderr, clean.stderr


# --- a grid the interpreter would take long on ---------------------------------------------

@pytest.mark.fault("bad_input")
def test_a_long_interpreter_launch_is_said_once_with_its_estimate(monkeypatch):
  """A grid of 2**31 - 1 programs ran under the interpreter without a word. With the budget
  made small, a 512-program grid is long: one warning at the kernel, the answer right."""
  monkeypatch.setenv("PALLAS_PROF_INTERPRETER_WARN_S", "0.01")
  monkeypatch.setattr(long_runs, "_warned", set())
  x = _x((512,))
  spec = pl.BlockSpec((1,), lambda i: (i,))
  fn = pallas(_plus_one, S((512,), F32), grid=(512,), in_specs=[spec], out_specs=spec,
              name="bad_input_long_grid")
  out, caught = _recorded(lambda: jax.block_until_ready(fn(x)))
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + 1)
  said = [w for w in caught if issubclass(w.category, long_runs.LongInterpreterRunWarning)]
  assert len(said) == 1, [str(w.message) for w in caught]
  text = str(said[0].message)
  assert text.startswith("kernel `bad_input_long_grid`: its grid (512,) is 512 programs"), text
  assert "this launch will take about" in text and "smaller grid" in text and "GPU" in text
  assert (said[0].filename, said[0].lineno) == (__file__, _plus_one.__code__.co_firstlineno)
  # once per kernel, and nothing of the watch is left on Triton's interpreter
  _, again = _recorded(lambda: jax.block_until_ready(fn(x)))
  assert not [w for w in again if issubclass(w.category, long_runs.LongInterpreterRunWarning)]
  from triton.runtime import interpreter
  assert "set_grid_idx" not in vars(interpreter.interpreter_builder)


@pytest.mark.fault("bad_input")
def test_a_long_launch_under_run_is_said_and_the_run_reported(tmp_path):
  script, marker = tmp_path / "long_grid.py", tmp_path / "answer_right"
  script.write_text(textwrap.dedent(f"""
      import jax, jax.numpy as jnp, numpy as np
      from jax.experimental import pallas as pl

      def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

      spec = pl.BlockSpec((1,), lambda i: (i,))
      x = jnp.arange(256.0)
      y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((256,), jnp.float32),
                         grid=(256,), in_specs=[spec], out_specs=spec)(x)
      np.testing.assert_array_equal(np.asarray(y), np.asarray(x) * 2)
      open({str(marker)!r}, "w").write("ok")
      """))
  out = tmp_path / "out"
  result = _pallas_prof("run", "--no-analysis", "--out", str(out), str(script),
                        env_cache=tmp_path / "cache",
                        extra_env={"PALLAS_PROF_INTERPRETER_WARN_S": "0.001"})
  assert result.returncode == 0, result.stdout + result.stderr
  said = [line for line in result.stderr.splitlines() if "LongInterpreterRunWarning" in line]
  assert len(said) == 1 and f"{script}:5: " in said[0] and "256 programs" in said[0], \
      result.stderr
  assert marker.exists() and (out / "report.json").exists()


def test_a_short_launch_says_nothing(monkeypatch):
  monkeypatch.delenv("PALLAS_PROF_INTERPRETER_WARN_S", raising=False)
  monkeypatch.setattr(long_runs, "_warned", set())
  spec = pl.BlockSpec((1,), lambda i: (i,))
  fn = pallas(_plus_one, S((64,), F32), grid=(64,), in_specs=[spec], out_specs=spec,
              name="bad_input_short_grid")
  _, caught = _recorded(lambda: jax.block_until_ready(fn(_x((64,)))))
  assert not [w for w in caught if issubclass(w.category, long_runs.LongInterpreterRunWarning)]


class _Clock:
  def __init__(self, step: float):
    self.now, self.step = 0.0, step

  def __call__(self) -> float:
    self.now += self.step
    return self.now


@pytest.mark.parametrize("total, per_program, long", [
    (2**31 - 1, 1e-3, True), (10_000, 1e-3, False), (100_000, 1e-3, True), (3, 40.0, True)])
def test_the_estimate_is_the_pace_of_the_first_programs_times_the_grid(total, per_program, long):
  said = []
  pace = long_runs.Pace(total, 60.0, lambda *a: said.append(a), clock=_Clock(per_program))
  for _ in range(min(total, 100)):
    pace.tick()
  assert bool(said) == long
  if long:
    [(each, timed, estimate)] = said
    assert each == pytest.approx(per_program) and timed >= 1
    assert estimate == pytest.approx(per_program * total)


@pytest.mark.fault("bad_input")
def test_the_issues_grid_of_2_31_programs_is_said_within_seconds(tmp_path):
  """The issue's case, at the default budget, in a process of its own (stopped once the
  warning is out: the launch would run for days)."""
  script = tmp_path / "huge_grid.py"
  script.write_text(textwrap.dedent("""
      import jax, jax.numpy as jnp
      from jax.experimental import pallas as pl
      import pallas_prof

      def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1

      spec = pl.BlockSpec((1,), lambda i: (i % 16,))
      pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32), grid=(2**31 - 1,),
                     in_specs=[spec], out_specs=spec,
                     compiler_params=pallas_prof.CompilerParams())(jnp.arange(16.0))
      """))
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             PALLAS_PROF_CACHE_DIR=str(tmp_path / "cache"))
  env.pop("PALLAS_PROF_INTERPRETER_WARN_S", None)
  proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True,
                          env=env)
  try:
    line = _first_line_with(proc.stderr, "LongInterpreterRunWarning", timeout=300)
  finally:
    proc.kill()
    proc.wait()
  assert line is not None, "no warning"
  assert f"{script}:6: LongInterpreterRunWarning: kernel `kernel`: its grid (2147483647,) " \
      "is 2,147,483,647 programs" in line, line
  assert " days" in line or " hours" in line, line


def _first_line_with(stream, needle: str, timeout: float):
  """The first line of `stream` with `needle`, or None after `timeout` seconds."""
  lines: queue.Queue = queue.Queue()
  threading.Thread(target=lambda: [lines.put(x) for x in stream], daemon=True).start()
  end = time.monotonic() + timeout
  while time.monotonic() < end:
    try:
      line = lines.get(timeout=max(0.0, end - time.monotonic()))
    except queue.Empty:
      return None
    if needle in line:
      return line
  return None
