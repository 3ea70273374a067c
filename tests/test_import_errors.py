"""A failure inside pallas-prof's imports shows the real exception and the versions found,
never "cannot import name 'CompilerParams'" (what the lazy names of pallas_prof.backend
turned jax 0.12's missing ClosedJaxpr into). Each case plants a failing import in a
fresh process: the module compat.py raising as a JAX it does not know would make it.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PLANT = textwrap.dedent("""
    import importlib.abc, sys

    class Planted(importlib.abc.MetaPathFinder):
      def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
          raise {error}

    sys.meta_path.insert(0, Planted())
""")

ERRORS = {
    "attribute": ("AttributeError(\"module 'jax._src.core' has no attribute 'PlantedName'\")",
                  "AttributeError: module 'jax._src.core' has no attribute 'PlantedName'"),
    "import": ("ImportError(\"cannot import name 'planted' from 'triton.knobs'\")",
               "ImportError: cannot import name 'planted' from 'triton.knobs'"),
    "type": ("TypeError('planted: Primitive() takes a name')",
             "TypeError: planted: Primitive() takes a name"),
}


def _import(statement: str, module: str, error: str) -> subprocess.CompletedProcess:
  code = PLANT.format(module=module, error=error) + statement + "\n"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT,
                                                                  os.environ.get("PYTHONPATH")])))
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                        cwd=ROOT, timeout=300)


def _versions() -> dict[str, str]:
  import platform
  import jax
  import jaxlib
  import triton
  return {"jax": jax.__version__, "jaxlib": jaxlib.__version__, "triton": triton.__version__,
          "Python": platform.python_version()}


@pytest.mark.parametrize("statement", [
    "import pallas_prof\npallas_prof.install",        # the API is loaded on its first use
    "from pallas_prof import CompilerParams",
    "from pallas_prof.backend import CompilerParams",
    "from pallas_prof import triton",
])
@pytest.mark.parametrize("kind", sorted(ERRORS))
def test_a_failing_import_says_what_failed_and_the_versions(statement, kind):
  planted, said = ERRORS[kind]
  done = _import(statement, "pallas_prof.backend.compat", planted)
  assert done.returncode != 0
  assert "cannot import name 'CompilerParams'" not in done.stderr, done.stderr
  assert "PallasProfImportError" in done.stderr, done.stderr
  last = done.stderr.strip().splitlines()
  message = done.stderr[done.stderr.rindex("PallasProfImportError"):]
  assert said in message, done.stderr
  found = ", ".join(f"{name} {version}" for name, version in _versions().items())
  assert f"found: {found}" in message, message
  assert last[0].startswith("Traceback")
  # the real exception's own traceback comes first, chained
  assert "The above exception was the direct cause of the following exception" in done.stderr


def test_the_lazy_names_of_the_backend_say_it_too():
  """A failure inside the import of backend/pallas_call_rule.py through pallas_prof.backend's
  lazy names (the route of the measured failure), imported alone."""
  done = _import("import pallas_prof.backend as b\nb.install", "pallas_prof.backend.lowering.lower",
                 ERRORS["attribute"][0])
  assert done.returncode != 0
  assert "could not import pallas_prof.backend.pallas_call_rule: AttributeError: module " \
         "'jax._src.core' has no attribute 'PlantedName'" in done.stderr, done.stderr
  assert "found: jax " in done.stderr


def test_the_package_alone_imports_neither_jax_nor_triton():
  """`import pallas_prof` is light (the CLI's commands that read a run import it): a JAX
  that would break the backend breaks nothing until the API is used."""
  done = _import("import sys, pallas_prof\nprint(sorted({m.split('.')[0] for m in sys.modules} "
                 "& {'jax', 'triton', 'numpy'}))", "pallas_prof.backend.compat",
                 ERRORS["attribute"][0])
  assert done.returncode == 0, done.stderr
  assert done.stdout.strip() == "[]"


def test_an_import_that_works_is_untouched():
  done = _import("import pallas_prof\nprint(pallas_prof.CompilerParams.__name__)",
                 "nothing.of.ours", "AssertionError")
  assert done.returncode == 0, done.stderr
  assert done.stdout.strip() == "CompilerParams"


def test_the_message_names_where_it_was_raised():
  from pallas_prof import import_errors
  try:
    with import_errors.reported("pallas_prof.example"):
      {}["missing"]  # noqa: B018
  except import_errors.PallasProfImportError as e:
    message = str(e)
    assert isinstance(e.__cause__, KeyError)
  assert message.startswith("pallas-prof could not import pallas_prof.example: KeyError: "
                            "'missing'"), message
  assert f"{os.path.abspath(__file__)}:" in message and '{}["missing"]' in message
  assert "found: jax " in message and "Python " in message
