"""Bytes and FLOPs of one kernel launch, from what the lowering rules recorded.

    bytes        every input read once and every output written once (the
                 traffic a launch cannot avoid; DRAM sees at least this)
    block_bytes  what the programs' loads and stores move: each equation's
                 recorded bytes read and written, times the loop trips
                 around it, times the number of programs (re-reads of the
                 same block by several programs count each time; the L2
                 may serve them)
    dot_flops    2*M*N*K per dot_general (the dot rule's dimensions), times
                 trips and programs
    elementwise  one per output element of float arithmetic and per input
                 element of float reductions (transcendentals apart)

Each GeneratedKernel equation record carries those facts (backend/artifacts.py,
EquationRecord), per execution by one program. A loop records its trip count,
or "dynamic" when a bound is computed at run time (a causal mask's
`pl.cdiv(...)`): the model is then inexact, and FLOPs are left out (None)
rather than guessed. A loop emitted straight-line has a record per iteration
already and multiplies nothing. A user's `pl.CostEstimate` replaces the
model's bytes and FLOPs when given.
"""
from __future__ import annotations

import numpy as np

from ..schema import WorkModel


def _itemsize(dtype: str) -> int:
  # lazy: keeps jax out of this module's import (start-up time)
  import jax.numpy as jnp
  return jnp.dtype(dtype).itemsize


def loop_trips(gk) -> dict[int, int | None]:
  """Trip count of each loop equation (None: known only at run time)."""
  return {e.index: (e.trips if isinstance(e.trips, int) else None)
          for e in gk.eqns if e.trips is not None}


def dot_class(dot) -> str | None:
  """The matrix-rate ceiling a dot runs against: bf16, f16, tf32, f32, fp8, int8."""
  name = dot.operand_dtype
  if name == "bfloat16":
    return "bf16"
  if name == "float16":
    return "f16"
  if name.startswith("float8"):
    return "fp8"
  if name in ("int8", "uint8"):
    return "int8"
  if name == "float32":
    precision = dot.precision or "tf32"     # Triton's default for f32 dots on sm_80+
    return "tf32" if precision.startswith("tf32") else "f32"
  return name


def runs_per_program(gk) -> tuple[dict[int, int], list[int]]:
  """({equation index: how often one program runs it}, loops whose trips are known only at
  run time). A loop's own code (its test, its counter) runs once per trip, so a loop
  equation counts its own trips as well as those of the loops around it; a loop emitted
  straight-line (unrolled) multiplies nothing, and one of run-time trips counts once."""
  by_index = {e.index: e for e in gk.eqns}
  dynamic: set[int] = set()

  def trips(e) -> int:
    if e.trips is None or e.unrolled:
      return 1
    if not isinstance(e.trips, int):
      dynamic.add(e.index)
      return 1
    return max(int(e.trips), 0)

  runs = {}
  for e in gk.eqns:
    m, node = trips(e), e
    while node.parent is not None:
      node = by_index[node.parent]
      m *= trips(node)
    runs[e.index] = m
  return runs, sorted(dynamic)


def work_model(gk, cost_estimate=None) -> WorkModel:
  """Bytes and FLOPs of one launch of a GeneratedKernel."""
  programs = int(np.prod(gk.grid, dtype=np.int64)) if gk.grid else 1
  notes = []
  unique = sum(int(np.prod(p.shape, dtype=np.int64)) * _itemsize(p.dtype) for p in gk.params)
  by_index = {e.index: e for e in gk.eqns}
  exact = True
  unknown_loops = set()
  in_branch = False

  def multiplier(e) -> int | None:
    """How often one program runs `e`: the trips of the loops around it."""
    nonlocal in_branch
    m, node = 1, e
    while node.parent is not None:
      if node.region.startswith("branch"):
        in_branch = True
      pe = by_index[node.parent]
      if pe.trips is not None and not pe.unrolled:
        if not isinstance(pe.trips, int):
          unknown_loops.add(pe.index)
          return None
        m *= pe.trips
      node = pe
    return m

  block = 0
  flops_dot = 0
  flops_elem = 0
  transcendentals = 0
  dtypes = []
  for e in gk.eqns:
    moved = e.bytes_read + e.bytes_written
    if not (moved or e.dot is not None or e.elementwise_flops or e.transcendentals):
      continue
    mult = multiplier(e)
    if mult is None:
      exact = False
    count = None if mult is None else mult * programs
    if moved and block is not None:
      block = None if count is None else block + moved * count
    if e.dot is not None:
      dtypes.append(dot_class(e.dot))
      if flops_dot is not None:
        flops_dot = None if count is None else flops_dot + e.dot.flops * count
    if e.transcendentals and transcendentals is not None:
      transcendentals = None if count is None else transcendentals + e.transcendentals * count
    if e.elementwise_flops and flops_elem is not None:
      flops_elem = None if count is None else flops_elem + e.elementwise_flops * count
  for idx in sorted(unknown_loops):
    e = by_index[idx]
    notes.append(f"loop [{idx}] {e.primitive} at {e.location} runs a number of times known "
                 "only at run time: FLOPs and block traffic inside it are not counted "
                 "(give pl.CostEstimate to the pallas_call for achieved FLOP/s)")
  if in_branch:
    exact = False
    notes.append("equations inside cond branches are counted as if every branch ran")
  dot_dtype = _widest(dtypes)
  if len(set(d for d in dtypes if d)) > 1:
    notes.append(f"dots of several operand types {sorted(set(d for d in dtypes if d))}: "
                 f"rated against {dot_dtype}")
  total = None if flops_dot is None or flops_elem is None else flops_dot + flops_elem
  model = WorkModel(source="model", bytes=unique, block_bytes=block, flops=total,
                    dot_flops=flops_dot, elementwise_flops=flops_elem,
                    transcendentals=transcendentals, dot_dtype=dot_dtype, programs=programs,
                    exact=exact, notes=notes)
  return _apply_cost_estimate(model, cost_estimate)


def _widest(classes) -> str | None:
  order = ["f32", "tf32", "f16", "bf16", "fp8", "int8"]
  present = [c for c in classes if c]
  if not present:
    return None
  known = [c for c in present if c in order]
  if not known:
    return present[0]
  return min(known, key=order.index)


def _apply_cost_estimate(model: WorkModel, ce) -> WorkModel:
  if ce is None:
    return model
  flops = getattr(ce, "flops", None)
  nbytes = getattr(ce, "bytes_accessed", None)
  trans = getattr(ce, "transcendentals", None)
  model.notes.append(f"bytes and FLOPs from the pallas_call's cost_estimate "
                     f"(flops={flops}, transcendentals={trans}, bytes_accessed={nbytes}); "
                     f"the jaxpr model said bytes={model.bytes}, flops={model.flops}")
  model.source = "cost_estimate"
  if nbytes is not None:
    model.bytes = int(nbytes)
  if flops is not None:
    model.flops = int(flops)
    model.exact = True
    if model.dot_flops is None:
      # an estimate does not split dots from the rest: rate all of it as dots
      model.dot_flops = int(flops) if model.dot_dtype else None
  if trans is not None:
    model.transcendentals = int(trans)
  return model
