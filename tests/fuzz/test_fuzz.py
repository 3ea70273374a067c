"""The differential fuzzer's fixed set: 304 random Pallas programs (the same
ones on every run: derandomized), each run through pallas-prof on the CPU
(Triton's interpreter) and through a reference that shares no code with it
(XLA, or JAX's Pallas interpreter), see testkit/fuzz/check.py.

A difference fails the test after hypothesis shrank it; the shrunk program is
saved as a script (PALLAS_PROF_FUZZ_OUT, default a temporary directory) and
named in the failure. `bench/fuzz/fuzz.py` runs the same generator for as long as
you like, with fresh seeds, on the CPU or a GPU.
"""
from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, event, given, settings

from testkit.fuzz.check import Difference, check, save_reproducer
from testkit.fuzz.programs import kernel_programs, loop_sum_programs, tma_kernel_programs, \
    value_programs

OUT = os.environ.get("PALLAS_PROF_FUZZ_OUT") or os.path.join(tempfile.gettempdir(),
                                                             "pallas-prof-fuzz")

def fixed(examples: int):
  return settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                  print_blob=False, suppress_health_check=list(HealthCheck))


# the outcome of every program the fixed set ran in this process, by status
_statuses: list[str] = []
# at most this share of a fixed set may be refused (documented limitations): a set that
# passes only because the generator's programs stopped lowering proves nothing (the
# recorded long runs refused 2.2 %)
MAX_REFUSED = 0.10


def _check(program):
  try:
    outcome = check(program)
  except Difference as e:
    path = save_reproducer(program, str(e), OUT)
    raise Difference(f"{e}\n{program.describe()}\nreproducer: {path}\n{program.source}") from e
  event(outcome.status)
  _statuses.append(outcome.status)
  if outcome.status == "unsupported":
    event(f"unsupported: {outcome.detail[:80]}")


def _run_bounded(run_examples, examples: int):
  """Runs a fixed set and checks that most of its programs ran: every example was
  checked, and at most MAX_REFUSED of them refused."""
  _statuses.clear()
  run_examples()
  refused = _statuses.count("unsupported")
  assert len(_statuses) >= examples, f"{len(_statuses)} of {examples} programs checked"
  assert refused <= MAX_REFUSED * len(_statuses), (
      f"{refused} of {len(_statuses)} programs refused: {sorted(set(_statuses))}")


@fixed(76)
@given(value_programs())
def _values_a(program):
  _check(program)


@fixed(76)
@given(value_programs())
def _values_b(program):
  _check(program)


@fixed(76)
@given(value_programs())
def _values_c(program):
  _check(program)


@fixed(76)
@given(kernel_programs())
def _kernels(program):
  _check(program)


def test_values_match_xla_a():
  _run_bounded(_values_a, 76)


def test_values_match_xla_b():
  _run_bounded(_values_b, 76)


def test_values_match_xla_c():
  _run_bounded(_values_c, 76)


def test_kernels_match_pallas_interpreter():
  _run_bounded(_kernels, 76)


_tma_used: list[bool] = []


@fixed(40)
@given(tma_kernel_programs())
def _tma_kernels(program):
  import warnings
  from pallas_prof.backend import kernel_registry
  from pallas_prof.backend.pallas_call_rule import TmaFallbackWarning
  from testkit.fuzz.check import TMA_ENV
  os.environ[TMA_ENV] = "1"
  try:
    with warnings.catch_warnings():     # fallbacks are expected here (and counted below)
      warnings.simplefilter("ignore", TmaFallbackWarning)
      _check(program)
  finally:
    del os.environ[TMA_ENV]
  lowered = kernel_registry.find(f"fuzz_{program.seed}")
  _tma_used.append(bool(lowered and lowered[-1].generated.tma))


def test_kernels_with_tma_asked_for_match_pallas_interpreter():
  """bench/fuzz/fuzz.py --tma's mode on a fixed set: CompilerParams(tma=True), so each
  load and store TMA can serve goes through a tensor descriptor (kernels in the
  shapes TMA takes, and some it does not): each equal to JAX's Pallas interpreter,
  and the set really used TMA, and really fell back too."""
  _tma_used.clear()
  _run_bounded(_tma_kernels, 40)
  assert 10 <= sum(_tma_used) < len(_tma_used), _tma_used


_persistent_used: list[bool] = []


