"""Compiling for GPUs other than sm_90 on a machine without one (issue 40): the target
value (backend/targets.py), its cache keys, AMD compiles (hsaco, their resources),
and the refusals of what a target lacks (failures/target_features.py)."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.experimental import pallas as pl

import pallas_prof
from pallas_prof.backend import kernel_registry
from pallas_prof.backend.artifacts import DEFAULT_TARGET, CompiledKernel, target_text
from pallas_prof.backend.compiling import compile as pcompile
from pallas_prof.backend.compiling import compile_cache
from pallas_prof.backend.compiling.for_targets import compile_for
from pallas_prof.backend.targets import KNOWN, Target, UnknownTarget, as_target, parse_target
from testkit.target_kernels import fp8_convert as _fp8_convert
from testkit.target_kernels import mm as _mm

pallas_prof.install()


@pytest.mark.parametrize("text,expected", [
    ("sm_80", Target("cuda", 80)), ("sm80", Target("cuda", 80)), ("cuda:80", Target("cuda", 80)),
    ("SM_90", Target("cuda", 90)), ("sm_90a", Target("cuda", 90)),
    ("gfx942", Target("hip", "gfx942")), ("hip:gfx942", Target("hip", "gfx942")),
    (" GFX950 ", Target("hip", "gfx950"))])
def test_target_text_forms(text, expected):
  assert parse_target(text) == expected


def test_warp_sizes_follow_triton():
  assert parse_target("sm_80").warp_size == 32
  assert parse_target("gfx942").warp_size == 64      # CDNA: a wavefront of 64
  assert parse_target("gfx1100").warp_size == 32     # RDNA: waves of 32, as Triton's hip backend
  assert parse_target("gfx942").stages[-2:] == ("amdgcn", "hsaco")


@pytest.mark.parametrize("typo,near", [("sm_8O", "sm_80"), ("gfx94", "gfx942"), ("sm_81", "sm_80"),
                                       ("gfx943", "gfx942")])
def test_a_typo_names_the_known_targets(typo, near):
  with pytest.raises(UnknownTarget) as info:
    parse_target(typo)
  text = str(info.value)
  assert repr(typo) in text and f"did you mean {near}?" in text
  assert all(t.name in text for t in KNOWN)


def test_the_default_target_is_the_pair_it_was():
  assert DEFAULT_TARGET == ("cuda", 90) and hash(DEFAULT_TARGET) == hash(("cuda", 90))
  assert target_text(DEFAULT_TARGET) == "cuda:90"
  assert as_target(["cuda", 90]) == DEFAULT_TARGET          # a saved target (compiled.json)
  assert as_target(("hip", "gfx942")).text == "hip:gfx942"
  with pytest.raises(UnknownTarget, match="is not a GPU target"):
    as_target(("hip", 942))


def _lower(kernel, args, name, **kw):
  jax.jit(pl.pallas_call(kernel, name=name, **kw)).lower(*args)
  return kernel_registry.find(name)[-1].generated


def _add(x_ref, y_ref, o_ref):
  o_ref[...] = x_ref[...] + y_ref[...]


def _vector_add():
  x = jnp.ones((4096,), jnp.float32)
  spec = pl.BlockSpec((1024,), lambda i: (i,))
  return _lower(_add, (x, x), "targets_add", grid=(4,), in_specs=[spec, spec], out_specs=spec,
                out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))


def test_cache_keys_include_the_target():
  gk = _vector_add()
  keys = {t: compile_cache.compile_key(gk, parse_target(t)) for t in ("sm_80", "sm_90", "gfx942",
                                                                       "gfx950")}
  assert len(set(keys.values())) == 4
  assert keys["sm_90"] == compile_cache.compile_key(gk, ("cuda", 90))
  assert keys["gfx942"] == compile_cache.compile_key(gk, "hip:gfx942")
  # an AMD compile takes none of NVIDIA's libdevice, reflect flag or PTX version
  assert set(compile_cache.compile_options(gk, parse_target("gfx942"))) == \
      {"num_warps", "num_stages", "enable_fp_fusion"}


def test_sm80_and_gfx942_compile_with_their_resources():
  gk = _vector_add()
  nv = compile_for(gk, "sm_80", use_disk_cache=False)
  assert nv.status == "compiled", nv.reason
  assert ".target sm_80" in nv.compiled.ptx and nv.compiled.cubin[:4] == b"\x7fELF"
  assert nv.compiled.registers > 0 and nv.figures()["spill_unit"] == "bytes"
  amd = compile_for(gk, "gfx942", use_disk_cache=False)
  assert amd.status == "compiled", amd.reason
  ck = amd.compiled
  assert ck.target == Target("hip", "gfx942") and list(ck.stage_seconds)[-2:] == ["amdgcn", "hsaco"]
  assert ck.asm["hsaco"][:4] == b"\x7fELF" and ".amdgcn_target" in ck.asm["amdgcn"]
  assert "gfx942" in ck.asm["amdgcn"] and ck.metadata["target"]["warp_size"] == 64
  res = ck.resources()
  assert res["target"] == "hip:gfx942" and res["registers"] == res["vgprs"] > 0
  assert res["sgprs"] > 0 and res["vgpr_spills"] == 0 and res["lds_bytes"] == 0
  assert 1 <= res["occupancy_waves"] <= 16 and not ck.cubin_deferred


def test_an_amd_compile_comes_back_from_the_disk_cache(tmp_path):
  gk = _vector_add()
  compile_cache.clear_memory_cache()     # an earlier test's compile stays in memory only
  first = pcompile.compile_kernel(gk, "gfx942")
  compile_cache.clear_memory_cache()
  again = pcompile.compile_kernel(gk, "gfx942")
  assert again.cache == "disk" and again.target == Target("hip", "gfx942")
  assert again.asm["hsaco"] == first.asm["hsaco"] and isinstance(again.asm["hsaco"], bytes)
  assert dict(again.target_resources) == dict(first.target_resources)
  first.save(str(tmp_path))
  ck = CompiledKernel.load(str(tmp_path))
  assert ck.target == ("hip", "gfx942") and ck.registers == first.registers


def test_fp8_e4m3_before_sm89_is_refused_at_the_users_line():
  x = jnp.ones((128,), jnp.float32)
  gk = _lower(_fp8_convert, (x,), "targets_fp8", out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
  assert compile_for(gk, "sm_90", use_disk_cache=False).status == "compiled"
  out = compile_for(gk, "sm_80", use_disk_cache=False)
  assert out.status == "refused"
  text = str(out.error)
  assert "sm_80 has no float8_e4m3fn" in text and "sm_89" in text
  code = _fp8_convert.__code__                  # testkit/target_kernels.py
  assert f"{code.co_filename}:{code.co_firstlineno + 1}" in text   # the astype line
  assert "bfloat16 or float16" in out.error.hint
  assert out.error.fault == "kernel" and "pallas-prof's" not in text and "report it" not in text


def test_shared_memory_each_target_has():
  """One kernel: fits sm_90's shared memory and gfx950's LDS; more than sm_80 and gfx942 have."""
  a = jnp.ones((256, 256), jnp.float16)
  gk = _lower(_mm, (a, a), "targets_lds", out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
              grid=(2, 1), in_specs=[pl.BlockSpec((128, 256), lambda i, j: (i, 0)),
                                     pl.BlockSpec((256, 256), lambda i, j: (0, j))],
              out_specs=pl.BlockSpec((128, 256), lambda i, j: (i, j)))
  outs = {t: compile_for(gk, t, use_disk_cache=False) for t in ("sm_90", "sm_80", "gfx942", "gfx950")}
  assert {t: o.status for t, o in outs.items()} == {
      "sm_90": "compiled", "sm_80": "refused", "gfx942": "refused", "gfx950": "compiled"}
  assert "sm_80 allows 166912 per block" in outs["sm_80"].reason
  assert "of LDS (shared memory); gfx942 allows 65536 per block" in outs["gfx942"].reason
  assert outs["gfx950"].figures()["lds_bytes"] <= 163840
  code = _mm.__code__
  assert f"{code.co_filename}:{code.co_firstlineno + 1}" in str(outs["gfx942"].error)


def test_a_target_switch_compiles_in_a_worker_of_its_own():
  """Triton 3.6 carries an e4m3 kernel's compile for sm_90 into the next compile in the
  process: an e5m2 dot for sm_80 then got sm_89's cvt and ptxas refused it
  (bench/targets/triton_fp8_order_repro.py); each target compiles in a fresh worker."""
  x = jnp.ones((128,), jnp.float32)
  e4m3 = _lower(_fp8_convert, (x,), "targets_order_e4m3",
                out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
  e5 = jnp.ones((64, 64), jnp.float8_e5m2)
  dot = _lower(_mm, (e5, e5), "targets_order_dot", out_shape=jax.ShapeDtypeStruct((64, 64), jnp.float32))
  assert compile_for(e4m3, "sm_90", use_disk_cache=False).status == "compiled"
  out = compile_for(dot, "sm_80", use_disk_cache=False)
  assert out.status == "compiled", out.reason
  assert ".target sm_80" in out.compiled.ptx and "e5m2x2" not in out.compiled.ptx


def _rms(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) + jnp.exp(x)


def test_math_functions_link_amds_own_libraries():
  """rsqrt and exp come from a device library: NVIDIA's libdevice (prepared by pallas-prof,
  libdevice_link.py) for sm_80, Triton's ocml for gfx942, which takes none of libdevice's."""
  x = jnp.ones((8, 256), jnp.float32)
  spec = pl.BlockSpec((1, 256), lambda i: (i, 0))
  gk = _lower(_rms, (x,), "targets_rms", grid=(8,), in_specs=[spec], out_specs=spec,
              out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))
  for target in ("sm_80", "gfx942"):
    out = compile_for(gk, target, use_disk_cache=False)
    assert out.status == "compiled", out.reason
  llir = out.compiled.asm["llir"]
  assert "@llvm.amdgcn.rsq" in llir and "@__nv_" not in llir    # AMD's rsq, no libdevice


def test_an_amd_compile_says_it_has_no_ptx_or_cubin():
  """What reads PTX or a cubin (the profiler's replay, ncu) gets a sentence, not a KeyError."""
  ck = compile_for(_vector_add(), "gfx942", use_disk_cache=False).compiled
  for what in ("ptx", "cubin"):
    with pytest.raises(ValueError, match="compiled for gfx942: it has no .*amdgcn, hsaco"):
      getattr(ck, what)


def test_the_tuners_batch_compiles_for_an_amd_target():
  """compile_kernels (the tuner's candidates, compiled at once by the worker's children)
  takes a target as text too, and each candidate's compile is the AMD one."""
  x = jnp.ones((4096,), jnp.float32)
  gks = []
  for block in (512, 1024):
    spec = pl.BlockSpec((block,), lambda i: (i,))
    gks.append(_lower(_add, (x, x), f"targets_batch_{block}", grid=(4096 // block,),
                      in_specs=[spec, spec], out_specs=spec,
                      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype)))
  compile_cache.clear_memory_cache()
  out = pcompile.compile_kernels(gks, "gfx942", parallel=2)
  assert [type(ck).__name__ for ck in out] == ["CompiledKernel"] * 2, out
  assert all(ck.target == Target("hip", "gfx942") and ck.asm["hsaco"][:4] == b"\x7fELF"
             and ck.metadata["target"]["warp_size"] == 64 for ck in out)
