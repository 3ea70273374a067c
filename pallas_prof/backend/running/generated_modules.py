"""Importing a generated kernel's file, compiled or for Triton's interpreter.

Triton reads a kernel's source back from its file (inspect), so generated
kernels are real modules, imported once per (file, mode). With interpret=True
the file's @triton.jit functions become interpreter functions and its
`libdevice` the numpy stand-in (interpreter_libdevice.py).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
from typing import Any

from .. import compat
from ..artifacts import GeneratedKernel
from ..kernel_files import checked_source
from ..compiling.triton_run import triton_lock

_modules: dict[tuple[str, bool], Any] = {}


@contextlib.contextmanager
def _interpret_knob(enabled: bool):
  previous = compat.set_triton_interpret(enabled)
  try:
    yield
  finally:
    compat.set_triton_interpret(previous)


def load_module(gk: GeneratedKernel, *, interpret: bool):
  """Imports the generated file, once per (file, mode); with interpret=True its
  @triton.jit functions become Triton interpreter functions (and libdevice a numpy
  stand-in).

  The file is checked against gk.source first (a damaged one is written again:
  kernel_files.checked_source), and the module runs from that checked source, not
  from whatever the file, or a bytecode file beside it, holds by then."""
  cache_key = (gk.path, interpret)
  with triton_lock():
    module = _modules.get(cache_key)
    if module is not None:
      return module
    path = checked_source(gk.path, gk.source)
    name = f"pallas_prof_generated.{'interp' if interpret else 'jit'}.{os.path.basename(path)[:-3]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    with _interpret_knob(interpret):
      exec(compile(gk.source, path, "exec"), module.__dict__)   # noqa: S102 - checked source
    if interpret:
      # lazy: at the top it would load triton whenever this module is imported
      from . import interpreter_libdevice
      module.libdevice = interpreter_libdevice
    _modules[cache_key] = module
    return module
