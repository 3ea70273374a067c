"""Lowers a Pallas kernel (the jaxpr of a pallas_call) to a GeneratedKernel.

`lower_kernel` checks what the call as a whole asks for (grid, BlockSpecs,
scratch), emits the kernel's prologue (program ids, each operand's block
from its index map: grid.py, blockspec.py), walks the body through the
dispatcher (dispatch.py), and writes the source to a real file
(kernel_files.py). Errors about the whole call point at the user's
pallas_call line (pallas_call_info).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import math
import os
import time
import traceback

import numpy as np

from ... import events as keys
from .. import compat, hooks
from ..artifacts import EquationRecord, GeneratedKernel, KernelParam
from ..equation_text import Description
from .blockspec import (alias_sets, arg_labels, block_ref, check_block_indices, check_block_shapes,
                        operands_line)
from .codegen import KernelBuilder, UnsupportedDtype
from .context import KernelContext
from .describe import ref_names
from .dispatch import lower_jaxpr
from ..errors import LoweringError, Unsupported
from .grid import (check_call, emit_grouped_program_ids, emit_program_ids, grouped_launch,
                   persistent_axis_ids, persistent_launch, persistent_loop_header,
                   launch_grid_for, static_grid)
from ..kernel_files import write_source
from ..options import LoweringOptions
from .feature_hooks import ParamLayout
from .features.listeners import Features
from .features.tma import header_lines
from .features.workaround_plan import header_lines as workaround_header, merged_notes


class CollectionClock:
  """Time spent in Python's garbage collector while a kernel is lowered.

  A full collection stops every thread of the process and walks its whole
  heap, tens of ms with JAX loaded (bench/results/archive/comment_figures.md). It starts when
  enough objects have been allocated, whoever allocates them, so it often
  lands on a process's first lowering (or on JAX's tracing, a second later).
  Reported beside the lowering's time so that one is not read as the other.
  """

  def __init__(self):
    self.seconds = 0.0
    self._started: float | None = None

  def __call__(self, phase: str, info: dict) -> None:
    if phase == "start":
      self._started = time.perf_counter()
    elif self._started is not None:
      self.seconds += time.perf_counter() - self._started
      self._started = None

  def __enter__(self) -> "CollectionClock":
    gc.callbacks.append(self)
    return self

  def __exit__(self, *exc) -> None:
    gc.callbacks.remove(self)


def kernel_name_of(jaxpr, name: str | None = None) -> str:
  fn = name or getattr(jaxpr.debug_info, "func_name", None) or "kernel"
  return compat.sanitize_name(fn)


def lower_kernel(jaxpr, grid_mapping, options: LoweringOptions = LoweringOptions(), *,
                 name: str | None = None, call_site=None,
                 input_output_aliases=None) -> GeneratedKernel:
  """Lowers the jaxpr of a pallas_call to a GeneratedKernel (Triton source), as
  `options` (options.LoweringOptions) say.

  `input_output_aliases`: the pallas_call's (input index, output index)
  pairs. Which refs may share memory decides which loads a write makes
  stale; None (unknown) means any ref may alias any other.

  `call_site` is the source info of the pallas_call equation (anything
  with a `.traceback`): errors about the call as a whole (grid, BlockSpecs,
  scratch shapes) point at the user's line there.

  The GeneratedKernel's `options` are the ones that lower it again as it runs:
  its launch_group, persistent and tma as they took effect (the grid may not allow groups,
  no load may suit TMA: `tma_notes` says why) and the workarounds the rules used.
  """
  with CollectionClock() as collections:
    gk = _lower_kernel(jaxpr, grid_mapping, collections, options, name=name,
                       call_site=call_site, input_output_aliases=input_output_aliases)
  if options.debug:
    print(f"\npallas-prof: kernel jaxpr for {gk.source_info}:\n{jaxpr}\n")
    print(f"pallas-prof: generated Triton ({gk.path}):\n{gk.source}")
  return gk


def _lower_kernel(jaxpr, grid_mapping, collections: CollectionClock, options: LoweringOptions,
                  *, name, call_site, input_output_aliases) -> GeneratedKernel:
  start_time = time.perf_counter()
  num_warps, num_stages, workarounds = options.num_warps, options.num_stages, options.workarounds
  kname = kernel_name_of(jaxpr, name)
  src_info = getattr(jaxpr.debug_info, "func_src_info", None) or kname
  jaxpr_text, pp_context = compat.print_jaxpr(jaxpr)

  def call_error(reason: str, hint: str | None, where=None, details=None) -> LoweringError:
    site = pallas_call_info(call_site, jaxpr, kname, grid_mapping)
    more = {"kernel": src_info}
    if where is not None:      # the user's line of the problem (a BlockSpec's) comes first
      more["pallas_call"] = f"{site.file}:{site.line}"
      site = dataclasses.replace(site, file=where[0], line=where[1], function=where[2])
    # every ref the kernel takes: its outputs' and scratch buffers' after its inputs'
    labels = arg_labels(jaxpr, grid_mapping.num_inputs,
                        len(jaxpr.invars) - grid_mapping.num_inputs)
    return LoweringError(reason, hint=hint, kernel=kname, eqn=site, jaxpr_text=jaxpr_text,
                         rule="pallas_call", details={**more, **(details or {})},
                         ref_names=ref_names(jaxpr, pp_context,
                                             zip(jaxpr.invars, labels, strict=True)))

  with hooks.observer().kernel(kname, {keys.PALLAS_KERNEL: kname,
                                       keys.PALLAS_GRID: str(tuple(grid_mapping.grid)),
                                       keys.PALLAS_NUM_WARPS: num_warps,
                                       keys.PALLAS_NUM_STAGES: num_stages,
                                       keys.PALLAS_SOURCE: src_info}) as kernel_span:
    try:
      check_call(grid_mapping)
      grid = static_grid(grid_mapping)
      labels = arg_labels(jaxpr, grid_mapping.num_inputs, grid_mapping.num_outputs)
      check_block_shapes(grid_mapping, labels)
      check_block_indices(grid_mapping, grid, labels, jaxpr)
    except Unsupported as e:
      raise call_error(e.reason, e.hint, e.where, e.details) from None
    # the file's name, not the path the script was started by: the source's sha256 is the
    # kernel's key (its label, its compile cache entry, its entry in a tuning file), which
    # must not change with the directory a script runs from or where a checkout lives
    header = [f"Triton kernel generated by pallas-prof from the Pallas kernel "
              f"{portable_location(src_info)}",
              f"grid {grid}, num_warps={num_warps}, num_stages={num_stages}"
              + (", enable_fp_fusion=True" if options.enable_fp_fusion else ""),
              operands_line(jaxpr, grid_mapping),
              "each line's comment: [equation index] primitive @ your file:line"]

    b = KernelBuilder(kname, header)
    kernel = KernelContext(b, kname, grid, [], options,
                           getattr(grid_mapping, "grid_names", None), jaxpr_text)
    kernel.pp_context, kernel.jaxpr = pp_context, jaxpr
    features = Features.asked_by(options, len(jaxpr.eqns))
    if features.probes:
      b.header.insert(1, "PROFILING VARIANT with probes (launched only by pallas-prof's replay)")
    kernel.listeners = features.listeners()
    plan = features.tma.plan if features.tma else None
    try:
      params = _lower_kernel_body(kernel, jaxpr, grid_mapping, input_output_aliases)
      launch = kernel.launch_grid
      b.header += header_lines(plan)
      notes = (tuple(workarounds.notes) if workarounds else ()) + \
          merged_notes(features.workarounds.notes if features.workarounds else ())
      b.header += workaround_header(notes, workarounds.because if workarounds else "")
    except Unsupported as e:
      raise call_error(e.reason, e.hint, e.where, e.details) from None
    except UnsupportedDtype as e:
      raise call_error(str(e), "cast to a supported dtype outside the kernel") from None
    source, line_map = b.render()
    key = hashlib.sha256(source.encode()).hexdigest()
    kernel_span.set(keys.PALLAS_SOURCE_KEY, key)   # ties the kernel's compile spans to this one
    if collections.seconds:
      kernel_span.set(keys.PALLAS_LOWERING_GC_MS, collections.seconds * 1e3)
  path = write_source(kname, key, source)
  used_tma = bool(plan and plan.used)
  used_plan = workarounds.only(features.workarounds.applied) if notes else None
  gk = GeneratedKernel(name=b.kernel_name, source=source, path=path, line_map=line_map,
                       eqns=_records(b.eqns, line_map), params=tuple(params), grid=grid,
                       launch_grid=launch, jaxpr_text=jaxpr_text, source_info=src_info,
                       ref_names=ref_names(jaxpr, pp_context, kernel.ref_binders),
                       lowering_seconds=time.perf_counter() - start_time, key=key,
                       atomic_params=tuple(sorted(kernel.atomic_refs)),
                       gc_seconds=collections.seconds,
                       bounds_sites=features.bounds.sites if features.bounds else (),
                       probe_layout=features.probes.layout() if features.probes else None,
                       tma_notes=tuple(plan.notes) if plan else (), workarounds=notes,
                       options=options.replace(launch_group=kernel.launch_group, tma=used_tma,
                                               persistent=kernel.persistent,
                                               loop_stages=kernel.options.loop_stages
                                               if kernel.staged_loops else 0,
                                               workarounds=used_plan))
  return gk


def _records(infos, line_map: dict[int, int]) -> tuple[EquationRecord, ...]:
  """The frozen record of each equation (by index), with the lines it generated."""
  lines: dict[int, list[int]] = {}
  for line, index in sorted(line_map.items()):
    lines.setdefault(index, []).append(line)
  return tuple(info.record(tuple(lines.get(info.index, ())))
               for info in sorted(infos, key=lambda e: e.index))


def portable_location(src_info: str) -> str:
  """JAX's "kernel at /some/dir/file.py:12" as "kernel at file.py:12" (the form of the
  generated source's line comments)."""
  head, at, where = src_info.rpartition(" at ")
  if not at:
    return src_info
  path, colon, line = where.rpartition(":")
  if not colon or not line.isdigit():
    return f"{head} at {os.path.basename(where)}"
  return f"{head} at {os.path.basename(path)}:{line}"


