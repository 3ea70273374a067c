"""A pytest plugin that saves every kernel pallas-prof lowered in the session, for the target
matrix to compile for other GPUs later (`matrix.py --saved DIR`, issue 40: JAX's conformance
kernels, lowered on a GPU machine, compiled here for every target).

    PALLAS_PROF_DUMP_KERNELS=DIR pytest -p bench.targets.dump_kernels tests/pallas/...

After each test, the kernels it lowered (pallas_prof.backend.kernel_registry) are kept with
the test's node id; at the session's end each goes to DIR/<n>.json: the test and the files
GeneratedKernel.save writes (kernel.json's values and source.py's text), read back through
the same decoder a run directory's kernels go through (cli/saved_runs/kernel.py), so a
damaged or foreign file is refused with the field named. Without the variable the plugin
does nothing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import pytest

ENV = "PALLAS_PROF_DUMP_KERNELS"
SCHEMA = "pallas-prof/dumped-kernel/1"

_kept: dict[str, tuple[str | None, object]] = {}     # kernel key -> (test, GeneratedKernel)


def _keep(test: str | None) -> None:
  try:
    from pallas_prof.backend import kernel_registry
  except ImportError:
    return
  for record in kernel_registry.kernels():
    _kept.setdefault(record.generated.key, (test, record.generated))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  # kernels already there came from collection or an earlier test, which took them
  _keep(None)
  yield
  _keep(item.nodeid)


def pytest_sessionfinish(session, exitstatus):
  folder = os.environ.get(ENV)
  if not folder:
    return
  _keep(None)
  # each xdist worker numbers its own folder (its config says it is one: a pytest started
  # from inside a worker inherits the worker's environment, not its workerinput)
  worker = getattr(session.config, "workerinput", {}).get("workerid")
  written = write_kernels(os.path.join(folder, worker) if worker else folder, _kept.values())
  reporter = session.config.pluginmanager.get_plugin("terminalreporter")
  if reporter is not None:
    reporter.write_line(f"pallas-prof: {written} kernels saved in {folder} ({ENV})")


def write_kernels(folder: str, kernels) -> int:
  """Writes (test, GeneratedKernel) pairs as <n>.json under `folder`, numbered after what
  is there already (a second session adds to the folder); returns how many."""
  from pallas_prof.safe_files import write_atomic
  os.makedirs(folder, exist_ok=True)
  taken = [int(f[:-5]) for f in os.listdir(folder) if f.endswith(".json") and f[:-5].isdigit()]
  n = max(taken, default=-1) + 1
  count = 0
  for test, gk in kernels:
    files: dict[str, str] = {}
    gk.save(folder, write=lambda path, data: files.__setitem__(os.path.basename(path), data))
    record = {"schema": SCHEMA, "test": test, "kernel": json.loads(files["kernel.json"]),
              "source": files["source.py"]}
    write_atomic(os.path.join(folder, f"{n + count}.json"), json.dumps(record), mode=0o644)
    count += 1
  return count


def read_kernel(path: str):
  """(the test's node id or None, the GeneratedKernel) of one saved <n>.json; ValueError
  naming the file and what is wrong with it for anything else."""
  from pallas_prof.cli.saved_runs import kernel as saved_kernel
  with open(path, encoding="utf-8") as f:
    try:
      record = json.load(f)
    except ValueError as e:
      raise ValueError(f"{path} is not JSON ({e}): not a kernel dump_kernels.py wrote") from None
  if not isinstance(record, dict) or record.get("schema") != SCHEMA:
    found = record.get("schema") if isinstance(record, dict) else type(record).__name__
    raise ValueError(f"{path} has schema {found!r}; this reads {SCHEMA!r} (write it again "
                     f"with {ENV}=DIR pytest -p bench.targets.dump_kernels)")
  if not isinstance(record.get("source"), str):
    raise ValueError(f"{path}: 'source' is not the kernel's source text")
  test = record.get("test")
  gk = saved_kernel.generated(record.get("kernel"), record["source"], f"{path}:kernel")
  if hashlib.sha256(gk.source.encode()).hexdigest() != gk.key:
    raise ValueError(f"{path}: the kernel's source does not hash to its key {gk.key[:16]}...: "
                     "the file was changed after it was written; write it again")
  if not gk.name.isidentifier():
    raise ValueError(f"{path}: kernel name {gk.name!r} is not a Python identifier, as every "
                     "kernel pallas-prof lowers is named")
  # the compile reads the kernel from a file of its own here (the saved path was the
  # other machine's), written where pallas-prof keeps its kernels, named by its content
  from pallas_prof.backend import kernel_files
  here = kernel_files.write_source(gk.name, gk.key, gk.source)
  return (test if isinstance(test, str) else None), dataclasses.replace(gk, path=here)