@fixed(40)
@given(kernel_programs())
def _persistent_kernels(program):
  from pallas_prof.backend import kernel_registry
  from testkit.fuzz.check import PERSISTENT_ENV
  os.environ[PERSISTENT_ENV] = "2"
  try:
    _check(program)
  finally:
    del os.environ[PERSISTENT_ENV]
  lowered = kernel_registry.find(f"fuzz_{program.seed}")
  _persistent_used.append(bool(lowered and lowered[-1].generated.persistent == 2))


def test_kernels_with_two_persistent_programs_match_pallas_interpreter():
  """bench/fuzz/fuzz.py --persistent 2's mode on a fixed set: CompilerParams(persistent=2),
  so two programs loop over each grid of three points or more: each equal to JAX's Pallas
  interpreter, and the set really looped, and really had grids too small to."""
  _persistent_used.clear()
  _run_bounded(_persistent_kernels, 40)
  assert 5 <= sum(_persistent_used) < len(_persistent_used), _persistent_used


_staged_used: list[bool] = []


@fixed(30)
@given(loop_sum_programs())
def _loop_staged_kernels(program):
  from pallas_prof.backend import kernel_registry
  _check(program)
  lowered = kernel_registry.find(f"fuzz_{program.seed}")
  _staged_used.append(bool(lowered and lowered[-1].generated.loop_stages == 3))


def test_loops_without_a_dot_with_loop_stages_match_pallas_interpreter(monkeypatch):
  """bench/fuzz/fuzz.py --loop-stages 3's mode on a fixed set of its loops without a dot
  (chunks of two operands summed in a loop of 5 to 17 iterations): CompilerParams(
  loop_stages=3), each equal to JAX's Pallas interpreter, and every one's loop was staged."""
  from testkit.fuzz.check import LOOP_STAGES_ENV
  monkeypatch.setenv(LOOP_STAGES_ENV, "3")
  _staged_used.clear()
  _run_bounded(_loop_staged_kernels, 30)
  assert len(_staged_used) >= 30 and all(_staged_used), _staged_used


def test_a_wrong_answer_is_caught_and_saved(tmp_path, monkeypatch):
  """The checker is not blind: a pallas-prof result off by one is a Difference,
  and the reproducer it writes runs the same program."""
  import numpy as np
  from testkit.fuzz import check as check_module
  from testkit.fuzz.programs import InputSpec, Program
  program = Program("values", "def fn(x0):\n  v1 = x0 * 3\n  return (v1,)\n",
                    (InputSpec((5, 3), "int32", -9, 9),), 7, 0.0)
  real = check_module.run_pallas_prof
  monkeypatch.setattr(check_module, "run_pallas_prof",
                      lambda *a, **k: [r + np.int32(1) for r in real(*a, **k)])
  with pytest.raises(Difference, match="15 of 15 elements differ"):
    check_module.check(program)
  monkeypatch.setattr(check_module, "run_pallas_prof", real)
  path = save_reproducer(program, "example", str(tmp_path))
  text = open(path).read()
  assert "x0 * 3" in text and "check(program)" in text
  assert check_module.check(program).status == "ok"


