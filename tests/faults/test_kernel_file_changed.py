"""A generated kernel's file that another writer changes between pallas-prof's check of it
and the compile worker's read (the file lives in the cache folder, which other processes
share): the worker compiled whatever the file held, so a kernel other than the one lowered
could run, silently. The request now carries the source's SHA-256; the worker refuses a
file of other bytes, and the retry checks the file again, moves the damaged one aside
and compiles the kernel as lowered."""
from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend.compiling import compile_worker
from pallas_prof.backend.compiling.failures import workarounds

TARGET = ("cuda", 90)


def _double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


@pytest.fixture
def lowered(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  pallas_prof.install()
  x = jnp.ones((128,), jnp.float32)
  jax.jit(pl.pallas_call(_double, name="file_changed",
                         out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))).lower(x)
  rec = kernel_registry.find("file_changed")[-1]
  assert "* 2.0" in rec.generated.source
  pcompile.clear_memory_cache()
  return rec


def _rewrite(path: str) -> None:
  with open(path) as f:
    text = f.read()
  with open(path, "w") as f:
    f.write(text.replace("* 2.0", "* 3.0"))


@pytest.mark.fault("concurrent")
def test_the_worker_refuses_a_kernel_file_of_other_bytes(lowered):
  request = pcompile.compile_request(lowered.generated, TARGET)
  _rewrite(request["path"])
  answer = compile_worker.compile(request)
  assert answer["error"]["type"] == "KernelFileChanged", answer.get("error")
  assert request["path"] in answer["error"]["message"]
  assert "asm" not in answer                     # nothing of the other kernel compiled


@pytest.mark.fault("concurrent")
def test_a_file_changed_before_the_compile_is_compiled_as_lowered(lowered, monkeypatch):
  original = compile_worker.compile
  changed = []

  def another_writer_first(request):      # between the parent's check and the worker's read
    if request.get("op") == "compile" and not changed:
      changed.append(request["path"])
      _rewrite(request["path"])
    return original(request)

  monkeypatch.setattr(compile_worker, "compile", another_writer_first)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ck = workarounds.compile_working_around(lowered.generated, TARGET, lowered.relower)
  assert changed
  ttir = ck.asm["ttir"]
  assert "2.000000e+00" in ttir and "3.000000e+00" not in ttir, ttir   # the lowered kernel
  said = " ".join(str(w.message) for w in caught)
  assert "no longer holds the source it was lowered to" in said and changed[0] in said
  with open(changed[0]) as f:                 # the file holds the lowered source again
    assert f.read() == lowered.generated.source
  # nothing of the changed file was kept: a later compile of the kernel is the lowered one
  pcompile.clear_memory_cache()
  again = pcompile.compile_kernel(lowered.generated, TARGET)
  assert "2.000000e+00" in again.asm["ttir"] and "3.000000e+00" not in again.asm["ttir"]
