"""The fuzzer's op-by-op reference: a program's jaxpr evaluated one equation at a time on
the CPU, each equation's result stored in its own dtype before the next one reads it.

Why: the fuzzer's main reference is XLA's CPU jit (a "values" program jitted, a "kernel"
program under JAX's Pallas interpreter, which XLA also compiles whole). XLA computes
float16 and bfloat16 elementwise chains in float32 and drops the roundings between them
(`x * x + 1` rounded once, where JAX's semantics round the product first). So where
pallas-prof differs from it in a 16-bit program, "the reference's difference" needs a
reference that keeps every rounding: this one. Each equation is one primitive dispatched
on its own (one XLA computation per equation, whose output buffer has the equation's
dtype), so no two equations share a wider intermediate.

    evaluate(closed_jaxpr, *args)        a jaxpr, equation by equation
    run_program(program, inputs)         a fuzz Program's outputs, op by op

Calls (jit, custom_jvp/vjp, remat), cond, while and scan are walked into, not dispatched
(each would be compiled whole); a pallas_call runs JAX's own grid interpreter
(`hlo_interpreter.pallas_call_hlo_interpret`, eagerly, its loops as Python loops) with
this evaluator for the kernel's body.
"""
from __future__ import annotations

import contextlib
import types

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core as jax_core

# primitives whose sub-jaxpr is walked into, with the parameter that holds it
CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr",
         "core_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
         "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
         "remat": "jaxpr", "checkpoint": "jaxpr"}


class NotRoundedError(AssertionError):
  """An equation's result came back in another dtype than the jaxpr gives it: the
  evaluator would carry excess precision; the op-by-op reference cannot vouch for it."""


def _split(jaxpr) -> tuple:
  """(open jaxpr, its consts): a ClosedJaxpr (jax 0.10), or a Jaxpr with its consts
  inside (jax 0.12)."""
  if isinstance(getattr(jaxpr, "jaxpr", None), jax_core.Jaxpr):
    return jaxpr.jaxpr, list(jaxpr.consts)
  return jaxpr, list(getattr(jaxpr, "consts", ()) or ())


def evaluate(jaxpr, *args) -> list:
  """The outputs of `jaxpr` (closed) on `args`, equation by equation."""
  open_jaxpr, consts = _split(jaxpr)
  return eval_jaxpr(open_jaxpr, consts, *args)


def eval_jaxpr(jaxpr, consts, *args, propagate_source_info=True) -> list:
  """core.eval_jaxpr's signature (so JAX's Pallas interpreter can call it), op by op."""
  del propagate_source_info
  env: dict = {}

  def read(atom):
    return atom.val if isinstance(atom, jax_core.Literal) else env[atom]

  for var, value in zip(jaxpr.constvars, consts):
    env[var] = value
  for var, value in zip(jaxpr.invars, args):
    env[var] = value
  for eqn in jaxpr.eqns:
    invals = [read(v) for v in eqn.invars]
    outs = _equation(eqn, invals)
    for var, value in zip(eqn.outvars, outs):
      if not isinstance(var, jax_core.DropVar):
        env[var] = _rounded(value, var.aval, eqn)
  return [read(v) for v in jaxpr.outvars]


def _rounded(value, aval, eqn):
  """`value` stored in the equation's own dtype (a 16-bit float stays 16-bit)."""
  dtype = getattr(aval, "dtype", None)
  if isinstance(value, jax_core.Tracer) or dtype is None or not hasattr(value, "dtype"):
    return value
  if np.dtype(value.dtype) != np.dtype(dtype) and jnp.issubdtype(dtype, jnp.floating):
    raise NotRoundedError(f"`{eqn.primitive.name}` gave {value.dtype}, its jaxpr says "
                          f"{dtype}")
  return value


def _equation(eqn, invals) -> list:
  name = eqn.primitive.name
  params = eqn.params
  if name in _RULES:
    return _RULES[name](invals, params)
  if name in CALLS and CALLS[name] in params:
    return evaluate(params[CALLS[name]], *invals)
  out = eqn.primitive.bind(*invals, **params)
  return list(out) if eqn.primitive.multiple_results else [out]


def _cond(invals, params):
  index, *operands = invals
  branches = params["branches"]
  chosen = int(np.clip(int(np.asarray(index)), 0, len(branches) - 1))
  return evaluate(branches[chosen], *operands)


