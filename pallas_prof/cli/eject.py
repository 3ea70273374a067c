"""Writes a generated kernel as a standalone Triton program with its own launcher.

The ejected file needs only numpy and triton (ml_dtypes too for bfloat16, float8
or int4 parameters; no JAX, no pallas-prof):

    python kernel.py --interpret [--inputs in.npz] [--output out.npz]   # CPU, Triton's interpreter
    python kernel.py [--inputs in.npz] [--output out.npz]               # NVIDIA GPU (cuda-python)

Inputs default to fresh random values; `--inputs` takes an .npz with one
array per input parameter (by name), `--output` writes one per output.
"""
from __future__ import annotations

import inspect
import os

from ..safe_files import refuse_special, write_atomic
from ..backend.running import (interpreter_libdevice, interpreter_memory, interpreter_reductions,
                               interpreter_runtime)

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
# the options pallas-prof compiled with (f32 denormals kept in libdevice, multiply and add
# not fused unless the call asked): without them Triton flushes denormals to zero
OPTIONS = {options!r}
LIBDEVICE = {libdevice!r}    # XLA's libdevice, where it was when ejected; else Triton's own
ALIASES = {aliases!r}        # output index -> input index whose value it starts from
ZEROED = {zeroed!r}          # bounds-checked build: starting values that are zeros, not poison
INITIAL_OF = {initial_of!r}  # bounds-checked build: output -> the parameter of its starting values
CHECK_OFFSET = {check_offset!r}
CHECK_SITES = {check_sites!r}   # bounds-checked build: what each flag record checks


PACKED4 = ("int4", "uint4")  # two elements a byte in the kernel's buffers, as XLA's GPU keeps them


def _numpy_dtype(name):
    try:
        return np.dtype(name)
    except TypeError:           # bfloat16, float8_*, int4, uint4: ml_dtypes' types
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))


def _iinfo(dtype):
    if dtype in PACKED4:
        import ml_dtypes        # numpy's iinfo does not know int4 (numpy kind 'V')
        return ml_dtypes.iinfo(_numpy_dtype(dtype))
    return np.iinfo(_numpy_dtype(dtype))


def _random(name, dtype, shape, rng):
    dt = _numpy_dtype(dtype)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.issubdtype(dt, np.integer) or dtype in PACKED4:
        info = _iinfo(dtype)
        return rng.integers(max(int(info.min), -100), min(int(info.max), 100), size=shape,
                            endpoint=True).astype(dt)
    return rng.uniform(-2, 2, size=shape).astype(np.float32).astype(dt)


def _pack4(a):
    """int4/uint4 values (one a byte in numpy) to the kernel's layout: element 2k in the
    low nibble of byte k, in row-major order."""
    nibbles = a.reshape(-1).view(np.uint8) & 0xF
    if nibbles.size % 2:
        nibbles = np.concatenate([nibbles, np.zeros(1, np.uint8)])
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)


def _unpack4(packed, dtype, shape):
    n = int(np.prod(shape, dtype=np.int64))
    nibbles = np.empty(packed.size * 2, np.uint8)
    nibbles[0::2] = packed & 0xF
    nibbles[1::2] = packed >> 4
    values = nibbles[:n].astype(np.int8)
    if dtype == "int4":
        values = ((values ^ 8) - 8).astype(np.int8)
    return values.astype(_numpy_dtype(dtype)).reshape(shape)


def _buffer(dtype, shape, fill):
    """A parameter's buffer holding `fill` everywhere (int4/uint4: packed)."""
    if dtype in PACKED4:
        return _pack4(np.full(shape, fill, _numpy_dtype(dtype)))
    return np.full(shape, fill, _numpy_dtype(dtype))


class _DeviceArg:
    """A device buffer for Triton's launcher: a pointer and a dtype."""

    def __init__(self, ptr, dtype):
        self.ptr = int(ptr)
        self.dtype = "torch." + ("bool" if dtype == "bool" else dtype)

    def data_ptr(self):
        return self.ptr


def _poison(dtype):
    """What unwritten elements hold in the bounds-checked build: NaN, or all bits set."""
    dt = _numpy_dtype(dtype)
    if dt == np.bool_:
        return True
    if np.issubdtype(dt, np.floating) or dt.kind == "V" and dtype.startswith(("bfloat16", "float")):
        return np.nan
    if np.issubdtype(dt, np.signedinteger) or dtype == "int4":
        return np.array(-1).astype(dt)
    return _iinfo(dtype).max


