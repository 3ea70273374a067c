"""pallas-prof on ROCm, proved on the CPU: the same kernels lowered for `rocm` through JAX's
built-in Pallas Triton backend and through pallas-prof (jax.export with platforms=['rocm'],
which needs no ROCm plugin) give the same custom call, field by field; what that call
cannot run is refused at the user's line (running/rocm.py, docs/rocm.md).

Nothing here runs on AMD hardware. Fields that cannot match: `ir`, the kernel's Triton IR,
is made by two front ends (JAX's lowering to TTIR, Triton's own from pallas-prof's
generated source): both must be read by the Triton inside jaxlib, which XLA compiles them
with, and both must declare the kernel with the same parameters; the operations differ.
"""
from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export
from jax.experimental import pallas as pl
from jaxlib.mlir import ir as jaxlib_ir

import pallas_prof
from pallas_prof import triton as plgpu
from pallas_prof.backend import kernel_registry, pallas_call_rule
from pallas_prof.backend.lowering.features import bounds
from pallas_prof.backend.running import rocm
from testkit.helpers import JAX_TRITON_GONE, jax_plgpu

S = jax.ShapeDtypeStruct
ALLOWED = [export.DisabledSafetyCheck.custom_call(rocm.XLA_TRITON_TARGET)]


def _abstract_gfx(arch: str = "gfx942"):
  """A context that makes lowering see an AMD GPU of `arch` (jax 0.12's built-in backend asks
  the abstract mesh for the GPU; earlier ones fall back to a default without a device)."""
  device = jax.sharding.AbstractDevice(device_kind=arch, num_cores=None, platform="rocm")
  mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)
  return jax.sharding.use_abstract_mesh(mesh)


def _export_for_rocm(call, *args, arch: str = "gfx942") -> str:
  with _abstract_gfx(arch):
    return export.export(jax.jit(call), platforms=["rocm"], disabled_checks=ALLOWED)(
        *args).mlir_module()


def _custom_calls(text: str) -> list[dict]:
  """Every stablehlo.custom_call of a module: its attributes as Python values (the `ir`
  field as bytes), its operand and result types."""
  from jax._src.interpreters import mlir as jax_mlir
  found = []
  with jax_mlir.make_ir_context():
    module = jaxlib_ir.Module.parse(text)

    def visit(op):
      for region in op.regions:
        for block in region.blocks:
          for inner in block.operations:
            if inner.operation.name == "stablehlo.custom_call":
              found.append(_fields(inner.operation))
            visit(inner.operation)
    visit(module.operation)
  return found


def _custom_call_text(text: str) -> str:
  return next(line for line in text.splitlines() if "stablehlo.custom_call" in line)


def _named(attributes) -> dict:
  """name -> attribute of an operation's attributes or a DictAttr (indexed: iterating
  them yields names in some jaxlib versions, NamedAttributes in others)."""
  return {attributes[i].name: attributes[i].attr for i in range(len(attributes))}


def _value(attr):
  """A string (as bytes), bool or integer attribute's value (casting, which every jaxlib's
  bindings allow, where isinstance checks differ between them)."""
  for kind, read in ((jaxlib_ir.StringAttr, lambda a: a.value_bytes),
                     (jaxlib_ir.BoolAttr, lambda a: a.value),
                     (jaxlib_ir.IntegerAttr, lambda a: a.value)):
    try:
      return read(kind(attr))
    except ValueError:
      continue
  raise AssertionError(f"unexpected attribute {attr}")


def _fields(op) -> dict:
  attrs = _named(op.attributes)
  backend = {}
  for name, attr in _named(jaxlib_ir.DictAttr(attrs["mhlo.backend_config"])).items():
    value = _value(attr)
    backend[name] = value
  return {"target": jaxlib_ir.StringAttr(attrs["call_target_name"]).value,
          "api_version": str(attrs.get("api_version")),
          "backend_config": backend,
          "operand_layouts": str(attrs.get("operand_layouts")),
          "result_layouts": str(attrs.get("result_layouts")),
          "aliases": str(attrs.get("output_operand_aliases")),
          "operand_types": [str(v.type) for v in op.operands],
          "result_types": [str(r.type) for r in op.results]}


