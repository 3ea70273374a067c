"""In-situ parsing and matching, CUPTI-holder detection, ncu CSV parsing, the ceiling
cache. The GPU parts themselves run in bench/profiler/profiler_gpu_check.py."""
from __future__ import annotations

import json
import types

import pytest

from pallas_prof.profiler.sampling import ncu
from pallas_prof.profiler.static import correlate
from pallas_prof.profiler.timing import ceilings, insitu
from pallas_prof.profiler.schema import Ceilings, DeviceInfo

# Proton's tree format ([tree, device info]), as its own tests write it
PROTON_TREE = [
    {"frame": {"name": "ROOT", "type": "function"}, "metrics": {"count": 0, "time (ns)": 0},
     "children": [
         {"frame": {"name": "softmax_kernel", "type": "function"}, "children": [],
          "metrics": {"count": 3, "device_id": "0", "device_type": "CUDA", "time (ns)": 300_000}},
         {"frame": {"name": "step", "type": "function"}, "metrics": {}, "children": [
             {"frame": {"name": "softmax_kernel", "type": "function"}, "children": [],
              "metrics": {"count": 2, "device_id": "1", "device_type": "CUDA",
                          "time (ns)": 250_000}},
             {"frame": {"name": "matmul_kernel", "type": "function"}, "children": [],
              "metrics": {"count": 4, "device_id": "0", "device_type": "CUDA",
                          "time (ns)": 4_000_000}}]}]},
    {"CUDA": {"0": {"arch": "90", "num_sms": 132}}},
]


def test_parse_proton_tree_sums_scopes():
  kernels, devices = insitu.parse_hatchet(PROTON_TREE)
  assert set(kernels) == {"softmax_kernel", "matmul_kernel"}
  s = kernels["softmax_kernel"]
  assert (s.launches, s.total_ns, sorted(s.device_ids)) == (5, 550_000, [0, 1])
  assert s.mean_s == pytest.approx(110e-6)
  assert devices["CUDA"]["0"]["num_sms"] == 132


def test_match_by_name_flags_shared_names():
  kernels, devices = insitu.parse_hatchet(PROTON_TREE)
  result = insitu.InsituResult(kernels, devices, None, [])
  recs = [types.SimpleNamespace(name="softmax_kernel", label="softmax_kernel#aaaaaa"),
          types.SimpleNamespace(name="softmax_kernel", label="softmax_kernel#bbbbbb"),
          types.SimpleNamespace(name="matmul_kernel", label="matmul_kernel#cccccc"),
          types.SimpleNamespace(name="never_ran", label="never_ran#dddddd")]
  m = insitu.match(result, recs)
  assert set(m) == {"softmax_kernel#aaaaaa", "softmax_kernel#bbbbbb", "matmul_kernel#cccccc"}
  assert m["softmax_kernel#aaaaaa"].shared_name_with == ["softmax_kernel#bbbbbb"]
  assert m["matmul_kernel#cccccc"].launches == 4 and m["matmul_kernel#cccccc"].shared_name_with == []
  assert m["matmul_kernel#cccccc"].total_s == pytest.approx(4e-3)


def _chrome_doc(events) -> str:
  """One of Proton's per-device Chrome-trace documents, as triton 3.6 wrote them on two
  H200s (bench/probes/proton_trace_probe.py): no device named, times in microseconds."""
  return json.dumps({"displayTimeUnit": "us", "traceEvents": [
      {"args": {"call_stack": ["ROOT", name]}, "cat": "kernel", "dur": dur, "name": name,
       "ph": "X", "tid": 24, "ts": 10.0 * i} for i, (name, dur) in enumerate(events)]})


MARK = "pallas_prof_device_marker"