def _arguments(inputs):
    """(the kernel's arguments in PARAMS order, its outputs, the bounds flag or None).
    An aliased output is its input's own array, one buffer behind both refs, as XLA
    passes one pointer for both on the GPU; in the bounds-checked build an output
    starts from its `initial` parameter's array (poison, or zeros where atomics
    accumulate), one buffer behind both too."""
    inputs, args, outputs, flag = list(inputs), [], [], None
    initial = {{}}
    for name, dtype, shape, role in PARAMS:
        if role == "input":
            value = inputs.pop(0)
            args.append(_pack4(value) if dtype in PACKED4 else value)
        elif role == "initial":
            initial[name] = _buffer(dtype, shape, 0 if name in ZEROED else _poison(dtype))
            args.append(initial[name])
        elif role == "output":
            src = ALIASES.get(len(outputs))
            out = (args[src] if src is not None else
                   initial.get(INITIAL_OF.get(name), _buffer(dtype, shape, 0)))
            outputs.append(out)
            args.append(out)
        elif role == "check":
            flag = np.zeros(shape, np.int32)
            args.append(flag)
        else:
            raise SystemExit(f"parameter {{name}}: role {{role!r}} is not one this launcher fills")
    return args, outputs, flag


def _unpacked(outputs):
    """The outputs as numpy holds them (int4/uint4 unpacked, one element a byte)."""
    kinds = [(dtype, shape) for _, dtype, shape, role in PARAMS if role == "output"]
    return [_unpack4(o, dtype, shape) if dtype in PACKED4 else o
            for o, (dtype, shape) in zip(outputs, kinds)]


def _violations(flag):
    """The bounds-checked build's findings, as pallas-prof words them."""
    found = []
    for site in CHECK_SITES:
        count = int(flag[site["base"]])
        if count <= 0:
            continue
        ranges = list(site["static_ranges"]) or [None] * len(site["block_shape"])
        for d, axis in enumerate(site["checked_axes"]):
            lo = CHECK_OFFSET - int(flag[site["base"] + 1 + 2 * d])
            hi = int(flag[site["base"] + 2 + 2 * d]) - CHECK_OFFSET
            lo_text = f"<={{lo}}" if lo <= 1 - CHECK_OFFSET else str(lo)
            hi_text = f">{{hi}}" if hi >= CHECK_OFFSET - 1 else str(hi + 1)
            ranges[axis] = lo_text if lo == hi else f"{{lo_text}}:{{hi_text}}"
        found.append(f"{{site['head']}} at index [{{', '.join(map(str, ranges))}}]: {{count}} "
                     f"lane(s) outside the ref, dropped{{site['tail']}}")
    return found


def _module_from_source(name, source, **names):
    module = types.ModuleType(name)
    module.__dict__.update(names)
    exec(compile(source, f"<{{name}}, inlined by pallas-prof>", "exec"), module.__dict__)
    return module


