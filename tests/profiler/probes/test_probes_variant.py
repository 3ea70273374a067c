"""The probed variant runs as the kernel it measures: same warps and stages, and the
same launch order and TMA use, whether the call asked for them or a tuner chose them."""
from __future__ import annotations

import types

import pytest

import pallas_prof
from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.profiler.probes import probing

from ..conftest import lowered_record, sds


def _scale_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def _grouped_call(group):
  import jax
  from jax.experimental import pallas as pl
  params = pallas_prof.CompilerParams(launch_group=group) if group else None
  return pl.pallas_call(_scale_kernel, grid=(4, 6),
                        in_specs=[pl.BlockSpec((8, 16), lambda i, j: (i, j))],
                        out_specs=pl.BlockSpec((8, 16), lambda i, j: (i, j)),
                        out_shape=jax.ShapeDtypeStruct((32, 96), "float32"),
                        compiler_params=params)


@pytest.mark.parametrize("how", ["asked by the call", "chosen by a tuner"])
def test_the_probed_variant_keeps_the_launch_order_of_the_kernel_it_measures(installed, how):
  import jax
  rec = lowered_record(jax.jit(_grouped_call(2 if how == "asked by the call" else 0)),
                       sds((32, 96), "float32"))
  # what runs: the call's own kernel, or the tuner's grouped choice (relowered as the
  # tuner does)
  runs = rec.generated if how == "asked by the call" else rec.relower(launch_group=2)
  assert runs.launch_group == 2
  target = types.SimpleNamespace(name=runs.name, compiled=compile_kernel(runs, ("cuda", 90)),
                                 aliases=(), relower=rec.relower)
  probed, ck = probing.variant(target)
  assert probed.launch_group == 2 and probed.probe_layout is not None
  assert tuple(probed.launch_grid) == tuple(runs.launch_grid)
  assert ck.num_warps == target.compiled.num_warps
