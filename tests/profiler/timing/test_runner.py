"""Replay runner: the logic that needs no GPU, and the GPU replay itself (marked gpu)."""
from __future__ import annotations

import json
import os

import jax.numpy as jnp
import numpy as np
import pytest

from pallas_prof.profiler import driver
from pallas_prof.profiler.timing import correctness, policy, runner
from pallas_prof.profiler.launchspec import LaunchSpec


def test_launch_spec_of_matmul(matmul_wgmma):
  rec, ck = matmul_wgmma
  spec = LaunchSpec.from_compiled(ck)
  assert spec.name == "matmul_kernel"
  assert [(p.role, p.index, p.dtype, p.shape) for p in spec.params] == [
      ("input", 0, "bfloat16", (128, 128)), ("input", 1, "bfloat16", (128, 128)),
      ("output", 0, "bfloat16", (128, 128))]
  assert spec.launch_grid == (2, 2, 1)
  assert spec.num_warps == 4 and spec.warp_size == 32
  assert spec.shared == ck.shared_bytes > 0
  # 3 arrays + Triton's global and profile scratch pointers
  assert spec.ptx_param_count == 5 == len(spec.params) + 2


def test_launch_spec_round_trip(tmp_path, softmax_kernel):
  _, ck = softmax_kernel
  spec = LaunchSpec.from_compiled(ck)
  spec.save(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ["kernel.cubin", "spec.json"]
  back = LaunchSpec.load(str(tmp_path))
  assert back == spec
  json.loads((tmp_path / "spec.json").read_text())


def test_plan_sets_exceeds_twice_the_l2():
  l2 = 50 * 2**20
  # small sets: enough of them to exceed 2 x L2
  n = policy.plan_sets(4096, l2, free_bytes=80 * 2**30)
  assert n * 4096 > 2 * l2
  # big sets: at least two, rotation still alternates
  assert policy.plan_sets(512 * 2**20, l2, free_bytes=80 * 2**30) == 2
  # limited memory caps the count
  assert policy.plan_sets(2**20, l2, free_bytes=10 * 2**20) == 5
  with pytest.raises(driver.ProfilerError, match="MiB of device memory are free"):
    policy.plan_sets(2**30, l2, free_bytes=2**30)


def test_launch_plan():
  assert policy.launch_plan(1e-3, 100, 0.2) == 200        # 200 ms of 1 ms launches
  assert policy.launch_plan(1e-2, 100, 0.2) == 100        # at least 100
  assert policy.launch_plan(1e-9, 100, 0.2) == policy.MAX_LAUNCHES


def test_summarize():
  times = [float(x) for x in range(1, 101)]                 # 1..100
  s = policy.summarize(times)
  assert s["median_s"] == 50.5 and s["min_s"] == 1.0
  assert s["p10_s"] == pytest.approx(10.9) and s["p90_s"] == pytest.approx(90.1)
  assert s["mean_s"] == 50.5


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "int8", "uint8",
                                   "bool"])
def test_random_values(rng, dtype):
  x = policy.random_values(rng, 10_000, jnp.dtype(dtype))
  assert x.dtype == jnp.dtype(dtype) and x.shape == (10_000,)
  assert len(np.unique(x)) > 1
  if dtype not in ("bool",):
    assert np.all(x.astype(np.float64) >= (-2 if "float" in dtype else 0))
    assert np.all(x.astype(np.float64) <= (2 if "float" in dtype else 63))


def test_unwritten_elements_needs_both_poisons():
  first = np.full(6, 0xFF, np.uint8).view(np.uint8).copy()
  a = np.frombuffer(np.full(24, 0xFF, np.uint8).tobytes(), np.float32).copy()
  b = np.frombuffer(np.full(24, 0x5A, np.uint8).tobytes(), np.float32).copy()
  a[[0, 3]] = 1.5            # written in the first launch
  b[[0, 3, 4]] = 1.5         # written in the second (element 4 happened to equal poison 1)
  assert policy.unwritten_elements(a, b) == 3                # 1, 2, 5
  assert policy.unwritten_elements(first, first) == 0        # 0xFF then 0xFF: not both poisons


def test_compare_passes_and_fails(rng):
  ref = rng.standard_normal((8, 16)).astype(np.float32)
  ok = correctness.compare([ref + 1e-7], [ref], "ref")
  assert ok.passed and ok.max_abs_error[0] <= 2e-7
  bad = ref.copy()
  bad[2, 3] += 1.0
  result = correctness.compare([bad], [ref], "ref")
  assert not result.passed and "1 of 128 elements" in result.message
  nan = ref.copy()
  nan[0, 0] = np.nan
  assert not correctness.compare([nan], [ref], "ref").passed
  assert correctness.compare([nan], [nan.copy()], "ref").passed
  ints = np.arange(5, dtype=np.int32)
  assert not correctness.compare([ints + 1], [ints], "ref").passed


