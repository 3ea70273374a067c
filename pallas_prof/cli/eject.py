"""Writes a generated kernel as a standalone Triton program with its own launcher.

The ejected file needs only numpy and triton (no JAX, no pallas-prof):

    python kernel.py --interpret [--inputs in.npz] [--output out.npz]   # CPU, Triton's interpreter
    python kernel.py [--inputs in.npz] [--output out.npz]               # NVIDIA GPU (cuda-python)

Inputs default to fresh random values; `--inputs` takes an .npz with one
array per input parameter (by name), `--output` writes one per output.
"""
from __future__ import annotations

import inspect
import os

from ..backend import interpreter_libdevice

_LAUNCHER = r'''

# ---------------------------------------------------------------------------
# Launcher written by `pallas-prof show --eject`. Everything above this line is
# the kernel exactly as pallas-prof generated it.
# ---------------------------------------------------------------------------
KERNEL = {kernel_name!r}
PARAMS = {params!r}          # (name, dtype, shape, role)
GRID = {grid!r}
NUM_WARPS = {num_warps!r}
NUM_STAGES = {num_stages!r}
ALIASES = {aliases!r}        # output index -> input index whose value it starts from


def _numpy_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def _random(name, dtype, shape, rng):
    dt = _numpy_dtype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.integer):
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), size=shape, endpoint=True).astype(dt)
    return rng.uniform(-2, 2, size=shape).astype(np.float32).astype(dt)


class _HostArg:
    """What Triton's interpreter needs of a tensor, over a numpy array."""

    class _Storage:
        def __init__(self, a):
            self.a = a

        def data_ptr(self):
            return self.a.ctypes.data

        def cpu(self):
            return self

        def copy_(self, other):
            return self

    def __init__(self, array):
        self.array = array
        self.dtype = "torch." + ("bool" if array.dtype == np.bool_ else array.dtype.name)

    def data_ptr(self):
        return self.array.ctypes.data

    def untyped_storage(self):
        return self._Storage(self.array)

    def new_empty(self, *a, **k):
        return self

    def set_(self, *a, **k):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)


class _DeviceArg:
    """A device buffer for Triton's launcher: a pointer and a dtype."""

    def __init__(self, ptr, dtype):
        self.ptr = int(ptr)
        self.dtype = "torch." + ("bool" if dtype == "bool" else dtype)

    def data_ptr(self):
        return self.ptr


def _outputs_like(inputs):
    outs = []
    for i, (name, dtype, shape, role) in enumerate(p for p in PARAMS if p[3] == "output"):
        src = ALIASES.get(i)
        outs.append(np.array(inputs[src], copy=True) if src is not None
                    else np.zeros(shape, _numpy_dtype(dtype)))
    return outs


def run_interpreted(inputs):
    _install_interpreter_shims()
    outputs = _outputs_like(inputs)
    kernel = globals()[KERNEL]
    kernel[GRID](*[_HostArg(a) for a in inputs], *[_HostArg(o) for o in outputs])
    return outputs


def run_gpu(inputs):
    from cuda.bindings import driver as cu

    def check(result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA error {{err}}")
        return rest[0] if len(rest) == 1 else rest

    check(cu.cuInit(0))
    ctx = check(cu.cuDevicePrimaryCtxRetain(check(cu.cuDeviceGet(0))))
    check(cu.cuCtxSetCurrent(ctx))
    outputs = _outputs_like(inputs)
    buffers = []
    for array in list(inputs) + outputs:
        ptr = check(cu.cuMemAlloc(max(array.nbytes, 1)))
        check(cu.cuMemcpyHtoD(ptr, array.ctypes.data, array.nbytes))
        buffers.append(ptr)
    dtypes = [p[1] for p in PARAMS]
    kernel = globals()[KERNEL]
    kernel[GRID](*[_DeviceArg(b, d) for b, d in zip(buffers, dtypes)],
                 num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    check(cu.cuCtxSynchronize())
    for out, ptr in zip(outputs, buffers[len(inputs):]):
        check(cu.cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes))
    for ptr in buffers:
        check(cu.cuMemFree(ptr))
    return outputs


def _install_interpreter_shims():
    """libdevice calls run on numpy under the interpreter; NumPy >= 2.4 needs
    int(array.reshape(-1)[0]) for scalar loop bounds; bf16 dots are widened."""
    global libdevice
    module = types.ModuleType("libdevice_numpy")
    exec(_LIBDEVICE_SOURCE, module.__dict__)
    libdevice = module
    from triton.runtime import interpreter
    original_patch = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda t: int(np.asarray(t.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patch_lang_tensor
    original_dot = interpreter.InterpreterBuilder.create_dot

    def widen(h):
        if getattr(h.dtype, "scalar", h.dtype) == tl.bfloat16:
            bits = h.data.astype(np.uint32) << np.uint32(16)
            return interpreter.TensorHandle(bits.view(np.float32), tl.float32)
        return h

    def create_dot(builder, a, b, d, input_precision, max_num_imprecise_acc):
        return original_dot(builder, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    interpreter.InterpreterBuilder.create_dot = create_dot


def _load_inputs(path, rng):
    arrays = np.load(path) if path else None
    inputs = []
    for name, dtype, shape, role in PARAMS:
        if role != "input":
            continue
        if arrays is not None:
            a = arrays[name]
            if dtype == "bfloat16" and a.dtype == np.uint16:
                a = a.view(_numpy_dtype(dtype))
            inputs.append(np.ascontiguousarray(a.astype(_numpy_dtype(dtype)) if a.dtype != _numpy_dtype(dtype) else a))
        else:
            inputs.append(_random(name, dtype, shape, rng))
    return inputs


def main(argv):
    import argparse
    parser = argparse.ArgumentParser(description=f"standalone Triton kernel {{KERNEL}}")
    parser.add_argument("--interpret", action="store_true", help="run under Triton's interpreter (CPU)")
    parser.add_argument("--inputs", help=".npz with one array per input parameter")
    parser.add_argument("--output", help="write the outputs to this .npz")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    inputs = _load_inputs(args.inputs, np.random.default_rng(args.seed))
    outputs = run_interpreted(inputs) if INTERPRET else run_gpu(inputs)
    names = [p[0] for p in PARAMS if p[3] == "output"]
    for name, out in zip(names, outputs):
        print(f"{{name}}: shape {{out.shape}} {{out.dtype}}, mean {{np.asarray(out, np.float64).mean():.6g}}")
    if args.output:
        np.savez(args.output, **{{n: (o.view(np.uint16) if o.dtype.name == "bfloat16" else o)
                                 for n, o in zip(names, outputs)}})


_LIBDEVICE_SOURCE = {libdevice_source!r}

if __name__ == "__main__":
    main([a for a in sys.argv[1:] if a != "--interpret"] + (["--interpret"] if INTERPRET else []))
'''