def pallas_call_info(call_site, jaxpr, kname: str, grid_mapping=None) -> EquationRecord:
  """The pallas_call itself as an equation, for errors about the whole call.

  Its line is the user's pallas_call: from the equation's traceback under
  jit, from the live Python stack when called eagerly (JAX traces an eager
  pallas_call inside its own jit, which cuts the user's frames from the
  equation's traceback); failing both, the kernel function's definition.
  """
  frame = compat.user_frame(call_site) if call_site is not None else None
  if frame is not None:
    file, line, function = frame.file_name, frame.start_line, frame.function_name
  else:
    file, line, function = _live_user_frame() or _definition_site(jaxpr)
  grid = getattr(grid_mapping, "grid", None)
  text = f"pallas_call[name={kname}" + (f", grid={tuple(grid)}]" if grid is not None else "]")
  return EquationRecord(index=-1, path="pallas_call", primitive="pallas_call", file=file,
                        line=line, function=function, parent=None, region="call",
                        description=Description.fixed(text))


def _live_user_frame():
  for summary in reversed(traceback.extract_stack()):
    if compat.is_user_file(summary.filename):
      return summary.filename, summary.lineno, summary.name
  return None


def _definition_site(jaxpr):
  """(file, line, function) of the kernel function, from "name at file:line"."""
  info = getattr(jaxpr.debug_info, "func_src_info", None) or ""
  name, sep, where = info.rpartition(" at ")
  path, _, line = where.rpartition(":")
  if not sep or not line.isdigit():
    return None, None, None
  return path, int(line), name



