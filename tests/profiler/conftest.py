"""Fixtures: the examples' kernels lowered (not run) on CPU and compiled for sm_90."""
from __future__ import annotations

import importlib.util
import os

import jax
import jax.numpy as jnp
import pytest

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.profiler import driver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def load_example(name: str):
  """Imports examples/<name>.py under a private module name (it may call install())."""
  was_installed = pallas_prof.installed()
  spec = importlib.util.spec_from_file_location(f"pallas_prof_example_{name}",
                                                os.path.join(EXAMPLES, f"{name}.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  if not was_installed:
    pallas_prof.uninstall()
  return module


def line_of(name: str, needle: str, function: str | None = None) -> int:
  """The 1-based line of examples/<name>.py holding `needle` inside `function`
  (by default the example's kernel, `<name>_kernel`)."""
  import ast
  path = os.path.join(EXAMPLES, f"{name}.py")
  with open(path) as f:
    text = f.read()
  function = function or f"{name}_kernel"
  node = next(n for n in ast.walk(ast.parse(text))
              if isinstance(n, ast.FunctionDef) and n.name == function)
  lines = text.splitlines()
  hits = [i for i in range(node.lineno, node.end_lineno + 1) if needle in lines[i - 1]]
  assert len(hits) == 1, f"{needle!r} occurs on lines {hits} of {function} in {name}.py"
  return hits[0]


def lowered_record(jitted, *args, **kwargs):
  """Lowers (does not run) a jitted function on CPU; its pallas-prof kernel's record."""
  for attempt in range(2):
    before = {r.key: r.lowerings for r in kernel_registry.kernels()}
    jitted.lower(*args, **kwargs)
    # new, or lowered again (the same kernel lowered before in this session)
    new = [r for r in kernel_registry.kernels() if before.get(r.key, -1) < r.lowerings]
    if new:
      break
    # JAX's own cache answered: lower again. (Matching the registry by avals instead took
    # causal and non-causal flash attention, which share them, for one kernel whenever
    # another test had lowered the same call first in the worker.)
    jax.clear_caches()
  assert len(new) == 1, [r.label for r in new]
  return new[0]


def sds(shape, dtype):
  return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))


@pytest.fixture(scope="session")
def examples():
  return {name: load_example(name)
          for name in ("matmul", "softmax", "flash_attention", "layer_norm")}


@pytest.fixture(scope="session")
def matmul_wgmma(examples):
  """128^3 bf16 with 64x64 blocks: Hopper wgmma / HGMMA."""
  rec = lowered_record(examples["matmul"].matmul, sds((128, 128), "bfloat16"),
                       sds((128, 128), "bfloat16"), bm=64, bn=64, bk=32)
  return rec, compile_kernel(rec.generated, ("cuda", 90))


@pytest.fixture(scope="session")
def matmul_mma(examples):
  """64^3 bf16 with 32x32 blocks: mma.sync / HMMA."""
  rec = lowered_record(examples["matmul"].matmul, sds((64, 64), "bfloat16"),
                       sds((64, 64), "bfloat16"), bm=32, bn=32, bk=32)
  return rec, compile_kernel(rec.generated, ("cuda", 90))


@pytest.fixture(scope="session")
def softmax_kernel(examples):
  rec = lowered_record(examples["softmax"].softmax, sds((4, 128), "float32"))
  return rec, compile_kernel(rec.generated, ("cuda", 90))


@pytest.fixture(scope="session")
def flash_kernels(examples):
  fa = examples["flash_attention"]
  q = sds((1, 128, 1, 32), "float16")
  out = {}
  for causal in (False, True):
    rec = lowered_record(fa.flash_attention, q, q, q, causal=causal, block_q=32, block_k=32)
    out[causal] = (rec, compile_kernel(rec.generated, ("cuda", 90)))
  return out


@pytest.fixture
def fake_driver(monkeypatch):
  """Installs the host-memory stand-in for the CUDA driver (fake_cuda.py)."""
  from .fake_cuda import FakeDriver

  def install(gk=None, **kwargs):
    fake = FakeDriver(gk, **kwargs)
    monkeypatch.setattr(driver, "_driver", lambda: fake)
    monkeypatch.setattr(driver, "_initialized", {"done": False, "error": None})
    return fake
  return install


@pytest.fixture
def installed():
  """pallas-prof installed for the test, and left as it was found afterwards."""
  was = pallas_prof.installed()
  pallas_prof.install()
  yield
  if not was:
    pallas_prof.uninstall()
