"""KernelBuilder: emits one Triton-language module per Pallas kernel.

The builder hands out fresh readable names, keeps typed values (dtype, logical
shape, the loops they vary with), collects module-level helper functions
(reduction combiners and the like), and remembers for every generated line
which jaxpr equation produced it. Every line of the kernel body ends with a comment naming its
equation and the user's file:line, so the source reads on its own.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import re
from collections import Counter
from typing import Iterator

import numpy as np
import jax.numpy as jnp

from ..artifacts import EquationRecord
from ..equation_text import Described, Description
from . import triton_names as tl

# --- dtypes ------------------------------------------------------------------

_TL_DTYPES = {
    "bool": tl.int1,
    "int8": tl.int8, "int16": tl.int16, "int32": tl.int32, "int64": tl.int64,
    "uint8": tl.uint8, "uint16": tl.uint16, "uint32": tl.uint32, "uint64": tl.uint64,
    "float16": tl.float16, "bfloat16": tl.bfloat16, "float32": tl.float32,
    "float64": tl.float64,
    "float8_e4m3fn": tl.float8e4nv, "float8_e5m2": tl.float8e5,
    # 4-bit integers live in registers as 8-bit ones; in memory two share a
    # byte (element 2k in the low nibble), which the memory rules pack/unpack
    "int4": tl.int8, "uint4": tl.uint8,
}

_SIGNATURE_TYPES = {
    "bool": "i1",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
    "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "int4": "u8", "uint4": "u8",       # packed bytes
}

SUPPORTED_DTYPES = tuple(_TL_DTYPES)

# the region of a jaxpr a rule traces and lowers in its equation's place (erf_inv's polynomial)
DECOMPOSITION = "decomposition"
# the hint of every refusal of complex values (a rule's operands, or a literal)
COMPLEX_HINT = ("Triton has no complex numbers: carry the real and imaginary parts as "
                "two float arrays and write the complex arithmetic out on them")


class UnsupportedDtype(TypeError):
  pass


def dtype_name(dtype) -> str:
  return np.dtype(dtype).name


def tl_dtype(dtype) -> str:
  try:
    return _TL_DTYPES[dtype_name(dtype)]
  except KeyError:
    raise UnsupportedDtype(
        f"dtype {dtype_name(dtype)} has no Triton equivalent; supported: "
        + ", ".join(SUPPORTED_DTYPES)) from None


def signature_type(dtype) -> str:
  try:
    return _SIGNATURE_TYPES[dtype_name(dtype)]
  except KeyError:
    raise UnsupportedDtype(
        f"dtype {dtype_name(dtype)} has no Triton equivalent; supported: "
        + ", ".join(SUPPORTED_DTYPES)) from None


def is_float(dtype) -> bool:
  return jnp.issubdtype(dtype, jnp.floating)


def is_int(dtype) -> bool:
  return jnp.issubdtype(dtype, jnp.integer)


def is_signed(dtype) -> bool:
  return jnp.issubdtype(dtype, jnp.signedinteger)


def is_bool(dtype) -> bool:
  return np.dtype(dtype) == np.bool_


def is_packed4(dtype) -> bool:
  """int4/uint4: two elements per byte in memory, one int8/uint8 in registers."""
  return np.dtype(dtype).name in ("int4", "uint4")


def register_dtype(dtype) -> np.dtype:
  """The dtype a value of `dtype` has in the generated kernel's registers."""
  name = np.dtype(dtype).name
  return np.dtype({"int4": np.int8, "uint4": np.uint8}.get(name, dtype))


def is_low_float(dtype) -> bool:
  """16-bit and 8-bit floats: Triton (and its interpreter) computes these in f32."""
  return is_float(dtype) and np.dtype(dtype).itemsize < 4


def next_pow2(n: int) -> int:
  return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def padded_shape(shape) -> tuple[int, ...]:
  return tuple(next_pow2(d) for d in shape)