def run_interpreted(inputs):
    """Triton's interpreter, patched as pallas-prof's CPU path patches it
    (_RUNTIME_SOURCE below), with libdevice computed by numpy."""
    global libdevice
    libdevice = _module_from_source("libdevice_numpy", _LIBDEVICE_SOURCE)
    reductions = _module_from_source("interpreter_reductions", _REDUCTIONS_SOURCE)
    memory = _module_from_source("interpreter_memory", _MEMORY_SOURCE)
    runtime = _module_from_source("interpreter_runtime", _RUNTIME_SOURCE,
                                  _REDUCTIONS=reductions, _MEMORY=memory)
    arrays = [np.array(a, order="C", copy=True) for a in inputs]
    args, outputs, flag = _arguments(arrays)
    runtime.launch(globals()[KERNEL], GRID, args)
    return outputs, flag


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
    arrays = [np.array(a, order="C", copy=True) for a in inputs]
    args, outputs, flag = _arguments(arrays)
    buffers, owned = [], {{}}
    for array in args:
        if id(array) not in owned:      # an aliased output shares its input's buffer
            ptr = check(cu.cuMemAlloc(max(array.nbytes, 1)))
            check(cu.cuMemcpyHtoD(ptr, array.ctypes.data, array.nbytes))
            owned[id(array)] = ptr
        buffers.append(owned[id(array)])
    dtypes = [a.dtype.name for a in args]     # the buffers' own: uint8 for packed int4
    scratch = []

    def allocate(size, alignment, stream):
        # Triton's global scratch (a TMA kernel's tensor descriptors live there);
        # cuMemAlloc's 256-byte alignment covers what Triton asks
        scratch.append(check(cu.cuMemAlloc(max(size, 1))))
        return _DeviceArg(scratch[-1], "uint8")
    triton.set_allocator(allocate)
    kernel = globals()[KERNEL]
    options = dict(OPTIONS)
    if LIBDEVICE and os.path.exists(LIBDEVICE):
        options["extern_libs"] = (("libdevice", LIBDEVICE),)
    elif LIBDEVICE:
        print(f"note: {{LIBDEVICE}} (XLA's libdevice, which pallas-prof linked) is not on this "
              "machine: Triton's own is linked, whose powf and a few others may differ in "
              "the last bit", file=sys.stderr)
    kernel[GRID](*[_DeviceArg(b, d) for b, d in zip(buffers, dtypes)],
                 num_warps=NUM_WARPS, num_stages=NUM_STAGES, **options)
    check(cu.cuCtxSynchronize())
    for ptr in scratch:
        check(cu.cuMemFree(ptr))
    for array in outputs + ([flag] if flag is not None else []):
        check(cu.cuMemcpyDtoH(array.ctypes.data, owned[id(array)], array.nbytes))
    for ptr in owned.values():
        check(cu.cuMemFree(ptr))
    return outputs, flag


def _load_inputs(path, rng):
    arrays = np.load(path) if path else None
    inputs = []
    for name, dtype, shape, role in PARAMS:
        if role != "input":
            continue
        if arrays is not None:
            if name not in arrays:
                raise SystemExit(f"{{path}} has no array {{name!r}} (it has {{', '.join(arrays.files) or 'none'}}): "
                                 f"give one array per input parameter, by name: "
                                 f"{{', '.join(p[0] for p in PARAMS if p[3] == 'input')}}")
            a, dt = arrays[name], _numpy_dtype(dtype)
            if tuple(a.shape) != tuple(shape):
                # the kernel's addresses are computed for this shape: another would read
                # past the array or leave part of it unread
                raise SystemExit(f"{{path}}: {{name!r}} has shape {{tuple(a.shape)}}; the kernel "
                                 f"was generated for {{tuple(shape)}} {{dtype}}")
            # ml_dtypes' types (bfloat16, float8_*, int4) come back from an .npz as raw
            # bytes (numpy kind 'V') or as the unsigned ints --output writes: their bits
            if dt.kind == "V" and a.dtype.kind in "uV" and a.dtype.itemsize == dt.itemsize:
                a = a.view(dt)
            inputs.append(np.ascontiguousarray(a.astype(dt) if a.dtype != dt else a))
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
    outputs, flag = run_interpreted(inputs) if INTERPRET else run_gpu(inputs)
    outputs = _unpacked(outputs)
    names = [p[0] for p in PARAMS if p[3] == "output"]
    for name, out in zip(names, outputs):
        print(f"{{name}}: shape {{out.shape}} {{out.dtype}}, mean {{np.asarray(out, np.float64).mean():.6g}}")
    if args.output:
        # ml_dtypes' types as unsigned ints of their bits (an .npz would keep raw bytes)
        np.savez(args.output, **{{n: (o.view(f"u{{o.dtype.itemsize}}") if o.dtype.kind == "V" else o)
                                 for n, o in zip(names, outputs)}})
    found = _violations(flag.reshape(-1)) if flag is not None else []
    for text in found:
        print(text, file=sys.stderr)
    return 3 if found else 0


# pallas_prof/backend/running/interpreter_libdevice.py, interpreter_runtime.py,
# interpreter_reductions.py and interpreter_memory.py, verbatim
_LIBDEVICE_SOURCE = {libdevice_source}

_REDUCTIONS_SOURCE = {reductions_source}

_MEMORY_SOURCE = {memory_source}

_RUNTIME_SOURCE = {runtime_source}

