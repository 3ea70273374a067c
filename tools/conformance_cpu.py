"""Runs JAX's own Pallas conformance tests on CPU against pallas-prof, as if on an H200.

Usage (from the repository root; needs hypothesis, absl-py, pytest-timeout, pytest-xdist):

    /work/venv/bin/python tools/conformance_cpu.py                 # ops + indexing, hypothesis as set (long)
    /work/venv/bin/python tools/conformance_cpu.py --max-examples 3  # the quick full pass (minutes)
    /work/venv/bin/python tools/conformance_cpu.py --files ops -k "test_erf_inv or test_cumsum"
    /work/venv/bin/python tools/conformance_cpu.py --triage /tmp/pallas-prof-conformance-cpu/conformance-cpu.xml

It prints pass/fail/skip per class and the failures grouped by the known root causes of
tools/conformance_triage.md (CAUSES below; "unclassified" = new). Options: -n workers (<= 2),
--timeout per test, --no-compile, --no-probe (skip the built-in lowering probe),
--poison-outputs, --workaround (hide known CPU-only problems), --all-classes (also the
*InterpretTest classes), --summarize XML (messages instead of causes); other pytest args pass
through. Installed for it into /work/venv: hypothesis, absl-py, pytest-timeout.

What it does: copies /work/shared/conformance (read-only there) into a work folder
(default /tmp/pallas-prof-conformance-cpu), and runs pytest on the test files with this
file loaded as a pytest plugin (`-p conformance_cpu`). The plugin

  * makes JAX's test utilities report the device under test as a CUDA GPU of compute
    capability 9.0 (jtu.device_under_test, is_device_cuda/rocm, test_device_matches through
    them, is_cuda_compute_capability_at_least/equal), so the tests take exactly the code
    paths and skips they take on the H200 (e.g. PallasTest skips the *InterpretTest classes
    on a GPU, OpsTest skips "TODO: error on GPU" cases); JAX itself still runs on CPU;
  * installs pallas-prof (via the shared conftest), so every pallas_call of the
    non-interpret classes is lowered by pallas-prof and run by Triton's interpreter;
  * after each test, compiles every kernel that test lowered for sm_90
    (pallas_prof.backend.compiling.compile.compile_kernel) and fails the test if one does
    not compile: the interpreter is more permissive than the real compiler (kernels of a
    failing test are compiled too; a compile failure there goes into the junit properties);
  * gives test files that call jax.local_devices() devices that also answer the H200's
    GPU-only attributes (test_dot reads shared_memory_per_block_optin);
  * lowers each kernel also with JAX's built-in Triton lowering (to Triton IR, cuda sm_90)
    and records what it said ("builtin: ok" or its error): a failure the built-in backend
    cannot lower either is not among its GPU passes;
  * sets JAX_PALLAS_USE_MOSAIC_GPU=0: JAX 0.10.2 defaults that flag to True, 0.11.2 removed
    it (the shared conftest shims it to False, the Triton path);
  * provides `jax._src.flattree` when the local JAX (0.10.2) lacks it (the tests are from
    0.11.2, where FlatTree.flatten_args moved there); that is a version shim, not a GPU fake;
  * optionally lowers the tests' hypothesis max_examples (--max-examples) for quick runs.

Known differences from the GPU run (see tools/conformance_triage.md): the reference values
come from XLA:CPU, not XLA:GPU; the interpreter zero-fills outputs (a GPU does not); the
interpreter's libdevice is numpy in float64; no real launch through jaxlib's custom call.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SOURCE = "/work/shared/conformance"
DEFAULT_WORKDIR = "/tmp/pallas-prof-conformance-cpu"
FILES = {"ops": "ops_test.py", "indexing": "indexing_test.py"}
# The classes that exercise a Pallas GPU backend; *InterpretTest use JAX's own interpreter.
BACKEND_CLASSES = ("OpsTest", "PallasPrimitivesTest", "IndexerOpsTest",
                   "AdvancedIndexerOpsTest", "IndexerTest")
FAKE_COMPUTE_CAPABILITY = (9, 0)     # H200
COMPILE_TARGET = ("cuda", 90)

ENV_SOURCE = "CONFORMANCE_CPU_SOURCE"
ENV_MAX_EXAMPLES = "CONFORMANCE_CPU_MAX_EXAMPLES"
ENV_COMPILE = "CONFORMANCE_CPU_COMPILE"
ENV_PROBE = "CONFORMANCE_CPU_PROBE_BUILTIN"
ENV_WORKAROUND = "CONFORMANCE_CPU_WORKAROUND"
ENV_POISON = "CONFORMANCE_CPU_POISON_OUTPUTS"


# ======================================================================================
# The pytest plugin (loaded in the controller and in every xdist worker)
# ======================================================================================

def _load_support_modules(source: str) -> None:
  """Loads the helper modules JAX's wheel lacks, before the shared conftest does, so that
  setup_hypothesis can be wrapped before the test modules call it."""
  import importlib
  import importlib.util
  for module_name, file_name in [
      ("jax._src.hypothesis_test_util", "hypothesis_test_util.py"),
      ("jax._src.pallas.pallas_test_util", "pallas_test_util.py"),
  ]:
    try:
      importlib.import_module(module_name)
    except ImportError:
      spec = importlib.util.spec_from_file_location(
          module_name, os.path.join(source, "_support", file_name))
      module = importlib.util.module_from_spec(spec)
      sys.modules[module_name] = module
      spec.loader.exec_module(module)


def _install_flattree_shim() -> None:
  """JAX 0.11 has jax._src.flattree.flatten_args; 0.10.2 has FlatTree.flatten_args."""
  try:
    import jax._src.flattree  # noqa: F401
    return
  except ImportError:
    pass
  import types
  import jax._src
  from jax._src.tree_util import FlatTree
  shim = types.ModuleType("jax._src.flattree")
  shim.FlatTree = FlatTree
  shim.flatten_args = FlatTree.flatten_args
  shim.flatten = FlatTree.flatten
  sys.modules["jax._src.flattree"] = shim
  jax._src.flattree = shim


def _parse_capability(text: str) -> tuple[int, ...]:
  return tuple(int(x) for x in text.split("."))


def _pretend_cuda_sm90() -> None:
  """JAX's test utilities now describe an sm_90 CUDA GPU; JAX still computes on CPU.

  test_device_matches and _get_device_tags look these functions up as module globals
  at call time, so replacing the module attributes reaches every caller, including
  `jtu.test_device_matches(["gpu"])` / `(["cuda"])` / `(["cpu"])` in the test files.
  """
  from jax._src import test_util as jtu
  jtu.device_under_test = lambda: "gpu"
  jtu.is_device_cuda = lambda: True
  jtu.is_device_rocm = lambda: False
  jtu.is_cuda_compute_capability_at_least = (
      lambda capability: FAKE_COMPUTE_CAPABILITY >= _parse_capability(capability))
  jtu.is_cuda_compute_capability_equal = (
      lambda capability: FAKE_COMPUTE_CAPABILITY == _parse_capability(capability))
  assert jtu.test_device_matches(["gpu"]) and jtu.test_device_matches(["cuda"])
  assert not jtu.test_device_matches(["cpu"]) and not jtu.test_device_matches(["rocm"])
  assert not jtu.test_device_matches(["tpu"])


def _limit_hypothesis_examples(limit: int) -> None:
  from jax._src import hypothesis_test_util as htu
  original = htu.setup_hypothesis
  if getattr(original, "_conformance_cpu_wrapped", False):
    return

  def setup_hypothesis(max_examples=30):
    return original(max_examples=min(max_examples, limit))

  setup_hypothesis._conformance_cpu_wrapped = True
  htu.setup_hypothesis = setup_hypothesis


# What jax.local_devices()[0] reports on the H200 (test_dot reads shared_memory_per_block_optin).
H200_DEVICE_ATTRIBUTES = {
    "shared_memory_per_block_optin": 232448,   # 227 KiB
    "compute_capability": "9.0",
    "device_kind": "NVIDIA H200",
}


class _DeviceWithGpuAttributes:
  """A CPU device that also answers the GPU-only attributes the test files read."""

  def __init__(self, device):
    self._device = device

  def __getattr__(self, name):
    if name in H200_DEVICE_ATTRIBUTES and not hasattr(self._device, name):
      return H200_DEVICE_ATTRIBUTES[name]
    return getattr(self._device, name)


def _gpu_attributes_for_test_files(test_dir: str) -> None:
  """jax.local_devices(), called from a test file, returns devices that also carry the
  H200's GPU-only attributes. Calls from anywhere else (JAX itself) are untouched."""
  import jax
  original = jax.local_devices
  if getattr(original, "_conformance_cpu_wrapped", False):
    return
  test_dir = os.path.realpath(test_dir)

  def local_devices(*args, **kwargs):
    devices = original(*args, **kwargs)
    caller = sys._getframe(1).f_code.co_filename
    if os.path.dirname(os.path.realpath(caller)) == test_dir:
      return [_DeviceWithGpuAttributes(d) for d in devices]
    return devices

  local_devices._conformance_cpu_wrapped = True
  jax.local_devices = local_devices


