"""The name a pallas-prof kernel's op has in XLA, and so in every JAX profile (XProf).

JAX names each HLO op from the MLIR location of its equation: a name location holding
the name stack (`jit(f)/...`) around the file location of the user's line. XLA makes the
name the op's metadata op_name (XProf's name scope and op profile show it, and name the
HLO instruction after its last scope) and the file location its source file and line.
Left alone, a pallas_call is `jit(f)/pallas_call` on the GPU and `jit(f)/pure_callback`
on the CPU, whichever kernel it runs: here the name stack gets one more scope naming the
kernel as pallas-prof's report does, with the user's line (docs/xprof.md).
"""
from __future__ import annotations

import contextlib
import os
import re

from .. import compat

SCOPE_PREFIX = "pallas_prof"
# XLA cuts an op name at its first '@' (a function's name follows), a '/' opens a scope,
# XProf reads a ':' in a framework op's name as the op's type, and a '#' starts the
# metadata of the profiler's annotation (TraceMe's `name#key=value#`): on the H200 a label's
# '#' cut the kernel's name there and lost its hlo_op. None stay in a scope.
_NOT_IN_A_SCOPE = re.compile(r"[@/:#\\]+")


def scope_name(kernel_label: str, site) -> str:
  """`pallas_prof[softmax_kernel_1f22e0 softmax.py line 20]`: the kernel's label (the
  report's, its '#' an underscore) and the user's pallas_call line (`site`, the call's EquationRecord), as one
  name-stack scope."""
  file, line = getattr(site, "file", None), getattr(site, "line", None)
  where = f" {os.path.basename(file)} line {int(line)}" if file and line else ""
  return _NOT_IN_A_SCOPE.sub("_", f"{SCOPE_PREFIX}[{kernel_label}{where}]")


def named(ctx, scope: str):
  """`ctx` with `scope` on its name stack: ops JAX lowers from it (the CPU path's host
  callback) carry the scope in their op_name."""
  return ctx.replace(name_stack=ctx.name_stack.extend(scope))


@contextlib.contextmanager
def located(ctx, scope: str):
  """Ops built inside this block (the GPU path's custom call, which pallas-prof makes
  itself) are located as JAX locates an equation's op, under `scope`: the user's line
  stays their source line."""
  with compat.source_info_to_location(ctx.module_context, None,
                                      ctx.name_stack.extend(scope), ctx.traceback):
    yield