# --- values ------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Value:
  """A typed value of the generated kernel.

  `expr` is a Python expression in the generated module (usually a name).
  `shape` is the logical (JAX) shape; the Triton tensor has `padded` shape,
  each dimension rounded up to a power of two. Lanes beyond the logical size
  hold unspecified values: rules that mix lanes (reductions, dot, reshape)
  mask them explicitly.
  `const` is set for literals known at lowering time.
  `loops`: the loops being emitted (KernelBuilder.loop's ids) from one iteration of
  which to the next the value may change. A value computed from operands varies with
  the loops they vary with (KernelBuilder.value); a loop's counter and carries with it
  and every loop around it; a value read from memory (or an atomic's, an inline asm's)
  with every loop open where it is read; a branch's result with its condition too.
  Constants with none. Derived, so not part of a value's identity (equality, hashing:
  the dispatcher's common subexpressions). It describes the emitted code (a load stays
  in its loop, so what is computed from it does too), not the user's program, whose
  reads of a ref the loop never writes the advice counts as the same every iteration
  (EquationRecord.invariant, control_flow.mark_invariant).
  """
  expr: str
  dtype: np.dtype
  shape: tuple[int, ...] = ()
  const: object = None
  loops: frozenset[int] = dataclasses.field(default=frozenset(), compare=False)

  @property
  def padded(self) -> tuple[int, ...]:
    return padded_shape(self.shape)

  @property
  def is_padded(self) -> bool:
    return self.padded != tuple(self.shape)

  @property
  def ndim(self) -> int:
    return len(self.shape)

  @property
  def is_scalar(self) -> bool:
    return not self.shape

  def __str__(self) -> str:
    return self.expr


def literal(value, dtype) -> str:
  """A Triton expression for a scalar constant of exactly `dtype`."""
  dtype = np.dtype(dtype)
  name = dtype.name
  if is_bool(dtype):
    return "True" if bool(value) else "False"
  if is_float(dtype):
    v = float(value)
    if math.isnan(v):
      text = 'float("nan")'
    elif math.isinf(v):
      text = 'float("inf")' if v > 0 else 'float("-inf")'
    else:
      text = repr(v)
    if name == "float32" and math.isfinite(v):
      return text
    if is_low_float(dtype):
      # built in f32 and rounded: Triton's interpreter has no 16/8-bit constants
      return f"{tl.full}((), {text}, {tl.float32}).to({tl_dtype(dtype)})"
    return f"{tl.full}((), {text}, {tl_dtype(dtype)})"
  v = int(value)
  if name == "int32":
    return str(v) if v >= 0 else f"({v})"
  return f"{tl.full}((), {v}, {tl_dtype(dtype)})"


# --- equations and lines -----------------------------------------------------

class EqnInfo(Described):
  """One equation while its kernel is being lowered: what the line map, the
  observer's span and an error report need, and the facts its rule records.
  `record()` makes the frozen EquationRecord the GeneratedKernel keeps.

  The equation's text and avals are rendered lazily (a Description):
  lowering with tracing off never pays for pretty-printing.
  """
  __slots__ = ("index", "path", "primitive", "file", "line", "function", "parent",
               "region", "description", "facts")

  def __init__(self, *, index: int, path: str, primitive: str, file: str | None,
               line: int | None, function: str | None, parent: int | None,
               region: str = "kernel", describe=None):
    self.index = index              # preorder index over the kernel and nested jaxprs
    self.path = path                # "4" or "4.body.2": position in the nesting
    self.primitive = primitive
    self.file = file
    self.line = line
    self.function = function
    self.parent = parent            # index of the control-flow equation containing it
    self.region = region            # kernel | index_map x_ref | body | cond | branch 1 ...
    self.description = Description(describe)
    self.facts: dict = {}           # EquationRecord's work facts, as the rule records them

  def record(self, lines: tuple[int, ...] = ()) -> EquationRecord:
    return EquationRecord(index=self.index, path=self.path, primitive=self.primitive,
                          file=self.file, line=self.line, function=self.function,
                          parent=self.parent, region=self.region,
                          description=self.description, lines=tuple(lines), **self.facts)

  def __repr__(self) -> str:
    return f"EqnInfo({self.index}, {self.primitive}, {self.location})"


@dataclasses.dataclass
class _Line:
  indent: int
  text: str
  eqn: int | None
  note: str | None = None