def _poison_unwritten_outputs() -> None:
  """--poison-outputs: the interpreter path starts outputs as zeros, a GPU does not (XLA
  hands the custom call uninitialised buffers). Start them as NaN (integers: all ones), except
  outputs the GPU path zeroes too (written with atomics, see GeneratedKernel.zeroed_outputs)
  and aliased ones, so a kernel that leaves part of an output unwritten fails here as it
  could on the GPU."""
  from pallas_prof.backend.running import launch
  original = launch.run_interpreted
  if getattr(original, "_conformance_cpu_wrapped", False):
    return

  # run_interpreted's own poison (it once patched np.zeros here, which run_interpreted
  # no longer called, so the flag poisoned nothing)
  def run_interpreted(gk, inputs, out_shapes, input_output_aliases=(), poison=False):
    return original(gk, inputs, out_shapes, input_output_aliases, poison=True)

  run_interpreted._conformance_cpu_wrapped = True
  launch.run_interpreted = run_interpreted


# Per-test record of what JAX's built-in Triton lowering says about each pallas_call.
_builtin_probe: list[str] = []


def _probe_builtin_lowering() -> None:
  """Before pallas-prof lowers a kernel, also lower it with JAX's own Triton backend for
  cuda sm_90 (jaxpr -> Triton MLIR only; no XLA, no PTX). The result goes into the test's
  junit properties: a failing test whose kernels the built-in backend cannot lower
  either cannot be among the built-in backend's GPU passes (modulo its own error-handling
  in the test)."""
  from pallas_prof.backend import pallas_call_rule
  original = pallas_call_rule._lower
  if getattr(original, "_conformance_cpu_wrapped", False):
    return

  def lower(ctx, in_nodes, params, platform):
    try:
      from jax._src.pallas.triton import lowering as builtin_lowering
      builtin_lowering.lower_jaxpr_to_triton_module(
          params["jaxpr"], params["grid_mapping"], "cuda", 90, ctx.module_context)
      _builtin_probe.append("ok")
    except Exception as e:  # noqa: BLE001 - recorded, never raised
      text = str(e).strip().splitlines()
      _builtin_probe.append(f"{type(e).__name__}: {text[0][:200] if text else ''}")
    return original(ctx, in_nodes, params, platform)

  lower._conformance_cpu_wrapped = True
  pallas_call_rule._lower = lower


