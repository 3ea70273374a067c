"""What differs between Triton releases (3.6 to 3.9), checked against the installed one.

Runs on both test legs (Triton 3.6 and 3.9): every function of triton_compat
is compared with what the installed Triton itself does, so a release that
changes again shows up here first.
"""
from __future__ import annotations

import re

import jax.numpy as jnp
import pytest

from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend.compiling import compile_cache, triton_compat
from pallas_prof.backend import kernel_registry
from testkit.helpers import elementwise_call


def test_the_stage_hook_answers_both_protocols():
  seen = []
  hook = triton_compat.stages_hook(lambda *a: seen.append(a))
  key, digest = hook()                      # Triton 3.9 asks for its cache key first
  assert isinstance(key, str) and key and re.fullmatch(r"[0-9a-f]{64}", digest)
  assert hook() == (key, digest)            # a constant: the hook changes no output
  hook("backend", {"ttir": None}, "options", "language", 90)
  assert seen == [("backend", {"ttir": None}, "options", "language", 90)]


@pytest.mark.parametrize("cuda, isa", [("11.8", 78), ("12.0", 80), ("12.4", 84), ("12.6", 85),
                                       ("12.8", 87), ("12.9", 88), ("13.0", 90), ("13.4", 94)])
def test_ptx_isa_of_a_cuda_release_is_tritons(cuda, isa):
  from triton.backends.nvidia.compiler import ptx_get_version
  assert triton_compat.ptx_isa_for_cuda(cuda) == isa == ptx_get_version(cuda)


@pytest.mark.parametrize("driver, default, cap", [
    (13000, 94, 90),      # Triton 3.9 (ptxas 13.4) on the H200's 13.0 driver
    (13020, 94, 92),
    (13040, 94, None),    # the driver takes what Triton writes
    (12080, 87, None),    # Triton 3.6 (ptxas 12.8) on a 12.8 driver
    (13000, 87, None),    # ... or on a newer one
    (12040, 87, 84),      # an old driver under Triton 3.6
])
def test_the_ptx_cap_for_a_driver(driver, default, cap):
  assert triton_compat.ptx_isa_cap(driver, default) == cap


def test_the_driver_version_can_be_stood_in(monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CUDA_DRIVER_VERSION", "13000")
  assert triton_compat.cuda_driver_version() == 13000
  monkeypatch.setenv("PALLAS_PROF_CUDA_DRIVER_VERSION", "0")
  assert triton_compat.cuda_driver_version() is None


def test_cuda_release_of_ptxas_version_text():
  assert triton_compat.cuda_release_of("Build cuda_13.4.r13.4/compiler.38657139_0") == "13.4"
  assert triton_compat.cuda_release_of("Cuda compilation tools, release 12.8, V12.8.93") == "12.8"
  assert triton_compat.cuda_release_of("unknown") is None


def test_ptxas_is_the_one_triton_runs_for_the_target():
  from triton.backends.nvidia.compiler import get_ptxas
  for arch in (80, 90, 100):
    assert triton_compat.ptxas_path(arch) == get_ptxas(arch).path
  # the compile cache keys on that binary's release
  assert triton_compat.cuda_release_of(compile_cache._ptxas_version(90)) == get_ptxas(90).version


def _kernel():
  kernel_registry.clear()
  x = jnp.arange(300, dtype=jnp.float32)
  elementwise_call(lambda a: a * 2.0 + 1.0, x)
  return kernel_registry.kernels()[-1].generated


def test_without_a_driver_triton_writes_its_own_ptx_version(monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CUDA_DRIVER_VERSION", "0")
  gk = _kernel()
  assert "ptx_version" not in compile_cache.compile_options(gk, ("cuda", 90))
  ck = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False)
  assert triton_compat.ptx_isa_of(ck.ptx) == triton_compat.default_ptx_isa(90)
  assert ck.cubin[:4] == b"\x7fELF"      # assembled by the matching ptxas


@pytest.mark.parametrize("driver", [12040, 13000])
def test_a_driver_older_than_tritons_ptx_caps_it(monkeypatch, driver):
  """The PTX handed to jaxlib declares no newer ISA than the driver loads, and
  Triton's ptxas still assembles it."""
  monkeypatch.setenv("PALLAS_PROF_CUDA_DRIVER_VERSION", str(driver))
  driver_isa = triton_compat.ptx_isa_for_cuda(triton_compat.cuda_version_of_driver(driver))
  default = triton_compat.default_ptx_isa(90)
  gk = _kernel()
  options = compile_cache.compile_options(gk, ("cuda", 90))
  expected = driver_isa if driver_isa < default else None
  assert options.get("ptx_version") == expected
  ck = pcompile.compile_kernel(gk, ("cuda", 90), use_disk_cache=False)
  assert triton_compat.ptx_isa_of(ck.ptx) == min(driver_isa, default)
  assert ck.cubin[:4] == b"\x7fELF"
  # a different cap is a different compile
  monkeypatch.setenv("PALLAS_PROF_CUDA_DRIVER_VERSION", "0")
  if expected is not None:
    assert compile_cache.compile_key(gk, ("cuda", 90)) != ck.key


@pytest.mark.parametrize("name", ["nvdisasm", "cuobjdump"])
def test_the_tools_are_found_where_triton_finds_them(name, tmp_path, monkeypatch):
  """tool_path looks without importing Triton (pallas-prof show needs nvdisasm alone): the
  wheel's own binary, or the one TRITON_<NAME>_PATH names, as Triton's lookup gives."""
  import shutil
  import triton
  monkeypatch.delenv(f"TRITON_{name.upper()}_PATH", raising=False)
  assert triton_compat.tool_path(name) == getattr(triton.knobs.nvidia, name).path
  own = tmp_path / name
  shutil.copy2(triton_compat.tool_path(name), own)
  monkeypatch.setenv(f"TRITON_{name.upper()}_PATH", str(own))
  assert triton_compat.tool_path(name) == getattr(triton.knobs.nvidia, name).path == str(own)