def test_replay_without_gpu_says_so(softmax_kernel):
  present, reason = driver.gpu_status()
  if present:
    pytest.skip("this machine has a GPU")
  _, ck = softmax_kernel
  with pytest.raises(driver.NoGpu, match="driver|cuda-bindings"):
    runner.replay(ck)


def test_bad_device_index_is_a_clear_error(monkeypatch):
  monkeypatch.setattr(driver, "device_count", lambda: 2)
  with pytest.raises(driver.BadDevice, match="device index 5 is out of range: this process "
                     "sees 2 CUDA device\\(s\\), indices 0..1"):
    driver.check_index(5)
  with pytest.raises(driver.BadDevice, match="must be an int"):
    driver.check_index("0")
  driver.check_index(1)


def test_uuid_string():
  raw = bytes(range(16))
  assert driver.uuid_string(raw) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


# --- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
def test_replay_softmax_on_gpu(examples):
  from pallas_prof.backend.compiling.compile import compile_kernel
  from ..conftest import lowered_record, sds
  rec = lowered_record(examples["softmax"].softmax, sds((512, 1024), "float32"))
  info = driver.device_info(0)
  ck = compile_kernel(rec.generated, ("cuda", info.compute_capability))
  stats = runner.replay(ck, device=0, reference="interpreter", min_launches=100, min_seconds=0.05)
  assert stats.outputs_written and stats.unwritten_elements == [0]
  assert stats.correctness.passed, stats.correctness.message
  assert stats.launches >= 100 and stats.input_sets * stats.set_bytes > 2 * stats.l2_bytes
  assert 0 < stats.min_s <= stats.p10_s <= stats.median_s <= stats.p90_s
  # both modes: cold (flushed L2) is the headline, sustained beside it
  assert stats.mode == "cold" and stats.cold.launches >= 100 and stats.sustained.launches >= 100
  assert stats.l2_flush_bytes >= 2 * stats.l2_bytes and stats.throttle is not None


@pytest.mark.gpu
def test_bad_device_index_on_gpu():
  n = driver.device_count()
  with pytest.raises(driver.BadDevice, match=f"device index {n} is out of range"):
    driver.device_info(n)


# --- the whole replay flow on a host-memory stand-in for the driver ----------------------------



def test_replay_flow_on_the_stand_in(fake_driver, softmax_kernel):
  # the "kernel" is the generated code under the interpreter, on the memory the runner set up
  rec, ck = softmax_kernel
  fake = fake_driver(ck.generated, event_ms=2.0, l2_bytes=1 << 20)
  stats = runner.replay(ck, device=0, reference="interpreter", min_launches=30, min_seconds=0.0)
  spec = LaunchSpec.from_compiled(ck)
  # parameters: x, o, then two null scratch pointers; grid and block as compiled
  grid, block, shared, args = fake.launches[0]
  assert grid == (4, 1, 1) and block == (128, 1, 1) and shared == spec.shared
  assert args[2:] == [0, 0] and args[0] % 256 == 0 and args[1] % 256 == 0
  # sets rotate: enough sets that they exceed 2 x L2, each launch on the next set
  set_bytes = 2 * 4 * 128 * 4
  assert stats.set_bytes == set_bytes and stats.input_sets * set_bytes > 2 * (1 << 20)
  inputs_used = [launch[3][0] for launch in fake.launches[2:]]
  assert len(fake.launches) - 2 < stats.input_sets          # fewer launches than sets here:
  assert len(set(inputs_used)) == len(inputs_used)           # no launch reused an input
  # the poison check found every element written; the interpreter check ran on set 0
  assert stats.outputs_written and stats.unwritten_elements == [0]
  assert stats.correctness.passed and stats.correctness.reference == "CPU interpreter"
  # timing: the scripted 2 ms per launch, at least min_launches of them
  assert stats.launches == 30 and stats.median_s == pytest.approx(2e-3)
  assert stats.warmup_launches >= 5
  # everything was released, contexts popped
  assert fake.allocations == {} and fake.context_stack == []