def _builtin_verdict() -> str | None:
  if not _builtin_probe:
    return None
  errors = [r for r in _builtin_probe if r != "ok"]
  return errors[0] if errors else "ok"


def _workaround_interpreter_stdlib_cache() -> None:
  """--workaround (1/2): Triton's interpreter caches its rewrite of tl.max/tl.cumsum/... in
  InterpretedFunction.rewritten_fn; the rewrite needs `interpreter_semantic` in
  triton.language.standard's globals, which launch.py's _restore_triton_language deletes
  after every run, so the second kernel of a process using such a helper fails with
  NameError. Clearing the cache after each run hides that CPU-only bug (the real fix
  belongs in launch.py) so the failures behind it show."""
  from pallas_prof.backend.running import launch
  original_exit = launch._InterpretStandardLibrary.__exit__
  if getattr(original_exit, "_conformance_cpu_wrapped", False):
    return

  def __exit__(self, *exc):
    result = original_exit(self, *exc)
    from triton.runtime.interpreter import InterpretedFunction
    InterpretedFunction.rewritten_fn.clear()
    return result

  __exit__._conformance_cpu_wrapped = True
  launch._InterpretStandardLibrary.__exit__ = __exit__


def _bf16_bits_to_f32(bits):
  import numpy as np
  return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _f32_to_bf16_bits(x):
  """Round to nearest even, as the GPU's cvt.rn.bf16.f32 does; NaN stays NaN."""
  import numpy as np
  bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
  rounded = ((bits + (((bits >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF)))
             >> np.uint32(16)).astype(np.uint16)
  return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def _workaround_interpreter_bf16_casts() -> None:
  """--workaround (2/2): Triton's interpreter keeps bf16 as raw uint16 bits and its casts
  get it wrong where a GPU does not: f32->bf16 truncates instead of rounding to nearest
  even, int<->bf16 converts the raw bits as integers, bf16 subnormals flush to zero.
  Convert through exact float32 instead, so what is left of a failure is ours."""
  import numpy as np
  import triton.language as tl
  from triton.runtime.interpreter import InterpreterBuilder, TensorHandle, _get_np_dtype
  original = InterpreterBuilder.cast_impl
  if getattr(original, "_conformance_cpu_wrapped", False):
    return

  def cast_impl(self, src, dst_type):
    src_ty, dst_ty = src.dtype.scalar, dst_type.scalar
    # (a comparison of bf16 values comes back labelled bf16 but holds bools)
    if src_ty == tl.bfloat16 and dst_ty != tl.bfloat16 and src.data.dtype == np.uint16:
      data = _bf16_bits_to_f32(src.data)
      if dst_ty != tl.float32:
        with np.errstate(invalid="ignore"):
          data = data.astype(_get_np_dtype(dst_type))
      return TensorHandle(data, dst_ty)
    if dst_ty == tl.bfloat16 and src_ty != tl.bfloat16:
      data = src.data.astype(np.float32)
      return TensorHandle(_f32_to_bf16_bits(data), dst_ty)
    return original(self, src, dst_type)

  cast_impl._conformance_cpu_wrapped = True
  InterpreterBuilder.cast_impl = cast_impl   # create_si_to_fp & co. call self.cast_impl


class Sm90CompileFailure(AssertionError):
  """A kernel ran under the interpreter but Triton could not compile it for sm_90."""


def _compile_new_kernels(seen: set) -> list[str]:
  """Compiles for sm_90 every kernel lowered since the last call; returns the failures."""
  from pallas_prof.backend import kernel_registry
  from pallas_prof.backend.compiling.compile import compile_kernel
  failures = []
  for rec in kernel_registry.kernels():
    key = rec.generated.key
    if key in seen:
      continue
    seen.add(key)
    try:
      compile_kernel(rec.generated, COMPILE_TARGET)
    except Exception as e:  # noqa: BLE001 - reported with the test below
      first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
      failures.append(f"{rec.label}: {type(e).__name__}: {first}")
  return failures


def _compile_failure(failures: list[str]) -> Sm90CompileFailure:
  return Sm90CompileFailure(
      f"sm_90 compile failed for {len(failures)} kernel(s) that ran under the "
      f"interpreter: " + " | ".join(failures[:3]))


def pytest_configure(config):
  source = os.environ.get(ENV_SOURCE, DEFAULT_SOURCE)
  os.environ.setdefault("JAX_PLATFORMS", "cpu")
  os.environ.setdefault("CONFORMANCE_BACKEND", "pallas_prof")
  _install_flattree_shim()
  _load_support_modules(source)
  limit = os.environ.get(ENV_MAX_EXAMPLES)
  if limit:
    _limit_hypothesis_examples(int(limit))
  _pretend_cuda_sm90()
  _gpu_attributes_for_test_files(source)
  import pallas_prof
  pallas_prof.install()      # the shared conftest does this too; installing twice is harmless
  if os.environ.get(ENV_PROBE, "1") == "1":
    _probe_builtin_lowering()
  if os.environ.get(ENV_WORKAROUND) == "1":
    _workaround_interpreter_stdlib_cache()
    _workaround_interpreter_bf16_casts()
  if os.environ.get(ENV_POISON) == "1":
    _poison_unwritten_outputs()
  from jax._src import config as jax_config
  flag = getattr(jax_config, "jax_pallas_use_mosaic_gpu", None)
  assert flag is None or not flag.value, "set JAX_PALLAS_USE_MOSAIC_GPU=0 (the GPU run's path)"
  config._conformance_cpu_compiled = set()


def _pytest_runtest_call_wrapper():
  import pytest

  @pytest.hookimpl(wrapper=True)
  def pytest_runtest_call(item):
    # Kernels lowered by earlier tests (in this worker) are already compiled.
    # A test that failed still gets its kernels compiled: the result goes into the
    # junit properties, so the triage can tell compile problems hidden behind a failure.
    _builtin_probe.clear()
    compile_on = os.environ.get(ENV_COMPILE, "1") == "1"
    try:
      result = yield
    except BaseException:
      if compile_on:
        failures = _compile_new_kernels(item.config._conformance_cpu_compiled)
        if failures:
          item.user_properties.append(("sm90_compile", " | ".join(failures[:3])))
      raise
    finally:
      verdict = _builtin_verdict()
      if verdict is not None:
        item.user_properties.append(("builtin_lowering", verdict))
    if compile_on:
      failures = _compile_new_kernels(item.config._conformance_cpu_compiled)
      if failures:
        raise _compile_failure(failures)
    return result

  return pytest_runtest_call


try:
  import pytest as _pytest  # noqa: F401
  pytest_runtest_call = _pytest_runtest_call_wrapper()
except ImportError:  # only the summary mode runs without pytest
  pass


# ======================================================================================
# The command line
# ======================================================================================

def _prepare_workdir(source: str, workdir: str) -> None:
  os.makedirs(workdir, exist_ok=True)
  for name in os.listdir(source):
    src = os.path.join(source, name)
    dst = os.path.join(workdir, name)
    if os.path.isdir(src):
      shutil.rmtree(dst, ignore_errors=True)
      shutil.copytree(src, dst)
    else:
      shutil.copyfile(src, dst)
  for root, dirs, files in os.walk(workdir):
    for n in dirs + files:
      p = os.path.join(root, n)
      os.chmod(p, os.stat(p).st_mode | 0o200)


def _status(testcase) -> tuple[str, str]:
  for child in testcase:
    if child.tag in ("failure", "error"):
      return "fail", "\n".join(x for x in (child.get("message"), child.text) if x)
    if child.tag == "skipped":
      return "skip", (child.get("message") or "").strip()
  return "pass", ""


_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Failure|ExceptionGroup))\b:?\s*(.*)$")