@settings(max_examples=150, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(__import__("hypothesis").strategies.data())
def test_row_kernels_never_sum_over_rows(data):
  """A regression: the generator's kernels of whole rows over an overhanging
  last block made `jnp.dot(v6, v6.T)`, which sums over the block's rows, so the
  padding rows leaked into real elements (pallas-prof reads them as 0, JAX's
  interpreter as NaN: 'output 0 (float32[1, 2]): [0, 1]: 0.0 vs nan', found by
  bench/fuzz/fuzz.py's CPU run of 2026-12-02). Such a program is not valid Pallas;
  a dot there may only take the weight matrix `w` on its right."""
  import re
  from hypothesis import strategies as st
  from testkit.fuzz.programs import _rows_kernel
  dtype = data.draw(st.sampled_from(["float32", "float16", "bfloat16", "int8"]))
  program = data.draw(st.composite(lambda draw: _rows_kernel(draw, dtype))())
  for rhs in re.findall(r"jnp\.dot\(\w+, ([\w.]+)", program.source):
    assert rhs == "w", program.source


@pytest.mark.gpu
def test_where_xla_cpu_and_gpu_disagree_pallas_prof_follows_its_device():
  """int32 -> bfloat16 of 2**24 + 2**16 + 1: XLA's CPU rounds through float32
  (2**24), its GPU on jax 0.11.2 once (2**24 + 2**17, as for int64 in
  bench/probes/convert_rounding.py on the H200). The fuzzer's reference is
  XLA on the CPU: a result equal to it is "ok", one equal only to XLA on the
  GPU is "xla_platforms_differ"; pallas-prof equal to neither fails."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from testkit.fuzz import check as check_module
  from testkit.fuzz.programs import InputSpec, Program
  tie = 2 ** 24 + 2 ** 16 + 1
  program = Program("values", "def fn(x0):\n  v1 = x0.astype(jnp.bfloat16)\n  return (v1,)\n",
                    (InputSpec((4,), "int32", tie, tie),), 11, 0.0)
  [x] = check_module.make_inputs(program)
  gpu = jax.devices()[0]
  xla = {d.platform: np.asarray(jax.jit(lambda v: v.astype(jnp.bfloat16))(jax.device_put(x, d)),
                                np.float32) for d in (jax.devices("cpu")[0], gpu)}
  [got] = check_module.run_pallas_prof(program, [x], gpu)
  got = np.asarray(got, np.float32)
  print("XLA cpu", xla["cpu"][0], "XLA gpu", xla["gpu"][0], "pallas-prof gpu", got[0])
  if np.array_equal(got, xla["cpu"]):
    assert check_module.check(program, gpu).status == "ok"
  elif np.array_equal(got, xla["gpu"]):
    assert check_module.check(program, gpu).status == "xla_platforms_differ"
  else:
    pytest.fail(f"pallas-prof gives {got}, XLA's CPU {xla['cpu']}, XLA's GPU {xla['gpu']}")


def test_where_xla_folds_constants_its_own_way_pallas_prof_follows_its_kernels():
  """A regression from bench/fuzz/fuzz.py's CPU run of 2026-12-02: atan2 of an iota
  with itself. Jitted, XLA folds the constant to NaN at (0, 0) (jax 0.10.2's
  CPU backend); its kernel, op by op, gives 0, as IEEE's atan2(+0, +0) is, and
  so does pallas-prof. Such a program is "xla_jit_and_eager_differ" (counted
  apart), not a Difference; a result equal to neither would be one."""
  import jax
  import numpy as np
  from testkit.fuzz import check as check_module
  from testkit.fuzz.programs import InputSpec, Program
  program = Program("values", "def fn(x0):\n  v1 = lax.broadcasted_iota(jnp.float32, (1, 2), 1)\n"
                    "  v2 = jnp.arctan2(v1, v1)\n  return (v2,)\n",
                    (InputSpec((1, 2), "int32", -100, 100),), 0, 2e-4)
  inputs = check_module.make_inputs(program)
  fn = check_module.build(program)["fn"]
  cpu = jax.devices("cpu")[0]      # the check's reference is XLA on the CPU, on any machine
  with jax.default_device(cpu):
    on_cpu = [jax.device_put(a, cpu) for a in inputs]
    jitted, eager = (np.asarray(f(*on_cpu)[0]) for f in (jax.jit(fn), fn))
  [got] = check_module.run_pallas_prof(program, inputs)
  np.testing.assert_array_equal(np.asarray(got), eager)      # [0, pi/4]
  assert float(np.asarray(got)[0, 0]) == 0.0
  outcome = check_module.check(program)
  same = np.array_equal(jitted, eager, equal_nan=True)
  assert outcome.status == ("ok" if same else "xla_jit_and_eager_differ"), (outcome, jitted)


def test_no_division_by_a_value_xla_folds_while_compiling():
  """A regression: `lax.rem(v3, v3)` of an iota killed a fuzz worker with
  SIGFPE inside XLA's compiler (its constant folder divides by the iota's 0;
  jaxlib 0.10.2, CPU run of 2026-12-02). A divisor computed from constants
  alone is kept nonzero; one computed from the inputs may still be zero
  (XLA defines x / 0 and x % 0, and pallas-prof follows)."""
  from testkit.fuzz.programs import Builder, Var, _binary
  for template in ("lax.rem({a}, {b})", "lax.div({a}, {b})"):
    draws = {"operand": 0, "binary": template}
    b = Builder(lambda strategy, label=None: draws[label], [Var("x0", (9, 1, 3), "uint32", 100)])
    iota = b.add("lax.broadcasted_iota(jnp.int8, (9, 1, 3), 1)", 9, "iota")
    assert iota.constant and not b.vars[0].constant
    _binary(b)
    assert b.lines[-1] == f"v2 = {template.format(a='v1', b='(v1 & 7) + 1')}", b.lines
    from_input = Builder(lambda strategy, label=None: draws[label],
                         [Var("x0", (9, 1, 3), "uint32", 100)])
    _binary(from_input)
    assert from_input.lines[-1] == f"v1 = {template.format(a='x0', b='x0')}", from_input.lines


def test_where_xla_rounds_a_bfloat16_scan_at_every_step_pallas_prof_is_the_exact_one():
  """A regression from bench/fuzz/fuzz.py's CPU run of 2026-12-02 (seed 20261204): sin of a
  bfloat16 cumsum over 19 rows. XLA's CPU scan rounds to bfloat16 at every step (last
  row -3.25), pallas-prof accumulates in float32 and rounds once (-3.328, as the exact
  sum), and sin turns the gap into 0.108 against 0.185. Equal to the program run on
  float32 inputs and rounded back, it is "xla_low_precision_accumulates" (counted
  apart); a result equal to neither would be a Difference."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from testkit.fuzz import check as check_module
  from testkit.fuzz.programs import InputSpec, Program
  program = Program("values", "def fn(x0):\n  v1 = jnp.cumsum(x0, axis=0)\n  v4 = jnp.sin(v1)\n"
                    "  return (v4,)\n", (InputSpec((19, 2), "bfloat16", -4, 4),), 0, 0.06,
                    76.0, ("cumsum", "unary"))
  [x] = check_module.make_inputs(program)
  [got] = check_module.run_pallas_prof(program, [x])
  exact = np.sin(np.cumsum(np.asarray(x, np.float32), axis=0).astype(jnp.bfloat16)
                 .astype(np.float32))
  np.testing.assert_allclose(np.asarray(got, np.float32), exact, atol=1e-2)
  status = check_module.check(program).status
  xla = np.asarray(jax.jit(lambda v: jnp.sin(jnp.cumsum(v, axis=0)))(x), np.float32)
  agree = np.allclose(xla, np.asarray(got, np.float32), atol=0.06, rtol=0.06)
  assert status == ("ok" if agree else "xla_low_precision_accumulates"), status


