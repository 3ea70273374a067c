"""The examples' kernels, for the tests and the bench scripts: imported, lowered (not run) on
the CPU, and their lines found. Moved from tests/profiler/conftest.py (load_example, line_of,
lowered_record, sds) and tests/backend/compiling/test_compile.py (lower_example, then
lower_example), which bench/cost and bench/first_call imported."""
from __future__ import annotations

import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

import pallas_prof
from pallas_prof.backend import kernel_registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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


def lower_example(name):
  """Lowers the example's kernel (no run) and returns its GeneratedKernel."""
  sys.path.insert(0, EXAMPLES)
  try:
    module = __import__(name)
  finally:
    sys.path.pop(0)
  kernel_registry.clear()
  jax.clear_caches()   # lower for real, not from jit's cache
  args = {
      "vector_add": lambda: (module.add, (jnp.ones(5000), jnp.ones(5000))),
      "softmax": lambda: (module.softmax, (jnp.ones((16, 300)),)),
      "layer_norm": lambda: (module.layer_norm, (jnp.ones((8, 256)), jnp.ones(256), jnp.ones(256))),
      "matmul": lambda: (module.matmul, (jnp.ones((256, 256), jnp.bfloat16),
                                         jnp.ones((256, 256), jnp.bfloat16))),
      "flash_attention": lambda: (module.flash_attention,
                                  tuple(jnp.ones((1, 128, 2, 64), jnp.float16) for _ in range(3))),
  }[name]()
  fn, xs = args
  fn.lower(*xs)
  (rec,) = kernel_registry.kernels()
  return rec.generated