def test_chrome_traces_are_attributed_to_devices_by_their_marks():
  # GPU 1's document first, to show the order of documents decides nothing
  text = "\n".join([
      _chrome_doc([(MARK, 1.0), (MARK, 1.0), ("rms_kernel", 34.0), ("rms_kernel", 36.0),
                   ("rms_kernel", 35.0)]),
      _chrome_doc([(MARK, 1.0), ("rms_kernel", 33.0), ("other", 5.0)]),
  ])
  kernels, notes = insitu.parse_chrome_traces(text, device_count=2)
  assert notes == [] and set(kernels) == {"rms_kernel", "other"}
  rms = kernels["rms_kernel"]
  assert rms.launches == 4 and rms.launches_by_device == {1: 3, 0: 1}
  assert rms.ns_by_device[1] == pytest.approx(105_000) and sorted(rms.device_ids) == [0, 1]
  result = insitu.InsituResult(kernels, {}, None, [])
  rec = [types.SimpleNamespace(name="rms_kernel", label="rms_kernel#1")]
  on0 = insitu.match(result, rec, device=0)["rms_kernel#1"]
  on1 = insitu.match(result, rec, device=1)["rms_kernel#1"]
  assert (on0.launches, on0.device_ids, on1.launches, on1.device_ids) == (1, [0], 3, [1])
  assert on1.mean_s == pytest.approx(35e-6)
  assert insitu.match(result, rec)["rms_kernel#1"].launches == 4       # no device: all of them
  assert on1.launches_by_device == {1: 3, 0: 1}


def test_a_kernel_absent_from_a_device_has_no_launches_there():
  text = _chrome_doc([(MARK, 1.0)]) + _chrome_doc([(MARK, 1.0), (MARK, 1.0), ("k", 3.0)])
  kernels, _ = insitu.parse_chrome_traces(text, device_count=2)
  result = insitu.InsituResult(kernels, {}, None, [])
  rec = [types.SimpleNamespace(name="k", label="k#1")]
  assert insitu.match(result, rec, device=0)["k#1"].launches == 0
  assert insitu.match(result, rec, device=1)["k#1"].launches == 1


def test_an_unmarked_document_is_counted_on_no_device_and_says_so():
  text = _chrome_doc([("k", 3.0), ("k", 4.0)])
  kernels, notes = insitu.parse_chrome_traces(text, device_count=2)
  assert kernels["k"].launches == 2 and kernels["k"].launches_by_device == {}
  assert "on no particular GPU" in notes[0]


def test_device_marks_count_one_more_than_the_index():
  from pallas_prof.profiler.timing import devicemarks
  assert [devicemarks.marks_for(d) for d in range(3)] == [1, 2, 3]
  assert devicemarks.device_of_document(2, 2) == 1
  assert devicemarks.device_of_document(0, 2) is None and devicemarks.device_of_document(3, 2) is None


def test_capture_on_two_gpus_reads_a_marked_trace(monkeypatch):
  """Two GPUs: Proton in trace mode, XLA's streams marked before finalize, launches
  attributed per GPU. (Proton and the marks need GPUs: stand-ins write what they do.)"""
  import sys
  from pallas_prof.profiler.timing import devicemarks
  state = {"order": []}

  def start(name, *, backend, context, data):
    state["name"], state["data"] = name, data
    return 3

  def mark():
    state["order"].append("mark")
    return ""

  def finalize(session, output_format):
    state["order"].append(("finalize", output_format))
    with open(state["name"] + ".chrome_trace", "w") as f:
      f.write(_chrome_doc([(MARK, 1.0), ("k", 3.0)]) + "\n"
              + _chrome_doc([(MARK, 1.0), (MARK, 1.0), ("k", 5.0), ("k", 5.0)]) + "\n")

  fake = types.ModuleType("triton.profiler")
  fake.start, fake.finalize = start, finalize
  monkeypatch.setitem(sys.modules, "triton.profiler", fake)
  monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
  monkeypatch.setattr(devicemarks, "mark_jax_devices", mark)
  with insitu.capture(devices=2, source="proton") as cap:
    pass
  assert state["data"] == "trace" and state["order"] == ["mark", ("finalize", "chrome_trace")]
  assert cap.result.kernels["k"].launches_by_device == {0: 1, 1: 2}
  assert cap.result.notes == []