def _clean(line: str) -> str:
  line = re.sub(r"^E\s+", "", line.strip())
  return re.sub(r"^\|\s*", "", line).strip()


def headline(text: str) -> str:
  """One line that says why a test failed, from its junit failure text."""
  lines = [_clean(x) for x in text.splitlines()]
  lines = [x for x in lines if x]
  for marker in ("Sm90CompileFailure", "LoweringError:"):
    hits = [x for x in lines if marker in x]
    if hits:
      line = hits[-1]
      return line[line.index(marker.rstrip(":")):][:400]
  if any("nan location mismatch" in x for x in lines):
    first = next((x for x in lines if x.startswith("ACTUAL:")), "")
    return f"AssertionError: values differ: nan location mismatch; {first}"[:400]
  if any("Mismatched elements" in x for x in lines):
    mismatch = next(x for x in lines if x.startswith("Mismatched elements"))
    first = next((x for x in lines if "(ACTUAL)" in x), "")
    max_abs = next((x for x in lines if x.startswith("Max absolute difference")), "")
    return f"AssertionError: values differ: {mismatch}; first {first}; {max_abs}"[:400]
  for line in reversed(lines):
    m = _ERROR_LINE.match(line)
    if m and not line.startswith("raise "):
      return line[:400]
  return (lines[0] if lines else "")[:400]