_NAME_RE = re.compile(r"[^0-9a-zA-Z_]")
_RESERVED = {"tl", "triton", "libdevice", "range", "float", "int", "min", "max",
             "True", "False", "None", "and", "or", "not", "if", "else", "for",
             "while", "in", "is", "def", "return", "lambda", "pass", "del",
             "import", "from", "as", "with", "class", "global", "try", "except"}



def sanitize(name: str) -> str:
  name = _NAME_RE.sub("_", name) or "v"
  if name[0].isdigit():
    name = "_" + name
  return name


# the generated module's header (triton_names.py: what its `tl.` names resolve in)
IMPORTS = tl.IMPORTS


class KernelBuilder:
  """Accumulates the body of one @triton.jit kernel and its helpers.

  The module is laid out as: header comments, imports, the kernel, then
  module-level helpers and constants (Triton resolves globals when it
  compiles, so helpers may follow the kernel). Because the kernel comes
  first, a body line's final line number is known the moment it is emitted.
  """

  def __init__(self, kernel_name: str, header: list[str] | None = None):
    self.kernel_name = sanitize(kernel_name)
    self.header = list(header or [])
    self.params: list[str] = []
    self._lines: list[_Line] = []
    self._helpers: dict[str, list[str]] = {}
    self._names: Counter[str] = Counter()
    self._taken: set[str] = set(_RESERVED) | {self.kernel_name}
    self._indent = 1
    self.current_eqn: int | None = None
    self.current_note: str | None = None
    self.eqns: list[EqnInfo] = []
    self.module_constants: dict[str, str] = {}
    # the ids of the loops being emitted, innermost last (Value.loops)
    self._open_loops: list[int] = []
    self._loops_made = 0
    # the loops the current equation's operands vary with (equation()); None outside
    # an equation: then a value is taken to vary with every loop being emitted
    self._operand_loops: frozenset[int] | None = None

  # names ---------------------------------------------------------------
  def fresh(self, hint: str) -> str:
    base = sanitize(hint)
    while True:
      self._names[base] += 1
      count = self._names[base]
      name = base if count == 1 else f"{base}_{count}"
      if name not in self._taken:
        self._taken.add(name)
        return name

  def add_param(self, name: str) -> str:
    name = self.fresh(name)
    self.params.append(name)
    return name

  # emission ------------------------------------------------------------
  @property
  def _prefix_len(self) -> int:
    # header, imports, blank line, blank line, decorator, def line
    return len(self.header) + len(IMPORTS) + 4

  def line_number(self, body_index: int) -> int:
    """The 1-based line, in the rendered module, of body line `body_index`."""
    return self._prefix_len + body_index + 1

  @property
  def num_lines(self) -> int:
    return len(self._lines)

  def emit(self, statement: str) -> None:
    for part in statement.splitlines():
      self._lines.append(_Line(self._indent, part, self.current_eqn, self.current_note))

  def emit_at(self, body_index: int, statement: str, note: str | None = None) -> None:
    """A line of the kernel's top level before body line `body_index`, for prologue
    code whose need shows only later in the body (the TMA descriptors it uses); the
    lines after it move down."""
    self._lines.insert(body_index, _Line(1, statement, None, note))

  # loop variance -------------------------------------------------------
  @property
  def open_loops(self) -> frozenset[int]:
    """The loops being emitted here: what a value read from memory varies with."""
    return frozenset(self._open_loops)

  def varies(self, *values: Value) -> bool:
    """Whether any of `values` may change from one iteration of the innermost loop
    being emitted to the next (Value.loops). False outside loops."""
    return bool(self._open_loops) and any(self._open_loops[-1] in v.loops for v in values)

  def loops_of(self, of=None, *, opaque: bool = False) -> frozenset[int]:
    """The loops a value made here varies with: those of the Values in `of`, the
    operands it is computed from (None: the current equation's operands, or outside
    an equation every loop being emitted); `opaque` (a load, an atomic, inline
    assembly: not a function of its operands alone): every loop being emitted, and
    what the equation computes after it counts it among its operands."""
    if opaque:
      if self._operand_loops is not None:
        self._operand_loops = self._operand_loops | self.open_loops
      return self.open_loops
    if of is None and self._operand_loops is None:
      return self.open_loops
    if of is None:
      return self._operand_loops
    return frozenset().union(*(v.loops for v in of))

  @contextlib.contextmanager
  def loop(self, header: str) -> Iterator[frozenset[int]]:
    """A loop's block (`for ...:`, `while ...:`). Yields the loops its counter and
    carries vary with (their Value.loops): this one and every loop around it."""
    with self.block(header):
      self._loops_made += 1
      self._open_loops.append(self._loops_made)
      try:
        yield self.open_loops
      finally:
        self._open_loops.pop()

  @contextlib.contextmanager
  def note(self, text: str) -> Iterator[None]:
    """Comments lines that belong to no equation (e.g. a BlockSpec's block start)."""
    previous = self.current_note
    self.current_note = text
    try:
      yield
    finally:
      self.current_note = previous

  def assign(self, hint: str, expr: str) -> str:
    name = self.fresh(hint)
    self.emit(f"{name} = {expr}")
    return name

  def value(self, hint: str, expr: str, dtype, shape=(), *, of=None,
            opaque: bool = False) -> Value:
    """`hint = expr` as a Value; `of`, `opaque`: what its loop variance comes from
    (loops_of)."""
    loops = self.loops_of(of, opaque=opaque)
    return Value(self.assign(hint, expr), np.dtype(dtype), tuple(shape), loops=loops)

  @contextlib.contextmanager
  def block(self, header: str) -> Iterator[None]:
    """An indented block: `for ...:`, `if ...:`, `while ...:`."""
    self.emit(header)
    self._indent += 1
    start = len(self._lines)
    try:
      yield
    finally:
      if len(self._lines) == start:
        self.emit("pass")
      self._indent -= 1

  @contextlib.contextmanager
  def equation(self, eqn_index: int | None,
               operand_loops: frozenset[int] | None = None) -> Iterator[None]:
    """Lines emitted inside belong to equation `eqn_index`; `operand_loops`: the loops
    its operands vary with, which values its rule computes vary with (loops_of)."""
    previous = self.current_eqn, self._operand_loops
    self.current_eqn, self._operand_loops = eqn_index, operand_loops
    try:
      yield
    finally:
      self.current_eqn, self._operand_loops = previous

  def add_eqn(self, info: EqnInfo) -> None:
    self.eqns.append(info)

  # module-level helpers -------------------------------------------------
  def helper(self, name: str, source: str) -> str:
    """Adds a module-level @triton.jit helper once; returns its name."""
    name = sanitize(name)
    if name not in self._helpers:
      self._taken.add(name)
      self._helpers[name] = source.strip("\n").splitlines()
    return name

  def constant(self, name: str, expr: str) -> str:
    """A module-level `NAME: tl.constexpr = expr` (e.g. infinities)."""
    name = sanitize(name)
    if name not in self.module_constants:
      self._taken.add(name)
      self.module_constants[name] = expr
    return name

  # rendering -----------------------------------------------------------
  def render(self) -> tuple[str, dict[int, int]]:
    """The module's source and its line map {1-based line: eqn index}."""
    out: list[str] = [f"# {c}" if c else "#" for c in self.header]
    out += IMPORTS + ["", "", "@triton.jit", f"def {self.kernel_name}({', '.join(self.params)}):"]
    assert len(out) == self._prefix_len
    line_map: dict[int, int] = {}
    eqns = {e.index: e for e in self.eqns}
    width = max((4 * ln.indent + len(ln.text) for ln in self._lines), default=0)
    width = min(max(width, 40), 100)
    for ln in self._lines:
      code = "    " * ln.indent + ln.text
      if ln.eqn is not None and ln.eqn in eqns:
        e = eqns[ln.eqn]
        code = code.ljust(width) + e.line_comment
        line_map[len(out) + 1] = ln.eqn
      elif ln.note:
        code = f"{code.ljust(width)}  # {ln.note}"
      out.append(code)
    if not self._lines:
      out.append("    pass")
    for name, body in self._helpers.items():
      out += ["", "", "@triton.jit"] + body
    if self.module_constants:
      out.append("")
    for name, expr in self.module_constants.items():
      out.append(f"{name}: {tl.constexpr} = {expr}")
    out.append("")
    return "\n".join(out), line_map