if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "--interpret"] + (["--interpret"] if INTERPRET else [])))
'''

_PREAMBLE = '''#!/usr/bin/env python3
"""Triton kernel `{name}` ejected by pallas-prof from {source_info}.

A standalone program: needs numpy and triton only (cuda-python on a GPU;
ml_dtypes for bfloat16, float8 or int4 parameters).

    python {file} --interpret [--inputs in.npz] [--output out.npz]   # CPU
    python {file} [--inputs in.npz] [--output out.npz]               # NVIDIA GPU
                                     # (the interpreter, with a note, where there is none)
"""
import os
import sys
import types



def _no_gpu_reason():
    """Why the kernel cannot run on an NVIDIA GPU here (None: it can)."""
    try:
        from cuda.bindings import driver as cu
    except ImportError as e:
        if not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")):
            return "this machine has none (no NVIDIA driver is loaded)"
        return f"{{e}}; the GPU path needs cuda-python (pip install cuda-python)"
    try:
        (err,) = cu.cuInit(0)
        if err != cu.CUresult.CUDA_SUCCESS:
            return f"cuInit: {{err}}"
        err, count = cu.cuDeviceGetCount()
    except Exception as e:  # a broken driver: the interpreter still works
        return f"{{type(e).__name__}}: {{e}}"
    return None if err == cu.CUresult.CUDA_SUCCESS and count > 0 else "no CUDA device"


INTERPRET = "--interpret" in sys.argv or os.environ.get("TRITON_INTERPRET") == "1"
if not INTERPRET:
    _why = _no_gpu_reason()
    if _why is not None:
        INTERPRET = True
        print(f"no NVIDIA GPU ({{_why}}): running under Triton's interpreter on the CPU "
              "(--interpret)", file=sys.stderr)
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"   # before importing triton

import numpy as np
'''


def eject(gk, path: str, aliases=()) -> str:
  """Writes `gk` (a GeneratedKernel) to `path` as a runnable program.

  aliases: the call's input_output_aliases, (input index, output index) pairs."""
  # lazy: at the top it would load jax whenever this module is imported
  from ..backend.running import bounds_errors
  from ..backend.compiling.compile_cache import compile_options
  if any(p.role == "probes" for p in gk.params):
    raise ValueError(f"kernel {gk.name} is the profiler's probed variant; eject the kernel "
                     "the program runs")
  body = gk.source
  params = [(p.name, p.dtype, tuple(p.shape), p.role) for p in gk.params]
  zeroed = set(gk.zeroed_outputs(aliases))
  zeroed_initial = sorted(p.name for p in gk.params if p.role == "initial" and p.index in zeroed)
  initial_of = {out.name: p.name for p in gk.params if p.role == "initial"
                for out in gk.params if out.role == "output" and out.index == p.index}
  sites = []
  for site in gk.bounds_sites:
    head, tail = bounds_errors.describe_site(site, gk.name, gk.eqns, gk.ref_names)
    sites.append({"base": site.base, "checked_axes": list(site.checked_axes),
                  "static_ranges": list(site.static_ranges),
                  "block_shape": list(site.block_shape), "head": head, "tail": tail})
  text = (_PREAMBLE.format(name=gk.name, source_info=gk.source_info, file=os.path.basename(path))
          + "\n" + body + _LAUNCHER.format(
              kernel_name=gk.name, params=params, grid=tuple(gk.launch_grid),
              num_warps=gk.num_warps, num_stages=gk.num_stages,
              options={k: v for k, v in compile_options(gk).items()
                       if k in ("enable_reflect_ftz", "enable_fp_fusion")},
              libdevice=dict(compile_options(gk).get("extern_libs", ())).get("libdevice"),
              aliases={int(o): int(i) for i, o in aliases}, zeroed=zeroed_initial,
              initial_of=initial_of, check_offset=bounds_errors.OFFSET, check_sites=sites,
              libdevice_source=_as_literal(inspect.getsource(interpreter_libdevice)),
              runtime_source=_as_literal(inspect.getsource(interpreter_runtime)),
              reductions_source=_as_literal(inspect.getsource(interpreter_reductions)),
              memory_source=_as_literal(inspect.getsource(interpreter_memory))))
  # a FIFO nobody reads blocked here for ever, and a device took the program: a regular
  # file (or the null device, which discards it), written whole
  refuse_special(path, "--eject")
  return write_atomic(path, text, mode=0o644)


def _as_literal(source: str) -> str:
  """A module's source as a string literal that reads as code where it can."""
  if "'''" not in source and not source.endswith("\\"):
    return "r'''" + source + "'''"
  return repr(source)