def test_where_xla_float32_is_an_ulp_off_at_a_discontinuity_pallas_prof_follows_float64():
  """A regression from bench/fuzz/fuzz.py's CPU run of 2026-12-02 (seed 20261203): at x = -3,
  tanh(x*x)*0.5 + x*0.25 + 0.25 is -1.5e-8 in float64; XLA's float32 tanh(9) is 1.0 (the
  nearest float32 is 1 - 5.96e-8), which makes the sum exactly 0, and atan2(-v, -v) turns
  that into -pi where pallas-prof, whose tanh is the nearest float32, gives pi/4. Equal to
  the program run in float64 and rounded back, it is "xla_less_precise_than_float64"
  (counted apart); a result equal to neither would be a Difference."""
  import jax
  import numpy as np
  from testkit.fuzz import check as check_module
  from testkit.fuzz.programs import InputSpec, Program
  source = ("def fn(x0):\n  v3 = x0 * x0\n  v4 = jnp.tanh(v3) * 0.5 + x0 * 0.25 + 2 * 0.125\n"
            "  v5 = -v4\n  v6 = jnp.arctan2(v5, v5)\n  return (v6,)\n")
  program = Program("values", source, (InputSpec((1,), "float32", -3, -3),), 0, 2e-4, 32.0,
                    ("binary", "unary"))
  [x] = check_module.make_inputs(program)
  assert float(x[0]) == -3.0
  [got] = check_module.run_pallas_prof(program, [x])
  xla = np.asarray(jax.jit(check_module.build(program)["fn"])(x)[0])
  status = check_module.check(program).status
  if np.allclose(np.asarray(got), xla):
    assert status == "ok", status
  else:
    assert float(np.asarray(got)[0]) == np.float32(np.pi / 4)   # float64's answer
    assert status == "xla_less_precise_than_float64", (status, got, xla)


