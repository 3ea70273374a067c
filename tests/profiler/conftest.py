"""Fixtures: the examples' kernels lowered (not run) on CPU and compiled for sm_90."""
from __future__ import annotations

import pytest

import pallas_prof
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.profiler import driver
# the helpers live in testkit (bench imports them too); named here for the tests that take
# them from this conftest
from testkit.examples import line_of, load_example, lowered_record, sds  # noqa: F401


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
