"""Every class of compile failure explained: which stage and what failed, the
equation and the user's line, whose fault it is, what to do.

  ptxas        a kernel's own inline assembly ptxas rejects: the PTX line leads
               through its `.loc` to the equation (the kernel's fault)
  crash        the compile worker killed mid-compile, an assertion's text on its
               stderr: kept and read, the op kind it names leading to equations
               (no IR printed: through the primitives)
  MLIR errors  located diagnostics on generated lines lead to their equations
  stderr       what a compile writes to file descriptor 2 comes back with its error
(the scan assertion: test_triton_bugs.py; too-big blocks and shared memory:
tests/instrument/test_errors.py.)
"""
from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import pytest
from jax.experimental.pallas import triton as plgpu

import pallas_prof
from pallas_prof.backend.compiling import compile as backend_compile
from pallas_prof.backend.compiling import compile_worker
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.compiling.failures import workarounds
from pallas_prof.backend.compiling.failures.compile_diagnostics import diagnose
from pallas_prof.instrument import error_text
from testkit.helpers import pallas

THIS_FILE = os.path.realpath(__file__)


def _line(tag: str) -> int:
  with open(THIS_FILE) as f:
    (line,) = [i for i, t in enumerate(f, start=1) if t.rstrip().endswith(f"# {tag}")]
  return line


def lowered(kernel, name, out_shape, *in_shapes):
  fn = pallas(kernel, out_shape, name=name)
  jax.jit(fn).lower(*in_shapes)
  return kernel_registry.find(name)[-1]


def test_ptxas_rejecting_the_kernel_s_inline_assembly_names_its_line():
  def kernel(x_ref, o_ref):
    y = x_ref[...] * 2.0
    o_ref[...] = plgpu.elementwise_inline_asm(  # BAD ASM
        "bogus.op.f32 $0, $1;", args=[y], constraints="=r,r", pack=1,
        result_shape_dtypes=[jax.ShapeDtypeStruct((128,), jnp.float32)])[0]

  rec = lowered(kernel, "bad_asm", jax.ShapeDtypeStruct((128,), jnp.float32),
                jax.ShapeDtypeStruct((128,), jnp.float32))
  backend_compile.clear_memory_cache()
  with pytest.raises(pallas_prof.CompileError) as info:
    workarounds.compile_working_around(rec.generated, ("cuda", 90), rec.relower,
                                       use_disk_cache=False)
  err = info.value
  d = err.diagnosis
  assert (d.kind, d.fault) == ("ptxas", "kernel")        # its own assembly: no retry
  assert err.workaround is None and "workaround" not in err.details
  assert err.eqn.primitive.startswith("elementwise_inline_asm")     # JAX 0.12: without _p
  assert (err.eqn.file, err.eqn.line) == (THIS_FILE, _line("BAD ASM"))
  assert "ptxas" in d.mapped_by and any("Not a name of any known instruction" in m
                                        for m in d.messages)
  assert "PTX line" in error_text(err) and err.reproducer == {}


def test_a_crash_with_an_assertion_on_stderr_is_read(tmp_path):
  """The worker dies (as LLVM's abort() would) after an assertion's message: the
  message is kept, whose fault and which op kind follow from it, and with no IR
  printed the equations come from the primitives that lower to that op."""
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.cumsum(x_ref[...], axis=0)  # CRASHING SCAN

  rec = lowered(kernel, "crashing", jax.ShapeDtypeStruct((16, 16), jnp.float32),
                jax.ShapeDtypeStruct((16, 16), jnp.float32))
  good = rec.generated
  crashing = tmp_path / "crashing_kernel.py"
  crashing.write_text(
      "import os\n"
      "os.write(2, b\"python: /project/lib/Conversion/TritonGPUToLLVM/ScanOpToLLVM.cpp:158: "
      "void AddPartialReduce(int &): Assertion `a == b' failed.\\n\")\n"
      "os.abort()\n")
  # (the file is checked against the source before the compile: the source is its text)
  bad = dataclasses.replace(good, path=str(crashing), source=crashing.read_text())
  backend_compile.clear_memory_cache()
  with pytest.raises(pallas_prof.CompileError) as info:
    backend_compile.compile_kernel(bad, ("cuda", 90), use_disk_cache=False)
  err = info.value
  d = err.diagnosis
  assert (d.kind, d.fault, d.op_kind) == ("crash", "triton", "tt.scan")
  assert d.assertion == "ScanOpToLLVM.cpp:158 in AddPartialReduce: `a == b`"
  assert "crashed (signal SIGABRT)" in str(err)
  assert (err.eqn.primitive, err.eqn.line) == ("cumsum", _line("CRASHING SCAN"))
  assert "primitives lower to tt.scan" in d.mapped_by
  assert "Assertion `a == b' failed" in err.details["compiler output"]
  # the worker came back for the next compile
  assert backend_compile.compile_kernel(good, ("cuda", 90), use_disk_cache=False).ptx


