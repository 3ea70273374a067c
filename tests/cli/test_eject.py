"""`pallas-prof show --eject`: the standalone program computes what the
in-process CPU path computed, bit for bit (subnormals and aliasing included),
and picks Triton's interpreter by itself on a machine without a GPU."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.cli.test_cli import pallas_prof

# One run, two kernels: an exact GELU whose far-left tail is subnormal, and a
# kernel whose output aliases its input and reads the input after writing it.
SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl

def gelu_kernel(x_ref, o_ref):
  o_ref[...] = jax.nn.gelu(x_ref[...], approximate=False)

def accumulate_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0
  o_ref[...] += x_ref[...]      # x_ref is o_ref's buffer: reads 2x back

rng = np.random.default_rng({seed})
x = (rng.standard_normal((100, 300)) * 6).astype(np.float32)
y = rng.standard_normal((37, 45)).astype(np.float32)
np.savez({inputs!r}, gelu=x, accumulate=y)
gelu = pl.pallas_call(gelu_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
acc = jax.jit(pl.pallas_call(accumulate_kernel, out_shape=jax.ShapeDtypeStruct(y.shape, jnp.float32),
                             input_output_aliases={{0: 0}}))(y)
np.savez({expected!r}, gelu=np.asarray(gelu), accumulate=np.asarray(acc))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("eject")
  seed = int(np.random.default_rng().integers(2**31))
  script = tmp / "kernels.py"
  script.write_text(textwrap.dedent(SCRIPT.format(seed=seed, inputs=str(tmp / "inputs.npz"),
                                                  expected=str(tmp / "expected.npz"))))
  result = pallas_prof("run", "--no-analysis", "--out", str(tmp / "run"), str(script))
  assert result.returncode == 0, result.stdout + result.stderr
  return tmp, seed


def eject_and_run(tmp, kernel: str, *flags: str):
  inputs = np.load(tmp / "inputs.npz")
  np.savez(tmp / f"{kernel}_in.npz", x_ref=inputs[kernel.split("_")[0]])
  program = tmp / f"{kernel}.py"
  show = pallas_prof("show", kernel, "--dir", str(tmp / "run"), "--eject", str(program))
  assert show.returncode == 0, show.stdout + show.stderr
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
  result = subprocess.run([sys.executable, str(program), *flags, "--inputs",
                           str(tmp / f"{kernel}_in.npz"), "--output", str(tmp / f"{kernel}_out.npz")],
                          capture_output=True, text=True, env=env, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  return np.load(tmp / f"{kernel}_out.npz")["o_ref"], result, program.read_text()


def _has_gpu() -> bool:
  try:
    from cuda.bindings import driver as cu
    return cu.cuInit(0)[0] == cu.CUresult.CUDA_SUCCESS and cu.cuDeviceGetCount()[1] > 0
  except Exception:  # noqa: BLE001 - no cuda-python, no driver: no GPU
    return False


def test_subnormals_agree_with_the_in_process_run(run):
  tmp, seed = run
  # the ejected program runs where the in-process run ran: on a GPU machine the GPU's
  # erf and the interpreter's differ in last bits (the point here is the subnormals)
  got, _, _ = eject_and_run(tmp, "gelu_kernel", *(() if _has_gpu() else ("--interpret",)))
  expected = np.load(tmp / "expected.npz")["gelu"]
  tiny = (expected != 0) & (np.abs(expected) < np.finfo(np.float32).tiny)
  # GPU semantics (no flush-to-zero): the in-process run keeps subnormals, even
  # though XLA's CPU threads, which run its callback, flush them
  assert tiny.sum() > 10, f"seed {seed}: the input should reach GELU's subnormal tail"
  np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32),
                                err_msg=f"seed {seed}")


def test_aliased_output_is_the_inputs_buffer(run):
  tmp, seed = run
  got, _, text = eject_and_run(tmp, "accumulate_kernel", "--interpret")
  assert "ALIASES = {0: 0}" in text
  x = np.load(tmp / "inputs.npz")["accumulate"]
  expected = np.load(tmp / "expected.npz")["accumulate"]
  np.testing.assert_array_equal(got, expected, err_msg=f"seed {seed}")
  np.testing.assert_array_equal(got, x * np.float32(2) + x * np.float32(2))   # 4x, not 3x


def test_an_eject_path_that_cannot_be_written_says_so(run, tmp_path):
  """--eject into a directory that does not exist: one line naming the path and what to do
  (it was a traceback from open())."""
  tmp, _ = run
  target = tmp_path / "no" / "such" / "dir" / "k.py"
  show = pallas_prof("show", "gelu_kernel", "--dir", str(tmp / "run"), "--eject", str(target))
  assert show.returncode == 1, show.stdout + show.stderr
  assert f"cannot write {target}" in show.stderr and "Traceback" not in show.stderr, show.stderr


def test_inputs_of_another_name_or_shape_are_refused_in_words(run):
  """--inputs without the parameter's array ended in a KeyError traceback; one of another
  shape ran the kernel on addresses computed for the generated shape."""
  tmp, _ = run
  program = tmp / "gelu_checked_inputs.py"
  show = pallas_prof("show", "gelu_kernel", "--dir", str(tmp / "run"), "--eject", str(program))
  assert show.returncode == 0, show.stdout + show.stderr
  env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
  x = np.load(tmp / "inputs.npz")["gelu"]
  for arrays, needle in (({"x": x}, "has no array 'x_ref' (it has x)"),
                         ({"x_ref": x[:50]}, "'x_ref' has shape (50, 300); the kernel was "
                                             "generated for (100, 300) float32")):
    np.savez(tmp / "bad_in.npz", **arrays)
    result = subprocess.run([sys.executable, str(program), "--interpret", "--inputs",
                             str(tmp / "bad_in.npz")], capture_output=True, text=True, env=env,
                            timeout=600)
    assert result.returncode == 1, result.stdout + result.stderr
    assert needle in result.stderr and "Traceback" not in result.stderr, result.stderr


@pytest.mark.skipif(_has_gpu(), reason="checks the fallback of a machine without a GPU")
def test_without_a_gpu_the_program_picks_the_interpreter_and_says_so(run):
  tmp, _ = run
  got, result, _ = eject_and_run(tmp, "gelu_kernel")       # no --interpret
  assert "no NVIDIA GPU" in result.stderr and "interpreter" in result.stderr, result.stderr
  if not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")):
    # no driver: say so, not which Python package the GPU path would need
    assert "no NVIDIA driver is loaded" in result.stderr and "cuda" not in result.stderr, \
        result.stderr
  np.testing.assert_array_equal(got.view(np.uint32),
                                np.load(tmp / "expected.npz")["gelu"].view(np.uint32))


CHECKED_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl

def window_kernel(s_ref, x_ref, o_ref):
  o_ref[...] = x_ref[pl.ds(s_ref[0], 16)] * 2          # the checked read

x = np.arange(128, dtype=np.float32)
out = pl.pallas_call(window_kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32),
                     name="window_read")(np.array([3], np.int32), x)
assert np.array_equal(np.asarray(out), x[3:19] * 2)
"""