def _kernel_signature(bytecode: bytes, name: str) -> list[str]:
  """The parameter types of the public tt.func `name` of a TTIR module (MLIR bytecode),
  read by the Triton dialect inside jaxlib, as XLA reads it."""
  from jaxlib.triton import dialect
  context = jaxlib_ir.Context()
  dialect.register_dialect(context)
  context.load_all_available_dialects()
  with context:
    module = jaxlib_ir.Module.parse(bytecode)
    for op in module.body.operations:
      if op.operation.name == "tt.func" and jaxlib_ir.StringAttr(
          op.attributes["sym_name"]).value == name:
        func_type = jaxlib_ir.TypeAttr(op.attributes["function_type"]).value
        return [str(t) for t in jaxlib_ir.FunctionType(func_type).inputs]
  raise AssertionError(f"no tt.func @{name} in the module")


def _extern_calls(bytecode: bytes) -> set[tuple[str, str, str]]:
  """(symbol, libname, libpath) of every device-library call of a TTIR module."""
  from jaxlib.triton import dialect
  context = jaxlib_ir.Context()
  dialect.register_dialect(context)
  context.load_all_available_dialects()
  found = set()
  with context:
    module = jaxlib_ir.Module.parse(bytecode)

    def visit(op):
      for region in op.regions:
        for block in region.blocks:
          for inner in block.operations:
            if inner.operation.name == "tt.extern_elementwise":
              attrs = _named(inner.operation.attributes)
              found.add(tuple(jaxlib_ir.StringAttr(attrs[k]).value
                              for k in ("symbol", "libname", "libpath")))
            visit(inner.operation)
    visit(module.operation)
  return found


