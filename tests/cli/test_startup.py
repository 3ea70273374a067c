"""What `pallas-prof` imports before it answers (issue 39, item 4): the commands that read a
saved run or only print (--help, show, report, diff) never import JAX or Triton, nor does
`tune` on a machine without a GPU before it says so; `run` still installs the backend
before the script. Each case runs the command in a fresh process and reads its
sys.modules at exit. The time it takes is a benchmark record (bench/results/README.md),
not a test: a loaded machine would make a timed test fail for nothing.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
HEAVY = ("jax", "jaxlib", "triton")

# runs `python -m pallas_prof ARGS` as the console script would, then writes the exit code
# and every module the process imported to the file named first
_CHILD = """
import json, runpy, sys
record = sys.argv.pop(1)
sys.argv[0] = "pallas-prof"
try:
  runpy.run_module("pallas_prof", run_name="__main__", alter_sys=True)
  code = 0
except SystemExit as e:
  code = e.code
with open(record, "w") as f:
  json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _env(**extra) -> dict:
  env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
             **extra)
  env.pop("PALLAS_PROF_TRACE", None)        # whole-process tracing loads the backend on purpose
  return env


def imported_by(tmp_path, *args, **env) -> tuple[subprocess.CompletedProcess, int, list[str]]:
  record = tmp_path / "modules.json"
  done = subprocess.run([sys.executable, "-c", _CHILD, str(record), *args], capture_output=True,
                        text=True, env=_env(**env), cwd=tmp_path, timeout=600)
  assert record.exists(), done.stderr[-3000:]
  seen = json.loads(record.read_text())
  return done, seen["code"], seen["modules"]


def heavy(modules: list[str]) -> list[str]:
  return sorted({m.split(".")[0] for m in modules} & set(HEAVY))


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
  """Two saved runs on the CPU (softmax, vector_add) and the softmax kernel's label."""
  outs = []
  for example in ("softmax.py", "vector_add.py"):
    out = tmp_path_factory.mktemp("run") / example[:-3]
    done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out", str(out),
                           os.path.join(EXAMPLES, example)], capture_output=True, text=True,
                          env=_env(JAX_PLATFORMS="cpu"), cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    outs.append(out)
  report = json.loads((outs[0] / "report.json").read_text())
  return outs[0], outs[1], report["kernels"][0]["label"]


def test_help_imports_neither_jax_nor_triton(tmp_path):
  for args in (["--help"], ["run", "--help"], ["tune", "--help"], ["advise", "--help"], []):
    done, code, modules = imported_by(tmp_path, *args)
    assert code in (0, 2) and "pallas-prof" in done.stdout + done.stderr, (args, done.stderr)
    assert "run" in done.stdout + done.stderr
    assert heavy(modules) == [], (args, heavy(modules))


@pytest.mark.parametrize("command", ["show", "show --user", "show --ptx", "report",
                                     "report --json", "report --html", "diff"])
def test_commands_that_read_a_run_import_neither_jax_nor_triton(two_runs, tmp_path, command):
  softmax, vector_add, label = two_runs
  args = command.split()
  if args[0] == "show":
    args += [label, "--dir", str(softmax)]
  elif args[0] == "report":
    args += [str(softmax)] + (["--html-out", str(tmp_path / "page.html")] if "--html" in args
                              else [])
  else:
    args += [str(softmax), str(vector_add)]
  done, code, modules = imported_by(tmp_path, *args)
  assert code == 0, done.stdout[-2000:] + done.stderr[-2000:]
  said = {"show": "softmax", "report": "softmax", "diff": "vector_add"}[args[0]]
  assert said in (done.stdout if "--html" not in args else (tmp_path / "page.html").read_text())
  assert heavy(modules) == [], heavy(modules)


@pytest.mark.no_gpu
def test_tune_without_a_gpu_says_so_before_importing_jax(tmp_path):
  done, code, modules = imported_by(tmp_path, "tune", os.path.join(EXAMPLES, "softmax.py"))
  assert code == 2 and "tuning times kernels on an NVIDIA GPU" in done.stderr, done.stderr
  assert "the script was not run" in done.stderr
  assert heavy(modules) == [], heavy(modules)


def test_run_still_installs_the_backend_before_the_script(tmp_path):
  script = tmp_path / "probe.py"
  script.write_text("import sys, pallas_prof\n"
                    "print('installed before the script:', pallas_prof.installed())\n")
  done, code, modules = imported_by(tmp_path, "run", "--out", str(tmp_path / "out"),
                                    str(script), JAX_PLATFORMS="cpu")
  assert code == 0, done.stderr[-3000:]
  assert "installed before the script: True" in done.stdout
  # jax for the backend's rules; triton only once a kernel is lowered (this script has none)
  assert "jax" in heavy(modules)


def test_the_public_api_is_the_same_when_loaded_on_first_use(tmp_path):
  """Every name of __all__ resolves (the real objects: help() shows install's own
  signature), dir() lists them, a name that is not there says so, and a pallas_call
  given pallas_prof.CompilerParams runs through pallas-prof without install()."""
  code = ("import inspect, sys, pallas_prof\n"
          "assert 'jax' not in sys.modules\n"
          "from pallas_prof import *\n"
          "names = [n for n in pallas_prof.__all__ if getattr(pallas_prof, n) is None]\n"
          "assert not names, names\n"
          "assert set(pallas_prof.__all__) <= set(dir(pallas_prof))\n"
          "from pallas_prof.backend.pallas_call_rule import install, CompilerParams\n"
          "assert pallas_prof.install is install and pallas_prof.CompilerParams is CompilerParams\n"
          "print(inspect.signature(pallas_prof.install))\n"
          "try:\n  pallas_prof.no_such_name\nexcept AttributeError as e:\n  print(e)\n"
          "import jax, jax.numpy as jnp\n"
          "from jax.experimental import pallas as pl\n"
          "def k(x_ref, o_ref):\n  o_ref[...] = x_ref[...] * 2\n"
          "x = jnp.arange(8, dtype=jnp.float32)\n"
          "y = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32),\n"
          "                   compiler_params=pallas_prof.CompilerParams())(x)\n"
          "assert (y == 2 * x).all() and len(pallas_prof.kernels()) == 1\n"
          "print('ran', pallas_prof.kernels()[0].label)\n")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=_env(JAX_PLATFORMS="cpu"), cwd=tmp_path, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  lines = done.stdout.splitlines()
  assert lines[0] == str(inspect.signature(_real_install()))
  assert "check_bounds" in lines[0]
  assert lines[1] == "module 'pallas_prof' has no attribute 'no_such_name'"
  assert lines[2].startswith("ran k#")


def test_compiler_params_from_the_backend_alone_is_registered(tmp_path):
  """`from pallas_prof.backend import CompilerParams`, the package's API never touched:
  JAX still knows pallas-prof's rule for it (the package registered it when it was heavy)."""
  code = ("import jax, jax.numpy as jnp\n"
          "from jax.experimental import pallas as pl\n"
          "from pallas_prof.backend import CompilerParams, kernel_registry\n"
          "def k(x_ref, o_ref):\n  o_ref[...] = x_ref[...] + 1\n"
          "x = jnp.arange(8, dtype=jnp.float32)\n"
          "y = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32),\n"
          "                   compiler_params=CompilerParams())(x)\n"
          "assert (y == x + 1).all() and len(kernel_registry.kernels()) == 1\n")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=_env(JAX_PLATFORMS="cpu"), cwd=tmp_path, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]


def _real_install():
  from pallas_prof.backend.pallas_call_rule import install
  return install