def test_marks_that_cannot_be_made_are_a_note(monkeypatch):
  import sys
  from pallas_prof.profiler.timing import devicemarks
  state = {}

  def start(name, *, backend, context, data):
    state["name"] = name
    return 3

  def finalize(session, output_format):
    with open(state["name"] + ".chrome_trace", "w") as f:
      f.write(_chrome_doc([("k", 3.0)]))

  fake = types.ModuleType("triton.profiler")
  fake.start, fake.finalize = start, finalize
  monkeypatch.setitem(sys.modules, "triton.profiler", fake)
  monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
  monkeypatch.setattr(devicemarks, "mark_jax_devices", lambda: "JAX has no GPU")
  with insitu.capture(devices=2, source="proton") as cap:
    pass
  assert cap.result.kernels["k"].launches == 1
  assert "could not mark XLA's streams (JAX has no GPU)" in cap.result.notes[0]


def test_device_marks_run_on_gpus_or_say_why_not():
  from pallas_prof.backend import kernel_registry
  from pallas_prof.profiler.timing import devicemarks
  import jax
  has_gpu = any(d.platform == "gpu" for d in jax.devices())
  assert devicemarks.mark_jax_devices() == ("" if has_gpu else "JAX has no GPU")
  assert not kernel_registry.find(devicemarks.NAME)          # the marker is not a user kernel


@pytest.mark.parametrize("environ, expected", [
    ({}, []),
    ({"CUDA_INJECTION64_PATH": "/opt/nvidia/nsight-compute/2025.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so"}, ["Nsight Compute"]),
    ({"CUDA_INJECTION64_PATH": "/opt/nvidia/nsight-systems/2024.6/target-linux-x64/libToolsInjection64.so"}, ["Nsight Systems"]),
    ({"CUDA_INJECTION64_PATH": "/x/libmytool.so"}, ["a CUDA injection library"]),
    ({"NSYS_PROFILING_SESSION_ID": "7"}, ["Nsight Systems (nsys) session 7"]),
])
def test_cupti_holders_from_the_environment(environ, expected):
  holders = insitu.cupti_holders(environ)
  assert len(holders) == len(expected)
  for h, e in zip(holders, expected):
    assert h.startswith(e)


def test_capture_refuses_plainly_when_cupti_is_held(monkeypatch):
  monkeypatch.setenv("NSYS_PROFILING_SESSION_ID", "3")
  with pytest.raises(insitu.CuptiBusy, match="one subscriber per process.*Nsight Systems"):
    with insitu.capture():
      pass


def test_capture_sees_a_running_jax_trace(tmp_path):
  """A real jax.profiler trace (its state's field is named differently in jax
  0.12 than in 0.10/0.11: a guard reading the old name was silently off)."""
  import jax
  assert not any(h.startswith("a jax.profiler trace") for h in insitu.cupti_holders({}))
  jax.profiler.start_trace(str(tmp_path))
  try:
    assert insitu.cupti_holders({})[0].startswith("a jax.profiler trace is running")
  finally:
    jax.profiler.stop_trace()
  assert not any(h.startswith("a jax.profiler trace") for h in insitu.cupti_holders({}))


def test_a_jax_whose_profiler_state_is_unknown_is_said_not_ignored(monkeypatch):
  from jax._src import profiler as jax_profiler
  from pallas_prof.backend import compat

  class Unknown:
    pass
  monkeypatch.setattr(jax_profiler, "_profile_state", Unknown())
  monkeypatch.setattr(compat.runtime, "_warned", set())
  with pytest.warns(RuntimeWarning, match="cannot tell whether jax.profiler is tracing"):
    assert compat.jax_profiler_session_active() is False


# --- ncu output ----------------------------------------------------------------------------------

NCU_TIMING = '''==PROF== Connected to process 1234 (/usr/bin/python3.12)
==PROF== Profiling "softmax_kernel" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1234","python3.12","127.0.0.1","softmax_kernel","1","13","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","136,288"
"1","1234","python3.12","127.0.0.1","softmax_kernel","1","13","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","137.5"
==PROF== Disconnected from process 1234
'''


def test_parse_ncu_timing_csv():
  assert ncu.parse_timing_csv(NCU_TIMING) == pytest.approx([136.288e-6, 137.5e-6])
  assert ncu.parse_timing_csv("no csv here") == []