def test_unwritten_outputs_are_reported(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake_driver(ck.generated, write_fraction=0.75)
  stats = runner.replay(ck, min_launches=5, min_seconds=0.0)
  assert not stats.outputs_written
  assert stats.unwritten_elements == [4 * 128 // 4]
  assert any("128 elements never written" in n for n in stats.notes)


def test_min_seconds_extends_the_timed_launches(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake_driver(ck.generated, event_ms=1.0)
  spec = LaunchSpec.from_compiled(ck)
  with runner.Replayer(spec, 0, seed=1) as r:
    r.prepare(n_sets=3)
    timing = r.time_launches(min_launches=10, min_seconds=0.025, warmup_seconds=0.005)
  assert len(timing["times_s"]) == 25
  assert timing["warmup_launches"] >= 5


def test_replay_with_a_reference_function_that_disagrees(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake_driver(ck.generated)
  stats = runner.replay(ck, min_launches=5, min_seconds=0.0,
                        reference=lambda x: np.zeros_like(x))
  assert not stats.correctness.passed and "elements beyond" in stats.correctness.message


def test_a_bad_index_on_the_stand_in(fake_driver, softmax_kernel):
  _, ck = softmax_kernel
  fake_driver(ck.generated, devices=2)
  with pytest.raises(driver.BadDevice, match="device index 2 is out of range"):
    runner.replay(ck, device=2)


def test_profile_gpu_path_on_the_stand_in(fake_driver, matmul_mma):
  # profile() as on a GPU: device info, replay, rates against given ceilings, verdict
  import pallas_prof
  from pallas_prof.profiler.schema import Ceilings
  rec, ck = matmul_mma
  fake_driver(ck.generated, event_ms=0.004)
  ceil = Ceilings(device_name="Stand-in GPU", device_uuid="GPU-x", copy_bytes_per_s=4e12,
                  copy_method="given", matrix_flops_per_s={"bf16": 8e14}, matrix_method="given",
                  measured_at=0.0, details={}, notes=[])
  report = pallas_prof.profile([rec], device=0, nvml=False, ceilings=ceil,
                               reference="interpreter", min_launches=20, min_seconds=0.0,
                               sample=False)
  assert report.gpu_present and report.device.name == "Stand-in GPU"
  assert report.device.uuid == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
  assert report.device.compute_capability == 90
  k = report.kernels[0]
  assert k.errors == [] and k.runtime.launches == 20
  assert k.runtime.correctness.passed
  # both modes timed; cold is the headline the rates use, the verdict names the loop time
  assert k.runtime.mode == "cold" and k.runtime.sustained.launches >= 20
  assert "back-to-back in a loop: 4.0 us per launch (+0.0% against cold)" in str(k.verdict)
  # 64^3 bf16: 3 * 64*64*2 bytes in the scripted 4 us
  assert k.rates.bytes_per_s == pytest.approx(3 * 64 * 64 * 2 / 4e-6)
  assert k.rates.flops_per_s == pytest.approx(k.work.flops / 4e-6)
  assert k.verdict.findings[0] == k.rates.verdict and str(k.verdict).startswith(k.rates.verdict)
  assert k.weight_basis == "static"
  assert k.attribution.description == "static SASS instructions times loop trips: PC sampling is off"
  json.loads(report.to_json())


def test_failed_sampling_falls_back_to_static_weights_and_says_why(fake_driver, matmul_mma,
                                                                   monkeypatch):
  # the stand-in driver lives in this process only: the sampling child finds no GPU (none
  # visible to it, on a GPU machine too)
  monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
  import pallas_prof
  rec, ck = matmul_mma
  fake_driver(ck.generated, event_ms=0.004)
  report = pallas_prof.profile([rec], device=0, nvml=False, ceilings=False, min_launches=5,
                               min_seconds=0.0)
  k = report.kernels[0]
  assert k.runtime is not None and k.weight_basis == "static"
  assert k.attribution.description.startswith("static SASS instructions times loop trips: PC sampling "
                                               "failed: ProfilerError: the PC-sampling child")
  assert any(e.startswith("pc sampling: ") for e in k.errors)


def test_memcpy_ceiling_arithmetic_on_the_stand_in(fake_driver):
  from pallas_prof.profiler.timing import ceilings
  fake = fake_driver(None, event_ms=0.25)
  rate = ceilings.measure_memcpy(0, nbytes=2**20, reps=4)
  assert rate == pytest.approx(2 * 2**20 / 0.25e-3)        # read + write per scripted time
  assert [x for x in fake.launches if x[0] == "memcpy"] == [("memcpy", 2**20)] * 7
  assert fake.allocations == {}


def test_the_profile_span_carries_the_kernels_whole_verdict(fake_driver, matmul_mma):
  """A regression found on the H200: the roofline's own `verdict` overwrote the kernel's in
  the `profile <kernel>` span, so the span lost the loop time and the heaviest equations."""
  import pallas_prof
  from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
  from pallas_prof.instrument import conventions as cv
  from pallas_prof.profiler.schema import Ceilings
  rec, ck = matmul_mma
  fake_driver(ck.generated, event_ms=0.004)
  ceil = Ceilings(device_name="Stand-in GPU", device_uuid="GPU-x", copy_bytes_per_s=4e12,
                  copy_method="given", matrix_flops_per_s={"bf16": 8e14}, matrix_method="given",
                  measured_at=0.0, details={}, notes=[])
  exporter = InMemorySpanExporter()
  with pallas_prof.tracing(exporter):
    report = pallas_prof.profile([rec], device=0, nvml=False, ceilings=ceil, min_launches=20,
                                 min_seconds=0.0, sample=False)
  (k,) = report.kernels
  (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("profile ")]
  assert "back-to-back in a loop" in str(k.verdict) and str(k.verdict) != k.rates.verdict
  assert span.attributes[cv.PROFILE_VERDICT] == str(k.verdict)