def _add_one(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1.0


def _scaled_blocks(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0 - y_ref[...]


def _accumulate(x_ref, acc_ref, o_ref):
  o_ref[...] = acc_ref[...] + jnp.exp(x_ref[...])


def _special_functions(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.sin(x) + jnp.tanh(x) + x ** 2.5


def _cases():
  x = np.linspace(-1, 1, 256, dtype=np.float32)
  m = np.linspace(-2, 2, 64 * 96, dtype=np.float32).reshape(64, 96)
  spec = pl.BlockSpec((32, 32), lambda i, j: (i, j))
  return {
      "one_program": (dict(out_shape=S((256,), jnp.float32)), _add_one, (x,), {}),
      "2d_grid_and_params": (
          dict(out_shape=S((64, 96), jnp.float32), grid=(2, 3), in_specs=[spec, spec],
               out_specs=spec), _scaled_blocks, (m, m + 1), dict(num_warps=2, num_stages=2)),
      "aliased_with_metadata": (
          dict(out_shape=S((256,), jnp.float32), input_output_aliases={1: 0},
               metadata={"origin": "test"}), _accumulate, (x, x * 3), dict(num_warps=8)),
      "device_library": (dict(out_shape=S((256,), jnp.float32)), _special_functions,
                         (x + 1.5,), {}),
  }


@pytest.fixture
def not_installed():
  """JAX's own CompilerParams reach JAX's backend only while pallas-prof is not installed
  (another test module of the same process may have installed it)."""
  was = pallas_prof.installed()
  pallas_prof.uninstall()
  yield
  if was:
    pallas_prof.install()


@pytest.mark.skipif(jax_plgpu() is None, reason=JAX_TRITON_GONE + ": nothing to compare with")
@pytest.mark.parametrize("case", list(_cases()))
def test_the_rocm_custom_call_is_the_builtins_field_by_field(case, not_installed):
  pallas, kernel, args, params = _cases()[case]
  builtin = pl.pallas_call(kernel, **pallas, compiler_params=jax_plgpu().CompilerParams(**params))
  ours = pl.pallas_call(kernel, **pallas, compiler_params=plgpu.CompilerParams(**params))
  [theirs] = _custom_calls(_export_for_rocm(builtin, *args))
  [mine] = _custom_calls(_export_for_rocm(ours, *args))
  assert mine["target"] == theirs["target"] == "__gpu$xla.gpu.triton"
  # both ask for api_version 4; JAX writes a dict backend_config as mhlo.backend_config
  # under the default version, so the attribute is the same default in both
  assert mine["api_version"] == theirs["api_version"]
  assert "mhlo.backend_config" in _custom_call_text(_export_for_rocm(ours, *args))
  their_ir, my_ir = theirs["backend_config"].pop("ir"), mine["backend_config"].pop("ir")
  assert mine["backend_config"] == theirs["backend_config"], (mine, theirs)
  for field in ("operand_layouts", "result_layouts", "aliases", "operand_types",
                "result_types"):
    assert mine[field] == theirs[field], field
  # the fields above cover these; said again for the reader
  config = mine["backend_config"]
  assert config["num_stages"] == params.get("num_stages", 1)      # 1: the built-in's on ROCm
  assert config["num_warps"] == params.get("num_warps", 4)
  assert (case == "aliased_with_metadata") == ("serialized_metadata" in config)
  name = config["name"].decode()
  assert _kernel_signature(my_ir, name) == _kernel_signature(their_ir, name)
  assert my_ir != their_ir            # two front ends' IR (the module docstring says why)
  # the same AMD device-library (ocml) functions, named as XLA links them (no library
  # path: XLA brings its own), never an NVIDIA libdevice one
  calls = _extern_calls(my_ir)
  assert calls == _extern_calls(their_ir)
  assert all(symbol.startswith("__ocml_") and not path for symbol, _, path in calls), calls
  if case == "device_library":
    assert {"__ocml_sin_f32", "__ocml_tanh_f32", "__ocml_pow_f32"} <= {c[0] for c in calls}


def test_the_rocm_path_lowers_without_jaxs_triton_backend_or_a_rocm_plugin():
  """No comparison here, so it holds where JAX's Triton backend is gone: a pallas-prof call
  lowers for ROCm on a CPU-only jaxlib, with the kernel compiled for the mesh's gfx arch."""
  x = np.linspace(-1, 1, 256, dtype=np.float32)
  call = pl.pallas_call(_add_one, out_shape=S((256,), jnp.float32),
                        compiler_params=plgpu.CompilerParams())
  [mine] = _custom_calls(_export_for_rocm(call, x, arch="gfx90a"))
  assert mine["target"] == rocm.XLA_TRITON_TARGET and mine["backend_config"]["name"] == b"_add_one"
  assert _kernel_signature(mine["backend_config"]["ir"], "_add_one") == ["!tt.ptr<f32>"] * 2
  compiled = [k for k in rocm._compiled.values() if k.name == "_add_one"]
  assert {k.arch for k in compiled} >= {"gfx90a"}
  assert all(k.hsaco[:4] == b"\x7fELF" for k in compiled)      # Triton's AMD binary
  # with a DWARF line table naming the generated file: what a PC sample's offset would be
  # mapped through to a generated line and an equation (docs/rocm.md, profiling)
  gk = next(r.generated for r in kernel_registry.find("_add_one"))
  assert all(b".debug_line" in k.hsaco and os.path.basename(gk.path).encode() in k.hsaco
             for k in compiled)


def _atomic_counter(x_ref, o_ref):
  plgpu.atomic_add(o_ref, (slice(None),), x_ref[...])


def test_what_xlas_triton_call_cannot_run_is_refused_at_the_users_line():
  x = np.arange(16, dtype=np.float32)
  counter = pl.pallas_call(_atomic_counter, out_shape=S((16,), jnp.float32),
                           compiler_params=plgpu.CompilerParams())
  with pytest.raises(pallas_prof.LoweringError) as info:
    _export_for_rocm(counter, x)
  text = str(info.value)
  assert "output 0 (o_ref) must start at zero" in text, text
  assert "input_output_aliases" in text and __file__ in text, text
  # what the hint says works: a zero-filled input aliased to the output
  aliased = pl.pallas_call(lambda x_ref, z_ref, o_ref: _atomic_counter(x_ref, o_ref),
                           out_shape=S((16,), jnp.float32), input_output_aliases={1: 0},
                           compiler_params=plgpu.CompilerParams())
  [call] = _custom_calls(_export_for_rocm(aliased, x, np.zeros(16, np.float32)))
  assert call["target"] == rocm.XLA_TRITON_TARGET
  # nothing of the refusal stays behind: the same call runs on the CPU
  np.testing.assert_array_equal(counter(x), x)
  bounds.set_check_bounds(True)
  try:
    plain = pl.pallas_call(_add_one, out_shape=S((16,), jnp.float32),
                           compiler_params=plgpu.CompilerParams())
    with pytest.raises(pallas_prof.LoweringError, match="bounds-checked mode on ROCm"):
      _export_for_rocm(plain, x)
  finally:
    bounds.set_check_bounds(False)
  np.testing.assert_array_equal(plain(x), x + 1)


def test_ir_that_jaxlibs_triton_cannot_read_is_named_with_both_versions(monkeypatch):
  real = rocm.compile_for_gfx

  def damaged(gk, arch):
    kernel = real(gk, arch)
    return rocm.AmdKernel(kernel.name, arch, kernel.ttir.replace("tt.return", "tt.frobnicate"),
                          kernel.hsaco, kernel.metadata)

  monkeypatch.setattr(rocm, "compile_for_gfx", damaged)
  x = np.arange(16, dtype=np.float32)
  call = pl.pallas_call(_add_one, out_shape=S((16,), jnp.float32),
                        compiler_params=plgpu.CompilerParams())
  with pytest.raises(pallas_prof.LoweringError) as info:
    _export_for_rocm(call, x)
  text = str(info.value)
  assert "tt.frobnicate" in text and "cannot be read by the Triton inside jaxlib" in text, text
  assert f"jaxlib {jax.__version__}" in text and "made by triton" in text, text
  assert "hint:" in text and __file__ in text, text
  monkeypatch.undo()                   # the damaged IR was never kept: it lowers again
  [mine] = _custom_calls(_export_for_rocm(call, x))
  assert _kernel_signature(mine["backend_config"]["ir"], "_add_one") == ["!tt.ptr<f32>"] * 2


@pytest.fixture
def fresh_compiles(monkeypatch, tmp_path):
  """No compile remembered, in this process or on disk: the next lowering compiles."""
  from pallas_prof.backend.compiling import compile as backend_compile
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.setattr(rocm, "_compiled", {})
  backend_compile.clear_memory_cache()
  yield
  backend_compile.clear_memory_cache()


def test_a_kernel_triton_cannot_compile_for_amd_is_named_with_its_arch(monkeypatch,
                                                                      fresh_compiles):
  """Triton's failure, made up in this process (PALLAS_PROF_COMPILE_WORKER=0 compiles here,
  through the same compile as the worker's), is the compile's CompileError with the arch."""
  import triton

  def refuse(src, target=None, options=None):
    raise RuntimeError("PassManager::run failed (a made-up AMD backend failure)")

  monkeypatch.setenv("PALLAS_PROF_COMPILE_WORKER", "0")
  monkeypatch.setattr(triton, "compile", refuse)
  x = np.arange(256, dtype=np.float32)
  call = _plus_one_call()
  with pytest.raises(pallas_prof.CompileError) as info:
    _export_for_rocm(call, x, arch="gfx90a")
  text = str(info.value)
  assert "cannot compile kernel `plus_one`" in text, text
  assert "target: AMD gfx90a" in text and "not checked on AMD hardware" in text, text
  assert "a made-up AMD backend failure" in text and __file__ in text, text
  assert "hint:" in text, text
  monkeypatch.undo()                   # the failure was not kept: the call lowers now
  [mine] = _custom_calls(_export_for_rocm(call, x, arch="gfx90a"))
  assert mine["target"] == rocm.XLA_TRITON_TARGET


@pytest.mark.skipif(os.environ.get("PALLAS_PROF_COMPILE_WORKER") == "0",
                    reason="PALLAS_PROF_COMPILE_WORKER=0 asks for compiles in this process")
def test_the_amd_compile_runs_in_the_compile_worker_not_in_the_users_process(
    monkeypatch, fresh_compiles):
  """A crash of Triton's AMD backend must end the worker, not the user's program: Triton's
  compile is never called in this process (tests/faults/test_rocm_compile.py kills it)."""
  import triton
  from pallas_prof.backend.compiling import compile_worker
  here = []
  monkeypatch.setattr(triton, "compile", lambda *a, **k: here.append(a) or 1 / 0)
  [mine] = _custom_calls(_export_for_rocm(_plus_one_call(), np.arange(256, dtype=np.float32),
                                          arch="gfx90a"))
  assert here == [] and mine["target"] == rocm.XLA_TRITON_TARGET
  assert _kernel_signature(mine["backend_config"]["ir"], "plus_one") == ["!tt.ptr<f32>"] * 2
  [kernel] = rocm._compiled.values()
  assert kernel.arch == "gfx90a" and kernel.hsaco[:4] == b"\x7fELF"
  assert compile_worker._worker.proc.pid != os.getpid()
  assert compile_worker._worker.proc.poll() is None          # the worker that compiled it


def _plus_one_call():
  """A new pallas_call each time (JAX keeps a lowering per function, whichever backend
  made it)."""
  def plus_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0
  return pl.pallas_call(plus_one, out_shape=S((256,), jnp.float32),
                        compiler_params=plgpu.CompilerParams())


@pytest.mark.skipif(jax_plgpu() is None, reason=JAX_TRITON_GONE + ": nothing to route to")
def test_routing_to_the_builtin_on_rocm_keeps_its_num_stages():
  """route_to_builtin(True) compares the two backends on one program: on ROCm both take
  JAX's default there (num_stages=1), not the CUDA default."""
  x = np.linspace(-1, 1, 256, dtype=np.float32)
  [ours] = _custom_calls(_export_for_rocm(_plus_one_call(), x))
  compiled = len(rocm._compiled)
  pallas_call_rule.route_to_builtin(True)
  try:
    [theirs] = _custom_calls(_export_for_rocm(_plus_one_call(), x))
  finally:
    pallas_call_rule.route_to_builtin(False)
  assert len(rocm._compiled) == compiled          # it did route: pallas-prof compiled nothing
  assert ours["backend_config"]["num_stages"] == theirs["backend_config"]["num_stages"] == 1


class _AmdDevice:
  """What JAX's ROCm plugin reports for an MI300X: its arch, with feature flags, where a
  CUDA device has its compute capability ("9.0")."""
  platform = "gpu"
  device_kind = "AMD Instinct MI300X"
  compute_capability = "gfx942:sramecc+:xnack-"


def test_an_amd_device_is_read_as_its_arch_not_as_a_compute_capability(monkeypatch):
  """install() and the CUDA path ask for the GPU's compute capability: an AMD device's
  `gfx942` made int() fail (ValueError) in pallas_prof.install() on a ROCm machine."""
  from pallas_prof import triton as pallas_prof_triton
  from pallas_prof.backend import compat
  monkeypatch.setattr(jax, "local_devices", lambda *a, **k: [_AmdDevice()])
  monkeypatch.setattr(jax, "devices", lambda *a, **k: [_AmdDevice()])
  monkeypatch.setattr(compat, "backends_initialized", lambda: True)
  assert compat.gpu_compute_capability() is None
  assert compat.gpu_compute_capability(_AmdDevice()) is None
  monkeypatch.setenv("PALLAS_PROF_WARMUP", "0")
  was_installed = pallas_call_rule.installed()
  try:
    pallas_prof.install()
  finally:
    if not was_installed:
      pallas_prof.uninstall()
  with pytest.raises(ValueError, match="Unsupported GPU device kind: AMD Instinct MI300X"):
    pallas_prof_triton.get_gpu_info()
  assert rocm.gfx_arch() == "gfx942"               # the device's arch, without its flags
  with _abstract_gfx("gfx90a"):
    assert rocm.gfx_arch() == "gfx90a"             # an abstract mesh's device comes first


def test_tma_asked_for_on_rocm_warns_once_at_the_users_line_and_lowers_plain():
  call = pl.pallas_call(_add_one, out_shape=S((256,), jnp.float32),
                        compiler_params=plgpu.CompilerParams(tma=True))
  with pytest.warns(pallas_call_rule.TmaFallbackWarning) as caught:
    [mine] = _custom_calls(_export_for_rocm(call, np.arange(256, dtype=np.float32)))
  assert len(caught) == 1 and caught[0].filename == __file__, [str(w) for w in caught]
  assert "TMA is NVIDIA's" in str(caught[0].message) and "on ROCm" in str(caught[0].message)
  assert mine["target"] == rocm.XLA_TRITON_TARGET
  assert b"descriptor" not in mine["backend_config"]["ir"]      # plain loads and stores
