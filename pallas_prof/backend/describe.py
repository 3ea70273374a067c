"""What the line map, the spans and error reports know of an equation: its
path in the nesting, the user's frame that made it, and its text as JAX
prints it (rendered only when asked for).
"""
from __future__ import annotations

from . import compat
from .codegen import EqnInfo, sanitize
from .context import KernelContext


def describe(kernel: KernelContext, jaxpr, eqn, position: int, parent: EqnInfo | None,
             region: str) -> EqnInfo:
  frame = compat.user_frame(eqn.source_info)
  path = str(position) if parent is None else f"{parent.path}.{_region_tag(region)}{position}"

  def text_and_avals():
    return (_eqn_text(kernel, jaxpr, eqn), tuple(str(v.aval) for v in eqn.invars),
            tuple(str(v.aval) for v in eqn.outvars))

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
  """The equation as JAX prints it, with the names of its enclosing jaxpr."""
  from jax._src import core as jax_core
  context = kernel.pp_contexts.get(id(jaxpr))
  if context is None:
    context = jax_core.JaxprPpContext()
    settings = jax_core.JaxprPpSettings(source_info=False, print_effects=False)
    jax_core.pp_jaxpr(jaxpr, context, settings)   # names vars in order
    kernel.pp_contexts[id(jaxpr)] = context
  settings = jax_core.JaxprPpSettings(source_info=False, print_effects=False)
  text = jax_core.pp_eqn(eqn, context, settings).format()
  lines = text.splitlines()
  if len(lines) > 1 or len(text) > 240:
    def var(v):
      if isinstance(v, compat.Literal):
        return str(v)
      doc = jax_core.pp_var(v, context)
      return doc if isinstance(doc, str) else doc.format()
    outs = " ".join(var(v) for v in eqn.outvars)
    ins = " ".join(var(v) for v in eqn.invars)
    text = f"{outs} = {eqn.primitive.name}[...] {ins}".strip()
  return text

