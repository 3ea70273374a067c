"""What pallas-prof knows of Triton's compiler, as tables: which kind of op each
of its C++ lowering files and passes handles, which jaxpr primitives lower to
each kind of op, and whose fault a kind of failure is.

compile_diagnostics.py reads a failure through these; workarounds.py keeps
its own table of what to retry per op kind.
"""
from __future__ import annotations

import re

# a C++ source file of Triton's (as an assertion names it, without .cpp) -> the op it lowers
OPS_OF_SOURCE = {
    "ScanOpToLLVM": "tt.scan",
    "ReduceOpToLLVM": "tt.reduce",
    "ReduceScanCommon": "tt.reduce",
    "ConvertLayoutOpToLLVM": "ttg.convert_layout",
    "DotOpToLLVM": "tt.dot",
    "MMAv2": "tt.dot",
    "MMAv5": "tt.dot",
    "WGMMA": "tt.dot",
    "FMADotUtility": "tt.dot",
    "LoadStoreOpToLLVM": "tt.load",
    "HistogramOpToLLVM": "tt.histogram",
    "GatherOpToLLVM": "tt.gather",
    "ViewOpToLLVM": "tt.reshape",
    "MemoryOpToLLVM": "ttg.local_alloc",
    "AssertOpToLLVM": "tt.assert",
    "PrintOpToLLVM": "tt.print",
}

# a pass of Triton's (as MLIR's "Pipeline failed while executing [`X`]" names it) -> its op
OPS_OF_PASS = {
    "AccelerateMatmul": "tt.dot",
    "OptimizeDotOperands": "tt.dot",
    "RemoveLayoutConversions": "ttg.convert_layout",
    "ReduceDataDuplication": "ttg.convert_layout",
    "Pipeline": "scf.for",
    "Coalesce": "tt.load",
}

# an op kind -> the names its ops have in TTIR/TTGIR (a Hopper dot is a warp-group dot there)
IR_NAMES = {
    "tt.dot": ("tt.dot", "ttng.warp_group_dot", "ttng.tc_gen5_mma"),
    "tt.load": ("tt.load", "tt.descriptor_load"),
    "tt.store": ("tt.store", "tt.descriptor_store"),
}

# an op kind -> the jaxpr primitives whose rules emit it (when no IR says which ops)
PRIMITIVES_OF_OP = {
    "tt.scan": ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"),
    "tt.reduce": ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
                  "reduce_or", "reduce_xor", "argmax", "argmin"),
    "tt.dot": ("dot_general",),
    "tt.reshape": ("reshape", "squeeze"),
    "tt.load": ("get", "load", "masked_load"),
    "tt.store": ("swap", "store", "masked_swap"),
    "tt.histogram": (),
    "scf.for": ("scan", "fori_loop", "while"),
}

# an op kind -> what a user can change at their line to keep Triton off the failing path
ADVICE_OF_OP = {
    "tt.scan": ("scan a 1-D array and broadcast the result (jnp.cumsum(d)[:, None] rather "
                "than jnp.cumsum(d[:, None], axis=0)): a scanned block with a size-1 axis is "
                "a known trigger of Triton 3.6's scan lowering; another num_warps may also "
                "avoid it"),
    "tt.reduce": "reduce a block of another shape (no size-1 axes), or try another num_warps",
    "tt.dot": ("give the dot blocks of other shapes (multiples of 16), or try another "
               "num_warps or num_stages"),
    "ttg.convert_layout": "try another num_warps, or blocks of another shape",
    "scf.for": "try num_stages=1 (no software pipelining of the loop)",
}

# what says the kernel asks for more than the GPU (or Triton) allows: the kernel's to change
_RESOURCES = re.compile(r"out of resource|shared memory|too much shared data|numel|"
                        r"too many resources|registers? .*exceed|exceeds? .*registers",
                        re.IGNORECASE)


def asks_too_much(text: str) -> bool:
  """Whether a failure says the kernel asks for more than the GPU (or Triton) allows."""
  return bool(_RESOURCES.search(text))


def fault_of(kind: str, stage: str, text: str, *, has_inline_asm: bool) -> tuple[str, str]:
  """("triton" | "kernel" | "pallas-prof", why) for a failure of `kind` in `stage`;
  `text`: the error's message and the diagnostics read from its output (not IR dumps).

  A compiler that takes its input and then asserts, dies, or emits PTX that
  ptxas rejects has a bug whatever that input was; one that says the input
  asks for more than the hardware has is right, and the kernel must change."""
  if kind == "resources" or (kind not in ("crash", "assertion") and asks_too_much(text)):
    return "kernel", ("the kernel asks for more than the GPU allows (shared memory, "
                      "registers, or elements in one block)")
  if kind == "crash":
    return "triton", ("Triton's compiler died on code its front end had accepted: a "
                      "compiler must refuse bad input with an error, never crash")
  if kind == "assertion":
    return "triton", ("one of Triton's internal consistency checks failed: a bug of "
                      "Triton's, whatever the kernel")
  if kind == "llvm error":
    return "triton", "LLVM stopped inside Triton's compile of code its front end accepted"
  if kind == "ptxas":
    if has_inline_asm:
      return "kernel", ("ptxas rejected the PTX, and the kernel has inline assembly of its "
                        "own (elementwise_inline_asm): the likeliest cause")
    return "triton", "Triton generated PTX that ptxas rejects"
  if kind == "front end":
    return "pallas-prof", ("Triton's front end rejected the source pallas-prof generated: "
                           "a bug of pallas-prof's lowering (please report it with the "
                           "generated source)")
  return "triton", f"a pass of Triton's failed in the {stage} stage on code its front end accepted"
