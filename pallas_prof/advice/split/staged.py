"""The split with its loop's loads copied ahead: pallas-prof's CompilerParams(loop_stages=S).

A split program still runs its chunk of the loop one iteration at a time, each waiting for
its loads: Triton's kernel-wide num_stages pipelines only a dot's loads. With loop_stages
the loop is Triton's `tl.range(lo, hi, num_stages=S)` and its loads are copied into shared
memory S iterations ahead (backend/lowering/rules/control_flow.py) - where each thread
loads ASYNC_COPY_BYTES or more, so the warps are halved until it does
(rules.memory.warps_for_async_copies: a 16x128 bfloat16 tile over 8 warps is 16 bytes a
thread, kept at 8; a 16x16 one, 2 bytes a thread at 8 warps, is staged at 4).

A GPU trial times this twin beside the split (trial.py); kept, its diff also sets the
call's compiler_params to pallas-prof's with these settings (`settings_edit`): a setting of
pallas-prof's lowering, which JAX's own CompilerParams cannot say.
"""
from __future__ import annotations

import ast
import dataclasses

from ...backend.compiler_params import CompilerParams
from ..call_source import _find_call
from ..rules.memory import warps_for_async_copies
from .source_file import SourceFile, SourceRefused, alias, keywords_of

STAGES = 3       # the kernel tuner's first loop_stages candidate (tune/params.py)


@dataclasses.dataclass(frozen=True)
class Staging:
  """The settings of the staged twin: the call's compiler params as pallas-prof's."""
  num_warps: int
  num_stages: int
  loop_stages: int = STAGES

  @property
  def change(self) -> dict:
    return dataclasses.asdict(self)

  @property
  def words(self) -> str:
    return (f"the loop's loads copied {self.loop_stages} iterations ahead (loop_stages="
            f"{self.loop_stages}, num_warps={self.num_warps})")

  def params_source(self, pallas_prof: str) -> str:
    return (f"{pallas_prof}.CompilerParams(num_warps={self.num_warps}, "
            f"num_stages={self.num_stages}, loop_stages={self.loop_stages})")


def largest_loop_load(gk) -> int:
  """Bytes of the largest load inside a loop of a GeneratedKernel (one program's)."""
  return max((e.bytes_read for e in gk.eqns if e.parent is not None and e.bytes_read),
             default=0)


def staging(gk) -> Staging | None:
  """The twin's settings for the split's kernel `gk`: its warps, halved while a thread's
  share of the loop's largest load is under ASYNC_COPY_BYTES (none where the loop loads
  nothing)."""
  largest = largest_loop_load(gk)
  if not largest:
    return None
  return Staging(warps_for_async_copies(largest, gk.num_warps), gk.num_stages)


def staged_recipe(recipe, s: Staging):
  """The recipe with its call's compiler params pallas-prof's, at these settings."""
  params = CompilerParams(num_warps=s.num_warps, num_stages=s.num_stages,
                          loop_stages=s.loop_stages)
  return dataclasses.replace(recipe, kwargs=dict(recipe.kwargs, compiler_params=params))


def settings_edit(f: SourceFile, recipe, s: Staging) -> None:
  """In the call's file `f` (the split's edits made or to be made): the pallas_call's
  compiler_params as pallas-prof's with these settings, and `import pallas_prof` where the
  file lacks it."""
  call = _find_call(f.tree, recipe.call_line)
  if call is None:
    raise SourceRefused(f"no pallas_call is written at {recipe.location}")
  if any(k.arg is None for k in call.keywords):
    raise SourceRefused(f"the pallas_call at {recipe.location} passes **keywords: its "
                        "compiler_params cannot be set beside them reliably")
  name = alias(f.tree, "pallas_prof")
  if name is None:
    imports = [n for n in f.tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    if not imports:
      raise SourceRefused(f"{f.path} has no imports to add `import pallas_prof` beside")
    f.insert(f.line_start(imports[-1].end_lineno + 1), "import pallas_prof\n")
    name = "pallas_prof"
  given = keywords_of(call).get("compiler_params")
  if given is not None:
    f.replace(given, s.params_source(name))
    return
  end = f.span(call)[1] - 1            # before the call's closing parenthesis
  tail = f.text[:end].rstrip()
  # another edit (the split's grid=, out_specs=) may end the arguments there already
  joined = tail.endswith(",") and not any(a == b == len(tail) for a, b, _ in f.edits)
  f.insert(len(tail), (" " if joined else ", ") + f"compiler_params={s.params_source(name)}")
