"""Errors name a kernel's refs as the kernel does (`x_ref`), not by the letters JAX
prints its jaxpr with (`b`): the renaming of the text (equation_text.with_ref_names)
and the names the lowering finds (describe.ref_names). Issue 39, item 5."""
from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import pytest

from pallas_prof.backend import compat
from pallas_prof.backend.equation_text import with_ref_names
from pallas_prof.backend.lowering.describe import ref_names

NAMES = (("b", "x_ref"), ("c", "o_ref"), ("bc", "y_ref"))


@pytest.mark.parametrize("text, named", [
    ("e:f32[24] <- b[d:d+24]", "e:f32[24] <- x_ref[d:d+24]"),
    ("c[...] <- f", "o_ref[...] <- f"),
    ("{ lambda ; a:Ref<default>{i32[1]} b:Ref<default>{f32[100]}. let",
     "{ lambda ; a:Ref<default>{i32[1]} x_ref:Ref<default>{f32[100]}. let"),
    ("k:f32[8] <- bc[i:i+8]", "k:f32[8] <- y_ref[i:i+8]"),       # the longer name whole
    # not a variable: part of a word, a number, a parameter's name or value, a string
    ("d:bf16[8] = mul bb 1e-05:f32[]", "d:bf16[8] = mul bb 1e-05:f32[]"),
    ("e = jit[name=b c=2 axis_names=('b',)] a", "e = jit[name=b c=2 axis_names=('b',)] a"),
])
def test_only_the_refs_letters_are_renamed(text, named):
  assert with_ref_names(text, NAMES) == named


@pytest.mark.parametrize("names", [
    (("", "x_ref"),),                         # would match everywhere
    (("b", "x_ref\x1b[2J"),),                 # would write a control sequence into a report
    (("b", "x ref"),), (("b[", "x_ref"),), (("b", 3),), (("b",),), (("b", "x_ref", "c"),),
])
def test_names_read_back_from_a_damaged_file_are_not_used(names):
  """GeneratedKernel.ref_names comes back from a run's kernel.json: a pair that is not two
  identifiers leaves the text as JAX printed it."""
  assert with_ref_names("e:f32[24] <- b[d:d+24]", names) == "e:f32[24] <- b[d:d+24]"


def test_without_names_the_text_is_left_as_it_is():
  assert with_ref_names("e <- b[0]", ()) == "e <- b[0]"
  assert with_ref_names(None, NAMES) is None


def _jaxpr():
  def f(x, y):
    return jnp.sin(x) + y
  return jax.make_jaxpr(f)(1.0, 2.0).jaxpr


def test_the_lowering_names_the_variables_bound_to_the_refs_as_printed():
  jaxpr = _jaxpr()
  text, context = compat.print_jaxpr(jaxpr)
  x, y = jaxpr.invars
  assert ref_names(jaxpr, context, [(x, "x_ref"), (y, "y_ref"), (x, "x_ref")]) == \
      (("a", "x_ref"), ("b", "y_ref"))
  assert text.startswith("{ lambda ; a:f32[] b:f32[]. let")


def test_a_ref_printed_as_a_primitives_name_keeps_it():
  """A big kernel's loop body can print a ref as `add` or `ge`: renaming it would rename
  the primitive of every equation that names it."""
  jaxpr = _jaxpr()
  x, y = jaxpr.invars
  context = types.SimpleNamespace(var_names={x: "add", y: "in"})
  assert ref_names(jaxpr, context, [(x, "x_ref"), (y, "y_ref")]) == ()


def test_a_variable_the_printout_did_not_name_is_not_named_now():
  """Naming one now would shift the names of every variable printed after it."""
  jaxpr = _jaxpr()
  x, y = jaxpr.invars
  context = types.SimpleNamespace(var_names={x: "a"})
  assert ref_names(jaxpr, context, [(x, "x_ref"), (y, "y_ref")]) == (("a", "x_ref"),)
  assert y not in context.var_names