def test_ncu_commands_keep_clocks_and_name_the_kernel():
  cmd = ncu.timing_command("/usr/bin/ncu", "softmax_kernel", "/tmp/spec", 1, 5, 2)
  assert cmd[:3] == ["/usr/bin/ncu", "--clock-control", "none"]
  assert cmd[cmd.index("--kernel-name") + 1] == "softmax_kernel"
  assert cmd[cmd.index("--launch-skip") + 1] == "2" and cmd[cmd.index("--launch-count") + 1] == "5"
  assert cmd[-8:] == ["pallas_prof.profiler.timing.runner", "/tmp/spec", "--launches", "5",
                      "--warmup", "2", "--device", "1"]


def test_source_counters_align_with_our_sass(softmax_kernel):
  # a Source-page CSV built from the kernel's own disassembly, with made-up sample counts:
  # this checks the alignment and the per-equation sums, not ncu
  _, ck = softmax_kernel
  sass = correlate.correlate(ck).sass
  base = 0x7F0000001000
  lines = ['"# Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed"']
  for k, ins in enumerate(sass):
    lines.append(f'"0x{base + ins.address:x}","{ins.text}","{k % 3}","{10 * (k + 1)}"')
  rows, metrics = ncu.parse_source_csv("\n".join(lines))
  assert len(rows) == len(sass)
  assert metrics == ["Warp Stall Sampling (All Samples)", "Instructions Executed"]
  counters, how = ncu.per_equation(rows, sass, metrics)
  assert how == "address offset"
  expected = {}
  for k, ins in enumerate(sass):
    key = "unattributed" if ins.eqn is None else str(ins.eqn)
    expected[key] = expected.get(key, 0) + 10 * (k + 1)
  assert {k: v["Instructions Executed"] for k, v in counters.items()} == expected
  # a listing of another kernel does not line up
  shuffled = list(reversed(rows))
  for r, ins in zip(shuffled, sass):
    r["address"] = base + ins.address
  assert ncu.align_to_sass(shuffled, sass)[0] == {}


# --- the ceiling cache ----------------------------------------------------------------------------

def _device(uuid="GPU-12345678-0000-0000-0000-000000000000"):
  return DeviceInfo(index=0, name="NVIDIA H200", uuid=uuid, pci_bus_id="0000:3B:00.0",
                    compute_capability=90, sm_count=132, l2_bytes=50 * 2**20,
                    memory_bytes=141 * 2**30, driver_version=13000)


def test_ceilings_measured_once_then_cached(tmp_path, monkeypatch):
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path))
  calls = []

  def measure(device):
    calls.append(device.uuid)
    return Ceilings(device_name=device.name, device_uuid=device.uuid, copy_bytes_per_s=1.0,
                    copy_method="stand-in", matrix_flops_per_s={"bf16": 2.0},
                    matrix_method="stand-in", measured_at=0.0, details={}, notes=[])

  dev = _device()
  first = ceilings.get(dev, measure=measure)
  second = ceilings.get(dev, measure=measure)
  assert calls == [dev.uuid] and first == second
  path = ceilings.cache_path(dev)
  assert path.startswith(str(tmp_path)) and dev.uuid in path
  assert json.load(open(path))["device_uuid"] == dev.uuid
  ceilings.get(dev, measure=measure, refresh=True)
  other = _device("GPU-87654321-0000-0000-0000-000000000000")
  ceilings.get(other, measure=measure)
  assert calls == [dev.uuid, dev.uuid, other.uuid]