def _lower_kernel_body(kernel: KernelContext, jaxpr, grid_mapping,
                       input_output_aliases=None) -> list[KernelParam]:
  """The kernel's parameters and prologue (program ids, each operand's block), then
  its body; the listeners (feature_hooks.py) add their parameters and code at set points."""
  b = kernel.builder
  listeners = kernel.listeners
  n_in = grid_mapping.num_inputs
  n_out = grid_mapping.num_outputs
  block_mappings = grid_mapping.block_mappings
  labels = arg_labels(jaxpr, n_in, n_out)
  names = [b.add_param(label) for label in labels[:n_in]]
  layout = ParamLayout(labels, n_in, n_out, block_mappings, input_output_aliases)
  between = [p for listener in listeners for p in listener.after_inputs(kernel, layout)]
  names += [b.add_param(label) for label in labels[n_in:]]
  for listener in listeners:
    listener.after_outputs(kernel)
  kernel.may_alias = alias_sets(names, n_in, input_output_aliases)
  launch, axes = launch_grid_for(kernel.grid, tuple(grid_mapping.vmapped_dims))
  launch_group = kernel.options.launch_group   # as asked; kernel.launch_group: as it took effect
  grouped = grouped_launch(launch, axes, launch_group)
  kernel.launch_group = launch_group if grouped else 0
  order = grouped or launch
  persistent = _persistent_launch(kernel.options, order)
  kernel.launch_grid = persistent or order
  kernel.persistent = kernel.options.persistent if persistent else 0
  for listener in listeners:
    listener.launch(kernel)
  with contextlib.ExitStack() as tiles:
    axis_ids = None
    if persistent:
      with b.note(f"persistent programs: {kernel.persistent} programs loop over the "
                  f"{math.prod(order)} points of the launch grid"):
        tile = b.fresh("pp_tile")
        tiles.enter_context(b.loop(persistent_loop_header(order, kernel.persistent, tile)))
        # a grouped order reads its one axis, and the third for a third dimension
        axes_read = 1 + (len(axes) > 2) if grouped else len(axes)
        axis_ids = persistent_axis_ids(b, order, tile, axes_read)
    params = _lower_tile(kernel, jaxpr, grid_mapping, axes, axis_ids, grouped, names,
                         labels, between, n_in)
  for listener in listeners:
    params.extend(listener.end(kernel))
  return params