def _property(testcase, name: str, default: str = "-") -> str:
  for prop in testcase.iter("property"):
    if prop.get("name") == name:
      return prop.get("value") or ""
  return default


def _normalise(message: str) -> str:
  """Folds run-specific details (hashes, paths, numbers in mismatches) for grouping."""
  m = re.sub(r"#[0-9a-f]{6}", "#…", message)
  m = re.sub(r"_[0-9a-f]{16}\.py", ".py", m)
  m = re.sub(r"Mismatched elements: \d+ / \d+ \([\d.]+%\).*", "Mismatched elements …", m)
  return m


# The root causes found so far (tools/conformance_triage.md explains each, with its fix).
# A failure matches the first cause whose test-name and headline patterns both match;
# one that matches none is printed as "unclassified": a new problem to triage.
CAUSES = [
    ("R1", "real", "int4/uint4 operands unsupported (codegen dtype table, rules/memory.py)",
     r"", r"dtype u?int4 has no Triton equivalent"),
    ("R2", "real", "float->int cast does not saturate at the top of the range (emit._float_to_int)",
     r"test_cast_from", r"\b(2147483520|4294967040|9223372036854775296)\b \(ACTUAL\)"),
    ("R3", "real", "masked swap returns 0, not the stored value, in masked-off lanes "
     "(rules/memory.py _masked_swap)", r"test_masked(_oob)?_swap", r"values differ"),
    ("R4", "real", "missing lowering rule", r"", r"has no lowering rule in pallas-prof"),
    ("R5", "real?", "erf_inv via libdevice.erfinv, not XLA's polynomial (rules/elementwise.py)",
     r"test_erf_inv", r"values differ"),
    ("R6", "real?", "cumsum of float16 accumulates in f32 (XLA and the built-in add in f16) "
     "(rules/reductions.py)", r"test_cumsum", r"values differ"),
    ("C1", "cpu-only bug", "interpreter stdlib rewrite cache loses `interpreter_semantic` "
     "(launch.py _restore_triton_language)", r"", r"interpreter_semantic"),
    ("C2", "interpreter gap", "interpreter libdevice: erfinv outside (-1, 1) "
     "(interpreter_libdevice.py)", r"", r"vectorize` on size 0"),
    ("C3", "interpreter gap", "interpreter libdevice: scalar first operand (pow(2.0, x)) "
     "(interpreter_libdevice.py)", r"", r"'float' object has no attribute 'type'"),
    ("C4", "interpreter gap", "bf16 on the CPU path: Triton's interpreter casts (f32->bf16 "
     "truncates, int<->bf16 moves raw bits, != compares raw bits) and subnormals flushed by "
     "XLA:CPU's FTZ/DAZ in the pure_callback thread (launch.py)",
     r"test_cast_from|test_elementwise_scalar_exp2?_bfloat16", r"values differ"),
    ("A1", "cpu reference", "1-ulp differences to XLA:CPU's own transcendental functions "
     "(tol=0); pallas-prof calls the same libdevice functions as the built-in backend",
     r"test_unary_primitives_", r"values differ"),
    ("T1", "test asserts a built-in limitation", "expects f16 true_divide to be rejected",
     r"test_f16_true_divide_unsupported", r"Exception not raised"),
    ("K1", "real", "kernel runs under the interpreter but fails the sm_90 compile",
     r"", r"Sm90CompileFailure"),
]


