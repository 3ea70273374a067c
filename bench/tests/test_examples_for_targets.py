"""Every example's kernels compiled for sm_80 and gfx942 on the CPU (issue 40 item 5), on
both legs: lowered at the examples' GPU sizes (nothing runs), compiled through compile_for
as a user's deploy check would. Each compiles, with its registers and shared memory, or is
refused with the reason named; none fails."""
from __future__ import annotations

import os

import pytest

from bench.targets import matrix
from pallas_prof.backend.compiling.for_targets import compile_for

TARGETS = ("sm_80", "gfx942")
EXAMPLES = ("vector_add.py", "softmax.py", "layer_norm.py", "matmul.py", "flash_attention.py",
            "selective_scan.py", "multi_gpu.py")


@pytest.fixture(scope="module")
def example_kernels():
  return matrix.example_kernels()


def test_the_examples_lowered_are_the_examples_folders(example_kernels):
  """A new example's kernels must join the list in bench/targets/matrix.py to be checked."""
  here = os.path.dirname(os.path.abspath(__file__))
  folder = os.path.join(here, "..", "..", "examples")
  with_kernels = {f for f in os.listdir(folder) if f.endswith(".py")} - {"pipeline.py"}
  lowered = {k.label.split(" ")[0].rstrip(":") for k in example_kernels}
  assert lowered == set(EXAMPLES) and with_kernels <= lowered, \
      (lowered, with_kernels)


@pytest.mark.parametrize("target", TARGETS)
def test_each_example_compiles_or_is_refused_with_its_reason(example_kernels, target):
  answers = []
  for k in example_kernels:
    outcome = compile_for(k.gk, target, relower=k.relower, use_disk_cache=False)
    answers.append((k.label, outcome))
  failed = [f"{label}: {o.reason}" for label, o in answers if o.status == "failed"]
  assert not failed, "\n".join(failed)
  for label, o in answers:
    if o.status == "refused":
      assert o.reason and target in o.reason, (label, o.reason)
      continue
    figures = o.figures()
    assert figures["registers"] > 0 and figures["shared_bytes"] >= 0, (label, figures)
    assert figures["warp_size"] == (64 if target == "gfx942" else 32), (label, figures)
    if target == "gfx942":
      assert figures["vgprs"] > 0 and figures["spill_unit"] == "registers", (label, figures)
    else:
      assert figures["spill_unit"] == "bytes", (label, figures)
  assert any(o.status == "compiled" for _, o in answers)