def _persistent_launch(options, launch):
  """The persistent launch grid where the options ask for one and it applies; not in the
  probed variant (its probes time each program once, from entry to end) nor with TMA
  (its descriptors are made at the kernel's top level, before the loop would begin)."""
  if not options.persistent or options.probes or options.tma:
    return None
  return persistent_launch(launch, options.persistent)


def _lower_tile(kernel: KernelContext, jaxpr, grid_mapping, axes, axis_ids, grouped, names,
                labels, between, n_in) -> list[KernelParam]:
  """One point of the launch grid: its program ids, each operand's block, the body."""
  b = kernel.builder
  listeners = kernel.listeners
  block_mappings = grid_mapping.block_mappings
  if grouped:
    with b.note(f"program ids of the grid, launched in groups of {kernel.launch_group} "
                f"along dimension {axes[0][0]}"):
      pids = emit_grouped_program_ids(b, kernel.grid, axes, kernel.launch_group, axis_ids)
  else:
    with b.note("program ids of the grid"):
      pids = emit_program_ids(b, kernel.grid, axes, axis_ids)
  vmapped = set(grid_mapping.vmapped_dims)
  kernel.program_ids = [p for i, p in enumerate(pids) if i not in vmapped]
  kernel.num_programs = [g for i, g in enumerate(kernel.grid) if i not in vmapped]
  refs, params = [], []
  for i, (bm, name, label) in enumerate(zip(block_mappings, names, labels, strict=True)):
    refs.append(block_ref(kernel, bm, name, label, pids,
                          which=f"input {i}" if i < n_in else f"output {i - n_in}"))
    role = "input" if i < n_in else "output"
    if i == n_in:
      params.extend(between)
    params.append(KernelParam(name=name, label=label, dtype=np.dtype(bm.array_aval.dtype).name,
                              shape=tuple(bm.array_aval.shape), role=role,
                              index=i if i < n_in else i - n_in))
  if len(jaxpr.invars) != len(refs):
    raise Unsupported(f"kernel takes {len(jaxpr.invars)} refs but the call has "
                      f"{len(refs)} operands", None)
  for listener in listeners:
    listener.prologue_done(kernel, jaxpr, refs)
  kernel.operand_refs = tuple(refs)
  lower_jaxpr(kernel, jaxpr, refs, parent=None, region="kernel")
  return params
