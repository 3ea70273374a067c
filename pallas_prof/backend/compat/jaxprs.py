"""Jaxprs across JAX versions: their shapes (jax 0.11 folded ClosedJaxpr into Jaxpr,
renamed closed_call and replaced scan's counts by flat-tree layouts), tracing a function
into one and evaluating one, and printing them as JAX does (equation texts that match the
kernel's printout).
"""
from __future__ import annotations

import contextlib

from jax._src import core as jax_core

# --- jaxpr shapes that changed in jax 0.11 -------------------------------------------
# jax 0.11 folded ClosedJaxpr into Jaxpr (which now carries its consts and keeps
# a `.jaxpr` property returning itself), renamed closed_call to eval_jaxpr, and
# replaced scan's num_consts/num_carry with flat-tree layouts (ft_in/ft_out).

closed_call_primitives = tuple(p for p in (getattr(jax_core, "closed_call_p", None),
                                           getattr(jax_core, "eval_jaxpr_p", None))
                               if p is not None)


def open_jaxpr(j):
  """(jaxpr, consts) of a ClosedJaxpr (jax 0.10) or a Jaxpr with consts (0.11)."""
  inner = getattr(j, "jaxpr", j)
  consts = getattr(j, "consts", None)
  if consts is None:
    consts = getattr(inner, "consts", ())
  return inner, tuple(consts or ())


def scan_layout(params: dict) -> tuple[int, int]:
  """(num_consts, num_carry) of a scan equation's params, in any JAX version."""
  if "num_consts" in params:
    return int(params["num_consts"]), int(params["num_carry"])
  consts, carry, _ = params["ft_in"].unpack()
  return len(consts), len(carry)


def trace_to_jaxpr(fn, in_avals, what: str = "pallas_prof"):
  """(jaxpr, consts) of `fn` traced on abstract values (refs too): for rules
  that rewrite an equation into others and lower those (scan over arrays)."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src import api_util
  from jax._src import linear_util as lu
  from jax._src.interpreters import partial_eval as pe
  info = api_util.debug_info(what, fn, tuple(in_avals), {})
  traced = pe.trace_to_jaxpr_dynamic(lu.wrap_init(fn, debug_info=info), list(in_avals))
  jaxpr = traced[0]
  consts = traced[2] if len(traced) > 2 else ()
  return open_jaxpr(jaxpr)[0], tuple(consts) or open_jaxpr(jaxpr)[1]


def eval_jaxpr(jaxpr, consts, *args):
  """core.eval_jaxpr, binding each equation under its own source info (so a
  rewritten equation still points at the user's line)."""
  return jax_core.eval_jaxpr(jaxpr, list(consts), *args)


# --- printing jaxprs (lowering: equation texts that match the kernel's printout) -----

def _pp_settings():
  return jax_core.JaxprPpSettings(source_info=False, print_effects=False)


def _plain(doc) -> str:
  # JAX colours what it prints when stdout is a terminal; these texts are parsed
  # (the marked equation, the refs' names) and shown inside our own styled reports
  return doc.format(use_color=False)


def print_jaxpr(jaxpr):
  """(text, context): `jaxpr` printed as JAX prints it (nested jaxprs in place),
  and the naming context that printed it: pp_equation(eqn, context) then names
  any of its equations, nested ones too, as the text does."""
  dropvars = getattr(jax_core, "_dropvars", None)
  try:
    context = jax_core.JaxprPpContext(dropvars(jaxpr)) if dropvars else jax_core.JaxprPpContext()
  except TypeError:      # a JAX whose context takes no names
    context = jax_core.JaxprPpContext()
  return _plain(jax_core.pp_jaxpr(jaxpr, context, _pp_settings())), context


def equation_lines(jaxpr, text: str, context) -> dict[int, int]:
  """id(equation) -> the line (0-based) of `text` (print_jaxpr's) where it starts,
  for the equations of `jaxpr` and of the jaxprs nested in them. Each
  equation's first printed line is looked for after the previous equation's
  (they print in that order), else anywhere."""
  lines = [line.strip() for line in text.splitlines()]
  found: dict[int, int] = {}
  position = 0

  def locate(first: str):
    for start in (position, 0):
      for i in range(start, len(lines)):
        if lines[i] and (lines[i].startswith(first) or first.startswith(lines[i])):
          return i
    return None

  def visit(j):
    nonlocal position
    for eqn in j.eqns:
      first = pp_equation(eqn, context).splitlines()[0].strip()
      at = locate(first) if first else None
      if at is not None:
        found[id(eqn)] = at
        position = at + 1
      for sub in jax_core.jaxprs_in_params(eqn.params):
        visit(sub)

  visit(jaxpr)
  return found


def name_vars(jaxpr, context) -> None:
  """Names, in order, the variables of a jaxpr `context` has not seen (an index
  map's, a decomposition's), as printing it would."""
  jax_core.pp_jaxpr(jaxpr, context, _pp_settings())


def pp_equation(eqn, context) -> str:
  return _plain(jax_core.pp_eqn(eqn, context, _pp_settings()))


def pp_var(var, context, *, named_only: bool = False) -> str | None:
  if isinstance(var, jax_core.Literal):
    return str(var)
  if named_only and var not in getattr(context, "var_names", ()):
    return None        # naming it now would rename the variables printed after it
  doc = jax_core.pp_var(var, context)
  return doc if isinstance(doc, str) else _plain(doc)


def sub_jaxprs(eqn) -> list:
  """The (open) jaxprs in an equation's params: a loop's body, a call's, a cond's branches."""
  return [open_jaxpr(j)[0] for j in jax_core.jaxprs_in_params(eqn.params)]


def bind_equation(eqn, ins: list) -> list:
  """One equation bound on `ins` as core.eval_jaxpr binds it (under its source info and
  context): its results as a list. For evaluators that replace some equations of a jaxpr
  and bind the rest (advice/split's variant)."""
  params = eqn.primitive.get_bind_params(eqn.params)
  with equation_context(eqn):
    out = eqn.primitive.bind(*ins, **params)
  return list(out) if eqn.primitive.multiple_results else [out]


def equation_context(eqn):
  """The context an equation is bound in (its source info and name stack, its context):
  what an evaluator binds in its place is then located at the equation's user line."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src import source_info_util
  name_stack = source_info_util.current_name_stack() + eqn.source_info.name_stack
  stack = contextlib.ExitStack()
  stack.enter_context(source_info_util.user_context(eqn.source_info.traceback,
                                                    name_stack=name_stack))
  stack.enter_context(eqn.ctx.manager)
  return stack


def map_equations(j, fn):
  """`j` (a Jaxpr or ClosedJaxpr, as the version has them) with every equation, at any depth
  (loop bodies, cond branches, calls), replaced by fn(eqn): a new jaxpr, `j` untouched. For
  variants that change one parameter of some equations (advice/dots: a dot's precision)."""
  def sub(value):
    if isinstance(value, (tuple, list)):
      return type(value)(sub(v) for v in value)
    if isinstance(value, jax_core.Jaxpr):
      return value.replace(eqns=[one(e) for e in value.eqns])
    closed = getattr(jax_core, "ClosedJaxpr", None)
    if closed is not None and isinstance(value, closed):
      return value.replace(jaxpr=sub(value.jaxpr))
    return value

  def one(eqn):
    return fn(eqn.replace(params={k: sub(v) for k, v in eqn.params.items()}))
  return sub(j)