def test_located_mlir_errors_lead_to_their_equations():
  """MLIR's `file:line:col: error:` on lines of the generated source (the kernel's
  own file) name those lines' equations; its message about the pipeline does not."""
  def kernel(x_ref, o_ref):
    y = x_ref[...] + 1.0
    o_ref[...] = jnp.exp(y)  # LOCATED

  rec = lowered(kernel, "located", jax.ShapeDtypeStruct((64,), jnp.float32),
                jax.ShapeDtypeStruct((64,), jnp.float32))
  gk = rec.generated
  exp = next(e for e in gk.eqns if e.primitive == "exp")
  output = (f"{gk.path}:{exp.lines[0]}:12: error: 'tt.extern_elementwise' op failed to "
            "legalize\n"
            f"{gk.path}:3:0: error: Failures have been detected while processing an MLIR "
            "pass pipeline\n"
            f"{gk.path}:3:0: note: Pipeline failed while executing [`ConvertTritonGPUToLLVM` "
            "on 'builtin.module' operation]\n")
  d = diagnose(gk, "llir", "RuntimeError", "PassManager::run failed", output=output)
  assert (d.kind, d.failing_pass, d.op_kind, d.fault) == \
      ("pass failure", "ConvertTritonGPUToLLVM", "tt.extern_elementwise", "triton")
  assert d.equations == (exp.index,) and "located" in d.mapped_by
  assert d.messages == (f"error at {os.path.basename(gk.path)}:{exp.lines[0]} [{exp.index}]: "
                        "'tt.extern_elementwise' op failed to legalize",)


def test_what_a_compile_writes_to_stderr_comes_back_with_its_error(tmp_path):
  """From the worker and in-process alike (the two ways compile_worker.compile runs)."""
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0

  rec = lowered(kernel, "noisy", jax.ShapeDtypeStruct((32,), jnp.float32),
                jax.ShapeDtypeStruct((32,), jnp.float32))
  for worker in ("1", "0"):
    noisy = tmp_path / f"noisy_kernel_{worker}.py"      # (a module is imported once)
    noisy.write_text(
        "import os\nimport triton\nimport triton.language as tl\n"
        f"os.write(2, b'said on fd 2 by compile {worker}\\n')\n\n\n"
        "@triton.jit\ndef noisy(x_ref, o_ref):\n"
        "    tl.store(o_ref + tl.arange(0, 32), not_defined)\n")
    request = backend_compile.compile_request(
        dataclasses.replace(rec.generated, path=str(noisy), source=noisy.read_text()),
        ("cuda", 90))
    os.environ["PALLAS_PROF_COMPILE_WORKER"] = worker
    try:
      answer = compile_worker.compile(request)
    finally:
      os.environ.pop("PALLAS_PROF_COMPILE_WORKER")
    assert answer["error"]["type"] == "CompilationError", answer["error"]
    assert f"said on fd 2 by compile {worker}" in answer["error"]["stderr"]
    assert answer["error"]["ir"] == {}           # it failed before the first stage ended