def test_copy_kernel_compiles_for_sm90():
  spec = ceilings.copy_kernel_spec(90, nbytes=2**20)
  assert spec.name == "pallas_prof_copy" and spec.launch_grid == (2**20 // 4 // 4096, 1, 1)
  assert spec.ptx_param_count == 4                    # src, dst + two scratch pointers
  assert spec.params[0].shape == spec.params[1].shape == (2**18,)


def test_capture_reads_protons_output(monkeypatch):
  # Proton itself needs a GPU; a stand-in writes what Proton writes at finalize
  import sys
  state = {}

  def start(name, *, backend, context, data):
    state["name"], state["backend"] = name, backend
    return 7

  def finalize(session, output_format):
    assert session == 7 and output_format == "hatchet"
    with open(state["name"] + ".hatchet", "w") as f:
      json.dump(PROTON_TREE, f)

  fake = types.ModuleType("triton.profiler")
  fake.start, fake.finalize = start, finalize
  monkeypatch.setitem(sys.modules, "triton.profiler", fake)
  monkeypatch.setattr(insitu, "cupti_holders", lambda: [])
  with insitu.capture(devices=1, source="proton") as cap:
    pass
  assert state["backend"] == "cupti"
  assert cap.result.kernels["matmul_kernel"].launches == 4
  assert cap.result.notes == [] and cap.result.path is None


def _timed(label, in_avals, program_s, replay_s, mode="cold"):
  from pallas_prof.profiler import api
  from pallas_prof.backend.equation_text import Aval
  target = types.SimpleNamespace(label=label, in_avals=tuple(map(Aval.parse, in_avals)))
  profile = types.SimpleNamespace(
      label=label, runtime=types.SimpleNamespace(median_s=replay_s, mode=mode),
      insitu=types.SimpleNamespace(launches=10, mean_s=program_s))
  return api, target, profile


def test_a_replay_far_from_the_program_says_why_naming_the_integer_inputs():
  """A paged attention on the H200 (6fa01a5): 135 µs a launch in the program, 19 µs
  replayed, its page table and lengths random in [0, 64). The report must not leave two
  times 7x apart unexplained."""
  api, t, p = _timed("paged#0", ["float32[16,64]", "int32[16]", "int32[16,8]"], 135e-6, 19e-6)
  (note,) = api.replay_against_program([t], [p])
  assert note.startswith("paged#0: in the program 135.0 µs")
  assert "7.11x" in note
  assert "input 1 (int32[16]) random in [0, 64); input 2 (int32[16,8]) random in [0, 64)" in note
  assert "float32" not in note


def test_weakly_typed_bool_and_narrow_integer_inputs_are_named_with_what_was_drawn():
  """A Python int passed to a pallas_call is a weakly typed '~int32[]'; bools are coin
  flips and int4 values come from [0, 8) (policy.random_values)."""
  import ml_dtypes
  import numpy as np
  from pallas_prof.profiler.timing import policy
  api, t, p = _timed("k#0", ["~int32[]", "bool[8]", "int4[32]", "uint8[4]"], 50e-6, 10e-6)
  (note,) = api.replay_against_program([t], [p])
  assert "input 0 (int32[]) random in [0, 64)" in note
  assert "input 1 (bool[8]) a coin flip" in note
  assert "input 2 (int4[32]) random in [0, 8)" in note
  assert "input 3 (uint8[4]) random in [0, 64)" in note
  # the words agree with what random_values draws
  drawn = policy.random_values(np.random.default_rng(0), 4096, ml_dtypes.int4)
  assert int(drawn.min()) == 0 and int(drawn.max()) == 7


@pytest.mark.parametrize("mode,cache", [("cold", "a cold L2"), ("sustained", "a warm L2")])
def test_a_float_kernel_far_from_the_program_gets_the_general_reason(mode, cache):
  api, t, p = _timed("k#0", ["bfloat16[64,64]"], 10e-6, 30e-6, mode)
  (note,) = api.replay_against_program([t], [p])
  assert "0.33x" in note and cache in note and "random in [" not in note


@pytest.mark.parametrize("program_s", [10e-6, 14e-6, 7e-6])
def test_a_replay_near_the_program_says_nothing(program_s):
  api, t, p = _timed("k#0", ["int32[8]"], program_s, 10e-6)
  assert api.replay_against_program([t], [p]) == []


def test_no_note_without_both_times():
  api, t, p = _timed("k#0", ["int32[8]"], 100e-6, 10e-6)
  p.insitu = None
  assert api.replay_against_program([t], [p]) == []
  p.insitu, p.runtime = types.SimpleNamespace(launches=1, mean_s=1e-3), None
  assert api.replay_against_program([t], [p]) == []
  p.runtime = types.SimpleNamespace(median_s=0.0, mode="cold")     # no division by zero
  assert api.replay_against_program([t], [p]) == []