def classify(test: str, message: str):
  for cause in CAUSES:
    cid, kind, label, name_pattern, message_pattern = cause
    if re.search(name_pattern, test) and re.search(message_pattern, message):
      return cause
  return ("??", "unclassified", "new failure: triage it", "", "")


_DTYPES_32BIT = ("float32", "int32", "uint32")
_DTYPES_SUB_32BIT = ("bfloat16", "float16", "int16", "int8", "int4", "int2", "uint16", "uint8",
                     "uint4", "uint2", "bool", "float8_e4m3b11fnuz", "float8_e5m2",
                     "float8_e4m3fn")
_DTYPES = _DTYPES_32BIT + _DTYPES_SUB_32BIT


def describe_cast_test(name: str) -> str:
  """test_cast_from_sub_32bit244 -> 'uint8->bfloat16 exhaustive' (ops_test's product order)."""
  m = re.search(r"test_cast_from_32bit(\d+)$", name)
  if m:
    i = int(m.group(1))
    return f"{_DTYPES_32BIT[i // len(_DTYPES)]}->{_DTYPES[i % len(_DTYPES)]}"
  m = re.search(r"test_cast_from_sub_32bit(\d+)$", name)
  if m:
    i, randomize = divmod(int(m.group(1)), 2)
    return (f"{_DTYPES_SUB_32BIT[i // len(_DTYPES)]}->{_DTYPES[i % len(_DTYPES)]} "
            f"{'random' if randomize else 'exhaustive'}")
  return ""