@pytest.mark.parametrize("with_equation", [True, False])
def test_triton_rejecting_the_generated_code_is_a_bug_not_a_limitation(with_equation):
  """A compile-stage failure (on a GPU) is pallas-prof's bug. With an equation its message
  reads "cannot lower `add` ...: Triton failed in the ttir stage: ...", which the
  limitation pattern took for a documented refusal, as it did any Triton message saying
  "not supported": the fuzzer counted such programs as 'unsupported', never a Difference."""
  import types
  from pallas_prof import LoweringError
  from testkit.fuzz.check import _is_limitation
  eqn = types.SimpleNamespace(primitive="add", text="c:f32[8] = add a b", in_avals=["f32[8]"],
                              file="prog.py", line=3, function="kernel", index=0)
  error = LoweringError("Triton failed in the ttir stage: CompilationError: this layout is "
                        "not supported", kernel="fuzz_1", eqn=eqn if with_equation else None,
                        stage="ttir")
  assert not _is_limitation(error, f"{type(error).__name__}: {error}")
  refusal = LoweringError("reshape of (5, 6) to (30,): pallas-prof pads each dimension to a "
                          "power of two", kernel="fuzz_1", eqn=eqn)
  assert _is_limitation(refusal, f"{type(refusal).__name__}: {refusal}")    # still counted
  too_big = LoweringError("Triton failed in the cubin stage: OutOfResources: out of resource: "
                          "shared memory, Required: 262144, Hardware limit: 232448. Reducing "
                          "block sizes or `num_stages` may help.", kernel="fuzz_1",
                          eqn=eqn if with_equation else None, stage="cubin")
  assert _is_limitation(too_big, f"{type(too_big).__name__}: {too_big}")   # the blocks' size


def test_only_a_program_that_sums_may_blame_xla_for_accumulating_in_16_bits():
  """pallas-prof's answer equal to the program run in float32 and rounded back is
  XLA's low-precision accumulation only where something accumulates: the same
  answer from a program of elementwise steps would be pallas-prof skipping a
  16-bit rounding XLA makes, a difference to report (the classifier's input is
  the same here, the program's features differ)."""
  import jax
  import jax.numpy as jnp
  import numpy as np
  from testkit.fuzz import check as check_module
  from testkit.fuzz.programs import InputSpec, Program
  source = "def fn(x0):\n  v1 = jnp.cumsum(x0, axis=0)\n  v4 = jnp.sin(v1)\n  return (v4,)\n"
  verdicts = {}
  for features in (("cumsum", "unary"), ("unary",)):
    program = Program("values", source, (InputSpec((19, 2), "bfloat16", -4, 4),), 0, 0.06,
                      76.0, features)
    [x] = check_module.make_inputs(program)
    wide = np.asarray(jax.jit(lambda v: jnp.sin(jnp.cumsum(v.astype(jnp.float32), axis=0)))(x))
    xla = np.asarray(jax.jit(lambda v: jnp.sin(jnp.cumsum(v, axis=0)))(x), np.float32)
    assert not np.array_equal(xla, wide.astype(jnp.bfloat16).astype(np.float32))
    verdicts[features] = check_module._xla_agreeing_elsewhere(
        program, [x], [wide.astype(jnp.bfloat16)], None)
  assert verdicts == {("cumsum", "unary"): "xla_low_precision_accumulates", ("unary",): None}


def test_a_fixed_set_that_mostly_refuses_fails():
  """_run_bounded's check can fail: a set whose programs were all refused, or that
  checked fewer programs than asked, is not a pass."""
  with pytest.raises(AssertionError, match="76 of 76 programs refused"):
    _run_bounded(lambda: _statuses.extend(["unsupported"] * 76), 76)
  with pytest.raises(AssertionError, match="3 of 76 programs checked"):
    _run_bounded(lambda: _statuses.extend(["ok"] * 3), 76)
  _run_bounded(lambda: _statuses.extend(["ok"] * 70 + ["unsupported"] * 6), 76)