_PREAMBLE = '''#!/usr/bin/env python3
"""Triton kernel `{name}` ejected by pallas-prof from {source_info}.

A standalone program: needs numpy and triton only (cuda-python on a GPU).

    python {file} --interpret [--inputs in.npz] [--output out.npz]   # CPU
    python {file} [--inputs in.npz] [--output out.npz]               # NVIDIA GPU
"""
import os
import sys
import types

INTERPRET = "--interpret" in sys.argv or os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"   # before importing triton

import numpy as np
'''


def eject(gk, path: str) -> str:
  """Writes `gk` (a GeneratedKernel) to `path` as a runnable program."""
  body = gk.source
  params = [(p.name, p.dtype, tuple(p.shape), p.role) for p in gk.params]
  text = (_PREAMBLE.format(name=gk.name, source_info=gk.source_info, file=os.path.basename(path))
          + "\n" + body + _LAUNCHER.format(
              kernel_name=gk.name, params=params, grid=tuple(gk.launch_grid),
              num_warps=gk.num_warps, num_stages=gk.num_stages, aliases={},
              libdevice_source=_libdevice_source()))
  with open(path, "w") as f:
    f.write(text)
  return path


def _libdevice_source() -> str:
  source = inspect.getsource(interpreter_libdevice)
  return source
