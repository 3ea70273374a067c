"""The only package that knows how JAX and Triton differ between versions.

pallas-prof runs on jax 0.10.x (CPU machines, CI) and jax 0.11.x (the GPU
machine), with triton 3.6. Everything that reaches into JAX's or Triton's
private modules goes through here, so a version bump touches one package
(and compiling/triton_compat.py, which knows Triton's compiler).

Callers import the package and use its names (`compat.pallas_call_p`); each
module below owns one area of JAX's internals:

  jax_names      the Pallas, state and core names the lowering and its rules use
  jaxprs         jaxprs' shapes across versions, tracing, evaluating and printing them
  source_info    where an equation came from (the user's frame); JAX's tracebacks
  mlir_lowering  registering the pallas_call rule; MLIR lowering and jaxlib's Triton call
  xla_numerics   what XLA computes where its backends differ, and its libdevice
  runtime        JAX's and Triton's running state (devices, backends, distributed,
                 jax.profiler), and JAX's dispatch of compiled programs
"""
from __future__ import annotations

from jax._src import core as jax_core
from jax._src import source_info_util
from jax._src.state import primitives as state_primitives

from .jax_names import (
    JAX_VERSION, JAXPR_TYPES, TRITON_PRIMITIVES_MODULE, AbstractRef, AccumEffect, Blocked,
    BoundedSlice, DropVar, Element, Jaxpr, Literal, NDIndexer, ReadEffect, Slice, Squeezed,
    WriteEffect, add_jaxvals_p, addupdate_p, block_dim_size, control_flow_allowed_effects,
    copy_p, custom_jvp_call_p, custom_vjp_call_jaxpr_p, custom_vjp_call_p, debug_print_p,
    erf_inv_lowering_helper, get_p, get_ref_and_transforms, jit_p, kernel_local_effects,
    lax_special_impl, load_p, masked_swap_p, merge_callback_args, multiple_of_p,
    num_programs_p, pallas_call_p, pallas_dot, pallas_load, pallas_store,
    pattern_match_scan_to_fori_loop, program_id_p, reciprocal_p, reduce_precision_p,
    register_discharge_rule, remat_p, reshard_p, source_info_to_location, stack_p,
    stop_gradient_p, swap_abstract_eval, swap_p, transform_array, unstack_p)
from .jaxprs import (
    bind_equation, closed_call_primitives, equation_context, equation_lines, eval_jaxpr, map_equations, name_vars, open_jaxpr, pp_equation,
    pp_var, print_jaxpr, scan_layout, sub_jaxprs, trace_to_jaxpr)
from .mlir_lowering import (
    aval_to_ir_type, custom_call, default_pallas_call_lowering, gpu_triton, ir, lower_fun,
    make_triton_kernel, register_backend_lowering_rule, register_platform_lowering,
    sanitize_name)
from .runtime import (
    CALLBACK_LOGGERS, backends_initialized, distributed_process, forget_failed_tokens,
    gpu_compute_capability, jax_profiler_session_active, set_triton_interpret,
    wrap_python_executions)
from .source_info import (
    ErrorWithUserContext, frame_in, hide_frames_in_tracebacks, is_user_file, user_frame)
from .xla_numerics import (
    arch_without_tf32_dots, lowering_for, xla_libdevice_path, xla_rounds_f64_to_16bit_twice,
    xla_rounds_tf32_dot_operands)
