"""What the line map, the spans and error reports know of an equation: its
path in the nesting, the user's frame that made it, and its text as JAX
prints it (rendered only when asked for).
"""
from __future__ import annotations

from .. import compat
from ..equation_text import Aval
from .codegen import DECOMPOSITION, EqnInfo, sanitize
from .context import KernelContext


def describe(kernel: KernelContext, jaxpr, eqn, position: int, parent: EqnInfo | None,
             region: str) -> EqnInfo:
  frame = compat.user_frame(eqn.source_info)
  path = str(position) if parent is None else f"{parent.path}.{_region_tag(region)}{position}"

  def text_and_avals():
    return (_eqn_text(kernel, jaxpr, eqn), tuple(Aval.of(v.aval) for v in eqn.invars),
            tuple(Aval.of(v.aval) for v in eqn.outvars), _jaxpr_line(kernel, eqn))

  if parent is not None and (region == DECOMPOSITION or f".{DECOMPOSITION}." in parent.path):
    # a jaxpr a rule traced while lowering (erf_inv's polynomial), and the jaxprs nested in
    # it (a jnp.where's call): their frames are the lowering's, whose user frame is the
    # pallas_call's line; the work is the equation's the rule lowered
    frame = None
  file, line, function = ((frame.file_name, frame.start_line, frame.function_name) if frame
                          # inside a library's jit (jnp.sort, ...): the user's call of it
                          else (parent.file, parent.line, parent.function) if parent
                          else (None, None, None))
  return EqnInfo(index=kernel.next_eqn_index(), path=path, primitive=eqn.primitive.name,
                 file=file, line=line, function=function,
                 parent=None if parent is None else parent.index,
                 region=region, describe=text_and_avals)


def _region_tag(region: str) -> str:
  return sanitize(region.split()[0]) + "."


def _eqn_text(kernel: KernelContext, jaxpr, eqn) -> str:
  """The equation as JAX prints it, named as in the kernel's printed jaxpr
  (GeneratedKernel.jaxpr_text): one naming for the whole kernel, nested
  jaxprs included, so a report's marked line and its equation agree."""
  context = kernel.pp_context
  if context is None:               # a kernel context made without its printout
    context = kernel.pp_context = compat.print_jaxpr(jaxpr)[1]
  if id(jaxpr) not in kernel.pp_named:
    compat.name_vars(jaxpr, context)   # an index map's variables, in order
    kernel.pp_named[id(jaxpr)] = jaxpr
  text = compat.pp_equation(eqn, context)
  if "\n" in text or len(text) > 240:
    outs = " ".join(compat.pp_var(v, context) for v in eqn.outvars)
    ins = " ".join(compat.pp_var(v, context) for v in eqn.invars)
    text = f"{outs} = {eqn.primitive.name}[...] {ins}".strip()
  return text


def _jaxpr_line(kernel: KernelContext, eqn) -> int | None:
  """The line of the kernel's printed jaxpr where `eqn` starts (None: an
  equation of an index map or a decomposition, not printed there)."""
  if kernel.jaxpr is None:
    return None
  if kernel.eqn_lines is None:
    try:
      kernel.eqn_lines = compat.equation_lines(kernel.jaxpr, kernel.jaxpr_text,
                                               kernel.pp_context)
    except Exception:  # noqa: BLE001 - a report without the mark beats no text at all
      kernel.eqn_lines = {}
  return kernel.eqn_lines.get(id(eqn))


# words of a printed jaxpr that are not variables: a ref printed as one of them keeps
# its letters, so that naming it does not rename the keyword or literal as well
_JAXPR_WORDS = frozenset({"in", "let", "lambda", "inf", "nan"})


def ref_names(jaxpr, context, binders) -> tuple[tuple[str, str], ...]:
  """(the jaxpr's name, the kernel's name) of each of `binders`, (variable, name)
  pairs of the variables bound to the kernel's operand refs (KernelContext.ref_binders),
  as `context` printed them in `jaxpr` (GeneratedKernel.ref_names): `b` -> `x_ref`,
  and the letter a loop body gives the same ref. A name that is also a primitive's
  (`ge`, `add`) is left out: renaming it would rename the primitive."""
  if context is None or jaxpr is None:
    return ()
  words = set(_JAXPR_WORDS)
  _primitive_names(jaxpr, words)
  found: dict[str, str] = {}
  for var, label in binders:
    printed = compat.pp_var(var, context, named_only=True)
    if printed and printed not in words:
      found.setdefault(printed, label)
  return tuple(found.items())


def _primitive_names(jaxpr, into: set) -> None:
  for eqn in jaxpr.eqns:
    into.add(eqn.primitive.name)
    for param in eqn.params.values():
      for sub in param if isinstance(param, (tuple, list)) else (param,):
        if isinstance(sub, compat.JAXPR_TYPES):
          _primitive_names(compat.open_jaxpr(sub)[0], into)
