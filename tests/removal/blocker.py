"""JAX without its Triton backend, as when JAX removes it: `jax._src.pallas.triton` and
`jax.experimental.pallas.triton` (and what is under them) cannot be imported.

The removal drill (test_drill.py) copies this file to the root of a copy of the project
as `sitecustomize.py`, so that every Python process started with that root on its path
(the tests, the CLI's and the compile worker's subprocesses) imports it first.
Imports nothing of JAX.
"""
import importlib.abc
import sys

REMOVED = ("jax._src.pallas.triton", "jax.experimental.pallas.triton")


class JaxTritonRemoved(importlib.abc.MetaPathFinder):
  def find_spec(self, name, path=None, target=None):
    if any(name == r or name.startswith(r + ".") for r in REMOVED):
      raise ModuleNotFoundError(f"No module named {name!r} (the removal drill: JAX without "
                                "its Triton backend)", name=name)
    return None


if not any(isinstance(f, JaxTritonRemoved) for f in sys.meta_path):
  sys.meta_path.insert(0, JaxTritonRemoved())

# An editable install of pallas-prof (the test environments' `pip install -e .`) keeps a
# finder that serves any pallas_prof module the copy lacks from the original tree: a
# shim deleted in the copy would still import. The drill's processes see the copy alone.
sys.meta_path[:] = [f for f in sys.meta_path
                    if not getattr(f, "__module__", "").startswith("__editable___pallas_prof")
                    and not type(f).__module__.startswith("__editable___pallas_prof")]
