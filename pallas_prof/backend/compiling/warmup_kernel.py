"""Tiny kernels compiled in the background when pallas-prof is installed on a GPU
machine, while the user's program is still starting: pallas_prof_warmup in a child
of the compile worker (it prepares the libdevice for expf, which softmax-like
kernels share, on disk), pallas_prof_warmup_tiny in the worker itself while no
request waits (a process's first compile pays one-time costs of Triton and LLVM
that a compile of anything pays)."""
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def pallas_prof_warmup(x_ref, y_ref, o_ref):
    rows = tl.arange(0, 16)
    cols = tl.arange(0, 16)
    x = tl.load(x_ref + rows[:, None] * 16 + cols[None, :])
    y = tl.load(y_ref + rows[:, None] * 16 + cols[None, :])
    acc = tl.dot(x, y, out_dtype=tl.float32)
    m = tl.reduce(acc, 1, _warmup_max)
    e = libdevice.exp(acc - m[:, None])
    tl.store(o_ref + rows[:, None] * 16 + cols[None, :], (e / tl.sum(e, axis=1)[:, None]).to(tl.float16))


@triton.jit
def _warmup_max(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def pallas_prof_warmup_tiny(x_ref, o_ref):
    offsets = tl.arange(0, 128)
    tl.store(o_ref + offsets, tl.load(x_ref + offsets) * 2.0 + 1.0)
