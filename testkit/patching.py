"""A diff advise writes, applied the way its user applies it (`patch`), to a copy of a file,
which is then imported under a name of its own (tests of advice/split and advice/loop_steps)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys


def load(path, name: str):
  """The file imported as module `name`, registered in sys.modules as an import registers
  it (a dataclass's fields look their module up there: JAX's attention's BlockSizes)."""
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  spec.loader.exec_module(module)
  return module


def patched(path, diff: str, original=None):
  """`diff` applied with patch to `path` (a copy of `original` first, where given), then
  imported under a name of its own."""
  if original is not None:
    shutil.copy(original, path)
  done = subprocess.run(["patch", str(path)], input=diff, text=True, capture_output=True)
  assert done.returncode == 0, done.stdout + done.stderr
  return load(path, f"{path.stem}_patched")