def _while(invals, params):
  nc, nb = params["cond_nconsts"], params["body_nconsts"]
  cond_consts, body_consts, carry = invals[:nc], invals[nc:nc + nb], list(invals[nc + nb:])
  while bool(np.asarray(evaluate(params["cond_jaxpr"], *cond_consts, *carry)[0])):
    carry = evaluate(params["body_jaxpr"], *body_consts, *carry)
  return carry


def _scan_parts(invals, params) -> tuple[list, list, list]:
  """(consts, carry, xs): jax 0.10 counts them (num_consts, num_carry), jax 0.12 gives
  their tree (ft_in)."""
  if "ft_in" in params:
    consts, carry, xs = params["ft_in"].update(list(invals)).unpack()
    return list(consts), list(carry), list(xs)
  nc, nk = params["num_consts"], params["num_carry"]
  return list(invals[:nc]), list(invals[nc:nc + nk]), list(invals[nc + nk:])


def _scan(invals, params):
  consts, carry, xs = _scan_parts(invals, params)
  length, reverse = params["length"], params["reverse"]
  ys_by_step: list = [None] * length
  for step in range(length):
    i = length - 1 - step if reverse else step
    outs = evaluate(params["jaxpr"], *consts, *carry, *[x[i] for x in xs])
    carry, ys_by_step[i] = outs[:len(carry)], outs[len(carry):]
  if length == 0:
    avals = _split(params["jaxpr"])[0].outvars[len(carry):]
    return [*carry, *[jnp.zeros((0, *v.aval.shape), v.aval.dtype) for v in avals]]
  return [*carry, *[jnp.stack(ys) for ys in zip(*ys_by_step)]]


class _CoreWithOurEval(types.ModuleType):
  """jax._src.core as JAX's Pallas interpreter sees it, with eval_jaxpr ours."""

  def __init__(self):
    super().__init__(jax_core.__name__)

  def __getattr__(self, name):
    return eval_jaxpr if name == "eval_jaxpr" else getattr(jax_core, name)


@contextlib.contextmanager
def _interpreter_with_our_eval():
  from jax._src.pallas import hlo_interpreter
  saved = hlo_interpreter.jax_core
  hlo_interpreter.jax_core = _CoreWithOurEval()
  try:
    with jax.disable_jit():
      yield hlo_interpreter
  finally:
    hlo_interpreter.jax_core = saved


def _pallas_call(invals, params):
  with _interpreter_with_our_eval() as hlo_interpreter:
    params = {k: v for k, v in params.items() if k != "interpret"}
    return list(hlo_interpreter.pallas_call_hlo_interpret(*invals, **params))


_RULES = {"cond": _cond, "while": _while, "scan": _scan, "pallas_call": _pallas_call}


def run_program(program, inputs) -> list[np.ndarray]:
  """A fuzz Program's outputs (as testkit/fuzz/check.py's run_reference gives them), op by op
  on the CPU."""
  from jax.experimental import pallas as pl
  from .programs import namespace
  scope = dict(namespace())
  exec(compile(program.source, f"<fuzz program {program.seed}>", "exec"), scope)
  cpu = jax.devices("cpu")[0]
  args = [jax.device_put(a, cpu) for a in inputs]
  with jax.default_device(cpu):
    if program.kind == "values":
      fn = scope["fn"]
    elif "expected" in scope:
      return [np.asarray(r) for r in jax.tree.leaves(scope["expected"](*inputs))]
    else:
      fn = pl.pallas_call(scope["kernel"], interpret=True, **scope["call"])
    outs = evaluate(jax.make_jaxpr(fn)(*args), *args)
  return [np.asarray(r) for r in outs]


SIXTEEN_BIT_FLOATS = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


def has_16bit_floats(program, inputs, got) -> bool:
  """Whether a 16-bit float is on the program's way: an input, an output or a cast."""
  dtypes = [np.dtype(a.dtype) for a in [*inputs, *got]]
  return any(d in SIXTEEN_BIT_FLOATS for d in dtypes) or "float16" in program.source


def reference_or_none(program, inputs) -> list[np.ndarray] | None:
  """run_program's outputs; None where this evaluator cannot run the program (a primitive
  that does not run on its own, an equation that came back wider than its dtype)."""
  try:
    return run_program(program, inputs)
  except Exception:  # noqa: BLE001 - a program the evaluator cannot run decides nothing
    return None