def test_an_ejected_bounds_checked_kernel_fills_its_flag_and_names_the_line(tmp_path):
  """A kernel saved by a PALLAS_PROF_CHECK=bounds run has more parameters than
  its inputs and outputs (the outputs' starting values, the flag buffer): the
  ejected program fills them, and a read past the ref is reported as in-process,
  with the user's line, instead of running off the buffer; the exit status says so."""
  script = tmp_path / "window.py"
  script.write_text(textwrap.dedent(CHECKED_SCRIPT))
  env = {**os.environ, "PALLAS_PROF_CHECK": "bounds"}
  result = subprocess.run([sys.executable, "-m", "pallas_prof.cli.main", "run", "--no-analysis",
                           "--out", str(tmp_path / "run"), str(script)], capture_output=True,
                          text=True, env=env, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  program = tmp_path / "window_read.py"
  show = pallas_prof("show", "window_read", "--dir", str(tmp_path / "run"), "--eject", str(program))
  assert show.returncode == 0, show.stdout + show.stderr
  line = 1 + next(i for i, t in enumerate(CHECKED_SCRIPT.splitlines()) if "the checked read" in t)
  clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
  x = np.arange(128, dtype=np.float32) * 0.5
  outcomes = {}
  for start in (3, 120):
    np.savez(tmp_path / f"in{start}.npz", s_ref=np.array([start], np.int32), x_ref=x)
    outcomes[start] = subprocess.run(
        [sys.executable, str(program), "--interpret", "--inputs", str(tmp_path / f"in{start}.npz"),
         "--output", str(tmp_path / f"out{start}.npz")], capture_output=True, text=True, env=clean,
        timeout=600)
  ok, bad = outcomes[3], outcomes[120]
  assert ok.returncode == 0, ok.stdout + ok.stderr
  np.testing.assert_array_equal(np.load(tmp_path / "out3.npz")["o_ref"], x[3:19] * 2)
  assert bad.returncode == 3, bad.stdout + bad.stderr
  assert "out of bounds: `get` in kernel `window_read`" in bad.stderr, bad.stderr
  assert f"window.py:{line}" in bad.stderr, bad.stderr
  assert "reads x_ref (shape (128,), float32) at index [128:136]: 8 lane(s)" in bad.stderr, bad.stderr
  # the lanes inside the ref were read; the dropped ones read nothing past the buffer
  got = np.load(tmp_path / "out120.npz")["o_ref"]
  np.testing.assert_array_equal(got[:8], x[120:128] * 2)


ML_DTYPES_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl

def twice_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + x_ref[...]

rng = np.random.default_rng({seed})
x8 = rng.uniform(-4, 4, (5, 24)).astype(jnp.float8_e4m3fn)
x4 = rng.integers(-4, 4, (6, 10), endpoint=True).astype(jnp.int4)
f8 = pl.pallas_call(twice_kernel, out_shape=jax.ShapeDtypeStruct(x8.shape, x8.dtype),
                    name="twice_f8")(x8)
i4 = pl.pallas_call(twice_kernel, out_shape=jax.ShapeDtypeStruct(x4.shape, x4.dtype),
                    name="twice_i4")(x4)
np.savez({inputs!r}, twice_f8=x8, twice_i4=x4)          # as a user would: raw bytes in the .npz
np.savez({expected!r}, twice_f8=np.asarray(f8).view(np.uint8), twice_i4=np.asarray(i4).view(np.uint8))
"""


@pytest.mark.parametrize("where", ["interpreter", pytest.param("gpu", marks=pytest.mark.skipif(
    not _has_gpu(), reason="the ejected program's GPU launcher needs a GPU"))])
def test_float8_and_int4_kernels_eject_and_agree_in_check_mode(tmp_path, where):
  """ml_dtypes' types in an ejected program: float8 and int4 parameters (numpy kind 'V',
  int4 packed two a byte in the kernel's buffers), with the bounds-checked build's
  poisoned starting values. The program crashed on np.dtype('float8_e4m3fn') / 'int4'.
  On a GPU machine the ejected program also runs on the GPU (its buffers typed by their
  storage: uint8 for packed int4)."""
  seed = int(np.random.default_rng().integers(2**31))
  script = tmp_path / "ml_dtypes_kernels.py"
  script.write_text(textwrap.dedent(ML_DTYPES_SCRIPT.format(
      seed=seed, inputs=str(tmp_path / "inputs.npz"), expected=str(tmp_path / "expected.npz"))))
  env = {**os.environ, "PALLAS_PROF_CHECK": "bounds"}
  result = subprocess.run([sys.executable, "-m", "pallas_prof.cli.main", "run", "--no-analysis",
                           "--out", str(tmp_path / "run"), str(script)], capture_output=True,
                          text=True, env=env, timeout=600)
  assert result.returncode == 0, result.stdout + result.stderr
  inputs, expected = np.load(tmp_path / "inputs.npz"), np.load(tmp_path / "expected.npz")
  clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
  for kernel in ("twice_f8", "twice_i4"):
    program = tmp_path / f"{kernel}.py"
    show = pallas_prof("show", kernel, "--dir", str(tmp_path / "run"), "--eject", str(program))
    assert show.returncode == 0, show.stdout + show.stderr
    assert "'initial'" in program.read_text()       # the bounds-checked build
    np.savez(tmp_path / f"{kernel}_in.npz", x_ref=inputs[kernel])
    flags = ["--interpret"] if where == "interpreter" else []
    ran = subprocess.run([sys.executable, str(program), *flags, "--inputs",
                          str(tmp_path / f"{kernel}_in.npz"), "--output",
                          str(tmp_path / f"{kernel}_out.npz")], capture_output=True, text=True,
                         env=clean, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    got = np.load(tmp_path / f"{kernel}_out.npz")["o_ref"]
    np.testing.assert_array_equal(got, expected[kernel], err_msg=f"{kernel}, seed {seed}")


@pytest.mark.parametrize("fusion", [False, True])
def test_the_ejected_gpu_launch_compiles_with_pallas_prof_s_options(tmp_path, fusion):
  """Triton's defaults flush f32 denormals in libdevice and fuse multiply-add; the ejected
  program's launcher asks for what pallas-prof compiled with (on the H200 at 136b41e, the
  ejected GELU without them gave -0.0 for 127 of 30,000 subnormal results)."""
  import jax
  from jax.experimental import pallas as pl

  import pallas_prof
  from pallas_prof.backend.compiling.compile_cache import compile_options
  from pallas_prof.cli.eject import eject
  from testkit.examples import lowered_record, sds

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 1.5 + x_ref[...]

  was = pallas_prof.installed()
  pallas_prof.install()
  try:
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((64,), "float32"),
                          compiler_params=pallas_prof.CompilerParams(enable_fp_fusion=fusion))
    rec = lowered_record(jax.jit(call), sds((64,), "float32"))
  finally:
    if not was:
      pallas_prof.uninstall()
  text = open(eject(rec.generated, str(tmp_path / "k.py"))).read()
  namespace = {}
  exec(next(line for line in text.splitlines() if line.startswith("OPTIONS = ")), namespace)
  assert namespace["OPTIONS"] == {"enable_reflect_ftz": False, "enable_fp_fusion": fusion}
  # options Triton's CUDA backend takes, as the launcher hands them to it
  from triton.backends.nvidia.compiler import CUDAOptions
  options = CUDAOptions(num_warps=4, **namespace["OPTIONS"])
  assert options.enable_reflect_ftz is False and options.enable_fp_fusion is fusion
  libdevice = dict(compile_options(rec.generated).get("extern_libs", ())).get("libdevice")
  assert f"LIBDEVICE = {libdevice!r}" in text
  assert "num_stages=NUM_STAGES, **options)" in text
