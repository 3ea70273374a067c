"""The same kernels charge the same equations on every Triton (3.6 and 3.9).

Triton 3.9's LLVM nests inlining (`inlined_at` of an `inlined_at`), numbers
each line of an inline asm block from the statement's line on, and puts the
kernel's closing code on its `def` line; read as 3.6's were, 23 of 88 SASS
instructions of softmax went unattributed and its load was charged to the
reduction after it. Each test leg (Triton 3.6 and 3.9) checks these kernels
against one expectation: which equations own each kind of instruction, in
the PTX and in the SASS, and that almost every instruction has an owner.
"""
from __future__ import annotations

import jax
import pytest

from pallas_prof.backend.compiling.compile import compile_kernel
from pallas_prof.profiler.static import correlate

from ..conftest import lowered_record, sds

CATEGORIES = ("global_load", "global_store", "special_function", "tensor_core", "shuffle")

# The owners of each kind of instruction. sin and cos load libdevice's tables of
# 2/pi from global memory: those loads are theirs. The SASS divides (a reciprocal
# and its refinement) of softmax and attention belong to `div`; their PTX is
# `div.rn`, not a special-function instruction.
EXPECTED = {
    "softmax": {"ptx:global_load": ["get"], "ptx:global_store": ["swap"],
                "ptx:shuffle": ["reduce_max", "reduce_sum"], "ptx:special_function": ["exp"],
                "sass:global_load": ["get"], "sass:global_store": ["swap"],
                "sass:shuffle": ["reduce_max", "reduce_sum"],
                "sass:special_function": ["div", "exp"]},
    "layer_norm": {"ptx:global_load": ["get"], "ptx:global_store": ["swap"],
                   "ptx:shuffle": ["reduce_sum"], "ptx:special_function": ["rsqrt"],
                   "sass:global_load": ["get"], "sass:global_store": ["swap"],
                   "sass:shuffle": ["reduce_sum"], "sass:special_function": ["rsqrt"]},
    "flash_attention": {"ptx:global_load": ["get"], "ptx:global_store": ["swap"],
                        "ptx:shuffle": ["reduce_max", "reduce_sum"],
                        "ptx:special_function": ["exp"], "ptx:tensor_core": ["dot_general"],
                        "sass:global_load": ["get"], "sass:global_store": ["swap"],
                        "sass:shuffle": ["reduce_max", "reduce_sum"],
                        "sass:special_function": ["div", "exp"],
                        "sass:tensor_core": ["dot_general"]},
    "ka_loop": {"ptx:global_load": ["cos", "get", "sin"], "ptx:global_store": ["swap"],
                "sass:global_load": ["cos", "get", "sin"], "sass:global_store": ["swap"]},
    "ka_matmul": {"ptx:global_load": ["get"], "ptx:global_store": ["swap"],
                  "ptx:tensor_core": ["dot_general"], "sass:global_load": ["get"],
                  "sass:global_store": ["swap"], "sass:tensor_core": ["dot_general"]},
}


def _record(name, examples):
  import importlib
  if name == "softmax":
    return lowered_record(examples["softmax"].softmax, sds((4, 128), "float32"))
  if name == "layer_norm":
    return lowered_record(examples["layer_norm"].layer_norm, sds((8, 256), "float32"),
                          sds((256,), "float32"), sds((256,), "float32"))
  if name == "flash_attention":
    # not conftest's flash_kernels shape: a kernel jax has lowered before is found by
    # its avals there, and one of each causality must stay one
    q = sds((1, 96, 1, 32), "float16")
    return lowered_record(examples["flash_attention"].flash_attention, q, q, q, causal=True,
                          block_q=32, block_k=32)
  ka = importlib.import_module("tests.profiler.known_answer")
  if name == "ka_loop":
    return lowered_record(jax.jit(lambda x: ka._rows(x.shape, 8, ka.ka_loop_kernel, x)),
                          sds((64, 256), "float32"))
  return lowered_record(jax.jit(lambda a, b: ka.matmul(a, b, 64, 64, 32, 4)),
                        sds((128, 128), "bfloat16"), sds((128, 128), "bfloat16"))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_kind_of_instruction_belongs_to_the_same_equations(name, examples):
  rec = _record(name, examples)
  ck = compile_kernel(rec.generated, ("cuda", 90))
  corr = correlate.correlate(ck)
  owners = {}
  for stage in ("ptx", "sass"):
    for category in CATEGORIES:
      found = {rec.generated.eqns[i.eqn].primitive if i.eqn is not None else None
               for i in getattr(corr, stage) if category in i.categories}
      if found:
        owners[f"{stage}:{category}"] = sorted(found, key=str)
  assert owners == EXPECTED[name]
  profile = corr.profile
  # the prologue (parameter loads) and the program id's read own no equation
  assert profile.unattributed_instructions <= max(5, 0.02 * profile.sass_instructions), (
      profile.unattributed_instructions, profile.sass_instructions)