def test_a_periodic_function_of_a_large_inexact_value_is_fragile():
  """bench/fuzz/fuzz.py --tma's CPU run of 2026-12-02 (seed 4244): sin(dot(c, c.T)) where c
  is a float16 cumsum over 19 rows and the dot reaches thousands. XLA's scan and
  Triton's sum float16 in different orders, a last bit apart, and sin turned that into
  0.01-0.14 at 8 of 361 elements. Such a program may differ at a few elements (as one
  with a floor of an inexact value may); sin of a small value, or of an exact large one,
  stays strict."""
  from testkit.fuzz.programs import Builder, Var
  b = Builder(None, [Var("x1", (19, 1), "float16", 4.0, False, False)])
  c = b.add("jnp.cumsum(x1, axis=0)", 76.0, "cumsum")
  d = b.add(f"jnp.dot({c.name}, {c.name}.T, precision=HIGHEST, "
            "preferred_element_type=jnp.float32)", 5776.0, "dot")
  assert not b.fragile and d.inexact
  b.add(f"jnp.sin({d.name})", 1.0, "unary")
  assert b.fragile
  small = Builder(None, [Var("x1", (5, 1), "float16", 1.0, False, False)])
  s = small.add("jnp.cumsum(x1, axis=0)", 5.0, "cumsum")
  small.add("jnp.sin(x1 * 100)", 1.0, "unary")      # large, but exact: an input
  small.add(f"jnp.sin({s.name})", 1.0, "unary")     # inexact, but 5 at most
  assert not small.fragile
  wide = Builder(None, [Var("x1", (5, 1), "float32", 4.0, False, False)])
  w = wide.add("jnp.cumsum(x1, axis=0)", 20.0, "cumsum")
  wide.add(f"jnp.sin({w.name})", 1.0, "unary")      # float32: a last bit at 20 is tiny
  assert not wide.fragile


def test_a_periodic_function_of_a_float16_value_past_its_tolerance_is_fragile():
  """The GPU fuzzer's seed 20261207 (triton 3.9, the H200): float16 v2 = x1 * x1 + 1 (at
  most 17), sin(v2) squared. XLA's fused reference rounds x1 * x1 + 1 once, pallas-prof
  twice as JAX's float16 op by op does: 16.27 against 16.25 at element 35, and 0.2803
  against 0.2664 after sin and the square, past float16's tolerance of 0.01. One unit in
  the last place at 16 (0.0156) is already more than the tolerance: such a sin is
  ill-conditioned in float16, as one of a value in the hundreds is in float32."""
  from testkit.fuzz.programs import Builder, Var
  b = Builder(None, [Var("x1", (67,), "float16", 4.0, False, False)])
  v2 = b.add("x1 * x1 + 1", 17.0, "binary")
  assert v2.inexact and not b.fragile              # contractible into an FMA
  b.add(f"jnp.sin({v2.name})", 1.0, "unary")
  assert b.fragile


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize("axis, keepdims", [(0, False), (None, False), (None, True), (1, False)])
def test_an_integer_sum_past_its_range_wraps_as_xla_does(dtype, axis, keepdims):
  """A regression from bench/fuzz/fuzz.py's CPU run of 2026-12-03 (seed 20261211): jnp.sum of an
  int32 vector to a scalar, past int32's range, failed under Triton's interpreter
  ("OverflowError: Python integer -5883351266 out of bounds for int32": its np.sum widens
  to int64, and a scalar result is not narrowed back). XLA and the GPU wrap; so does
  pallas-prof's CPU path now. Non-scalar results wrapped before and still do."""
  import jax.numpy as jnp
  import numpy as np
  from testkit.helpers import run_on_values, xla_on_cpu
  x = np.full((3, 19), 2 ** 30 + 7, dtype)
  x[1, 2] = 12345
  fn = (lambda v: (jnp.sum(v[0], axis=0),)) if axis == 0 else \
      (lambda v: (jnp.sum(v, axis=axis, keepdims=keepdims),))
  [got], [want] = run_on_values(fn, x), xla_on_cpu(fn, x)
  assert np.asarray(got).dtype == np.asarray(want).dtype == np.dtype(dtype)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_the_fuzzers_int32_sum_program_agrees():
  """The program that found it, as the fuzzer shrank it."""
  from testkit.fuzz.programs import InputSpec, Program
  program = Program("values", "def fn(x0, x1):\n  v2 = jnp.prod(x1, axis=0, keepdims=False)\n"
                    "  v3 = v2 + v2\n  v4 = -v3\n  v5 = -v4\n"
                    "  v6 = jnp.sum(v5, axis=0, keepdims=False)\n"
                    "  v7 = jnp.reshape(v6, (1,))\n  return (v7,)\n",
                    (InputSpec((5, 18), "float32", special=True),
                     InputSpec((5, 18), "int32", -100, 100)), 0, 2e-4, 4.0,
                    ("binary", "reduce", "scalar output", "unary"))
  assert check(program).status == "ok"