def triage(xml_path: str) -> str:
  root = ET.parse(xml_path).getroot()
  groups = collections.defaultdict(list)
  for tc in root.iter("testcase"):
    status, message = _status(tc)
    if status != "fail":
      continue
    name = f"{tc.get('classname', '').split('.')[-1]}.{tc.get('name')}"
    line = headline(message)
    groups[classify(name, line)].append((name, line, _property(tc, "builtin_lowering"),
                                         _property(tc, "sm90_compile", "")))
  out = []
  for cause, tests in sorted(groups.items(), key=lambda kv: kv[0][0]):
    cid, kind, label = cause[:3]
    out.append(f"[{cid}] {kind}: {label}  ({len(tests)} tests)")
    for name, line, builtin, sm90 in sorted(tests):
      cast = describe_cast_test(name)
      out.append(f"    {name}{' (' + cast + ')' if cast else ''}  builtin: {builtin}")
      out.append(f"        {line[:300]}")
      if sm90:
        out.append(f"        also fails the sm_90 compile: {sm90[:300]}")
  return "\n".join(out)


def summarize(xml_path: str, classes=BACKEND_CLASSES, show: int = 1000,
              details: bool = True) -> str:
  root = ET.parse(xml_path).getroot()
  counts = collections.defaultdict(collections.Counter)
  failures = collections.defaultdict(list)
  for tc in root.iter("testcase"):
    klass = tc.get("classname", "").split(".")[-1]
    status, message = _status(tc)
    counts[klass][status] += 1
    if status == "fail":
      failures[_normalise(headline(message))].append(
          (f"{klass}.{tc.get('name')}", headline(message), _property(tc, "builtin_lowering"),
           _property(tc, "sm90_compile", "")))
  out = ["class                          pass  fail  skip"]
  total = collections.Counter()
  for klass in sorted(counts):
    c = counts[klass]
    marker = "" if klass in classes else "   (not a backend class)"
    if klass in classes:
      total.update(c)
    out.append(f"{klass:30s} {c['pass']:5d} {c['fail']:5d} {c['skip']:5d}{marker}")
  out.append(f"{'TOTAL (backend classes)':30s} {total['pass']:5d} {total['fail']:5d} "
             f"{total['skip']:5d}")
  out.append("")
  out.append("failures by message (builtin = what JAX's own Triton lowering said):")
  for message, tests in sorted(failures.items(), key=lambda kv: -len(kv[1]))[:show]:
    out.append(f"[{len(tests)}] {message}")
    if details:
      for name, full, builtin, sm90 in sorted(tests):
        out.append(f"      {name}   builtin: {builtin}")
        if full != message:
          out.append(f"          {full}")
        if sm90:
          out.append(f"          also fails the sm_90 compile: {sm90}")
  return "\n".join(out)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--source", default=DEFAULT_SOURCE, help="the shared conformance folder")
  parser.add_argument("--workdir", default=DEFAULT_WORKDIR, help="where the copy and results go")
  parser.add_argument("--files", default="ops,indexing", help="ops,indexing (comma separated)")
  parser.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
  parser.add_argument("-n", dest="workers", type=int, default=2, help="xdist workers (<= 2)")
  parser.add_argument("--timeout", type=int, default=600, help="seconds per test")
  parser.add_argument("--max-examples", type=int, default=None,
                      help="cap hypothesis max_examples (default: as the files set them)")
  parser.add_argument("--no-compile", action="store_true",
                      help="skip the sm_90 compile of every lowered kernel")
  parser.add_argument("--no-probe", action="store_true",
                      help="skip lowering each kernel with JAX's built-in Triton lowering too")
  parser.add_argument("--workaround", action="store_true",
                      help="hide two known CPU-only problems (launch.py's interpreter stdlib "
                           "cache, Triton's interpreter bf16 casts; see _workaround_*) to "
                           "see what is behind them")
  parser.add_argument("--poison-outputs", action="store_true",
                      help="start non-aliased outputs as NaN/0x5A.. instead of zeros (a GPU "
                           "does not zero them); stricter than a GPU")
  parser.add_argument("--all-classes", action="store_true",
                      help="also run the *InterpretTest classes (JAX's interpreter, not us)")
  parser.add_argument("--junit", default=None, help="junit xml path (default in workdir)")
  parser.add_argument("--summarize", metavar="XML", default=None,
                      help="only print the summary of an earlier run's junit xml")
  parser.add_argument("--triage", metavar="XML", default=None,
                      help="only print an earlier run's failures grouped by known root cause")
  args, extra = parser.parse_known_args(argv)

  if args.summarize:
    print(summarize(args.summarize))
    return 0
  if args.triage:
    print(summarize(args.triage, details=False).split("\n\n")[0])
    print()
    print(triage(args.triage))
    return 0
  workers = min(max(args.workers, 0), 2)
  _prepare_workdir(args.source, args.workdir)
  junit = args.junit or os.path.join(args.workdir, "conformance-cpu.xml")
  env = dict(os.environ)
  env["PYTHONPATH"] = os.pathsep.join(
      [REPO, os.path.dirname(os.path.abspath(__file__)), env.get("PYTHONPATH", "")]).rstrip(":")
  env[ENV_SOURCE] = args.workdir
  env[ENV_COMPILE] = "0" if args.no_compile else "1"
  env[ENV_PROBE] = "0" if args.no_probe else "1"
  env[ENV_WORKAROUND] = "1" if args.workaround else "0"
  env[ENV_POISON] = "1" if args.poison_outputs else "0"
  env.setdefault("PALLAS_PROF_CACHE_DIR", os.path.join(args.workdir, "cache"))
  env.setdefault("JAX_PLATFORMS", "cpu")
  env.setdefault("PYTHONUNBUFFERED", "1")
  # JAX 0.10.2 defaults this flag to True (Mosaic GPU); 0.11.2 removed it and the shared
  # conftest shims it to False, i.e. the Triton path the GPU run takes.
  env["JAX_PALLAS_USE_MOSAIC_GPU"] = "0"
  if args.max_examples:
    env[ENV_MAX_EXAMPLES] = str(args.max_examples)
  files = [FILES[f.strip()] for f in args.files.split(",") if f.strip()]
  keyword = args.keyword
  if not args.all_classes:
    only = "not InterpretTest"
    keyword = f"{only} and ({keyword})" if keyword else only
  cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conformance_cpu",
         f"--timeout={args.timeout}", f"--junitxml={junit}", "-rN"]
  if workers > 0:
    cmd += ["-n", str(workers)]
  if keyword:
    cmd += ["-k", keyword]
  cmd += files + extra
  print("+", " ".join(cmd), flush=True)
  rc = subprocess.call(cmd, cwd=args.workdir, env=env)
  if os.path.exists(junit):
    print(summarize(junit, details=False).split("\n\n")[0])
    print()
    print(triage(junit))
  return rc


if __name__ == "__main__":
  sys.exit(main())
