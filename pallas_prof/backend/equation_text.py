"""An equation as text: its description, rendered only when first asked for, and
the properties that read it (shared by the lowering's EqnInfo and the frozen
EquationRecord); the abstract values it and a call work on (Aval). Imports nothing
of JAX: artifacts load without it.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Callable, Iterable

from ..serial import Text, decode

_ARRAY = re.compile(r"(~?)(\w+)\[([\d,]*)\]")


@dataclasses.dataclass(frozen=True)
class Aval(Text):
  """An abstract value as JAX hands it over: an array's shape and dtype name, weakly typed
  (a Python scalar's type) or not; None for what has neither (a token). Kept typed from
  where JAX gives it into the run report and the profile; `str()` is JAX's own text, made
  here alone, for showing and for the files (report.json, kernel.json hold the text).
  `shown` holds that text where it is more than the array's (a ref's
  `Ref<default>{float32[8]}`)."""
  shape: tuple[int, ...] | None
  dtype: str | None
  weak_type: bool = False
  shown: str = ""

  def __str__(self) -> str:
    return self.shown or self.array_text(weak=True)

  def array_text(self, weak: bool = False) -> str:
    """`float32[8,128]` (`~int32[]` weakly typed, with `weak`)."""
    mark = "~" if weak and self.weak_type else ""
    return f"{mark}{self.dtype}[{','.join(map(str, self.shape or ()))}]"

  @classmethod
  def of(cls, aval) -> "Aval":
    """From JAX's abstract value (a ShapedArray, a ref's, any other)."""
    shape, dtype = getattr(aval, "shape", None), getattr(aval, "dtype", None)
    if shape is None or dtype is None:
      return cls(None, None, shown=str(aval))
    typed = cls(tuple(int(d) for d in shape), getattr(dtype, "name", str(dtype)),
                bool(getattr(aval, "weak_type", False)))
    text = str(aval)
    return typed if text == str(typed) else dataclasses.replace(typed, shown=text)

  @classmethod
  def parse(cls, text) -> "Aval":
    """From its text, as a saved run (kernel.json, report.json) holds it: the one place
    an aval is read back from text."""
    if isinstance(text, Aval):
      return text
    text = str(text)
    m = _ARRAY.search(text)
    if m is None:
      return cls(None, None, shown=text)
    typed = cls(tuple(int(d) for d in m.group(3).split(",") if d), m.group(2),
                bool(m.group(1)))
    return typed if text == str(typed) else dataclasses.replace(typed, shown=text)

  @classmethod
  def from_text(cls, text: str, where: str) -> "Aval":
    """serial.Text's reader: a saved report's aval (any text reads: what is not an
    array's is kept as shown, as a token's is)."""
    return cls.parse(text)


def first_result_aval(equation_text: str) -> tuple[Aval, ...]:
  """The first result's aval of an equation as jaxpr text (`b:f32[8,128] = exp a`), for
  files written before the equations' avals were saved typed beside their text (a
  profile's EquationProfile.out_avals): read once, where such a file is loaded."""
  name, _, rest = (equation_text or "").partition(":")
  first = rest.split(" ")[0] if name else ""
  return (Aval.parse(first),) if first else ()


def aval_texts(avals: Iterable) -> str:
  """Avals as a report line shows them: `float32[8,128], ~int32[]`."""
  return ", ".join(map(str, avals))


class Description:
  """An equation as text, its operands' and results' avals, and the line of the
  kernel's printed jaxpr where it starts (None: not in it, e.g. an index map's):
  printed when first asked for (lowering with tracing off never pays for
  pretty-printing), the same answer every time after."""
  __slots__ = ("_describe", "_value")

  def __init__(self, describe: Callable[[], tuple] | None = None, value: tuple | None = None):
    self._describe = describe
    self._value = value

  @classmethod
  def fixed(cls, text: str, in_avals=(), out_avals=(), jaxpr_line: int | None = None):
    """A description known already; avals saved as text (kernel.json) are read here."""
    return cls(value=(text, tuple(map(Aval.parse, in_avals)), tuple(map(Aval.parse, out_avals)),
                      jaxpr_line))

  @staticmethod
  def from_saved(saved: dict, where: str) -> "Description":
    """A saved equation's description (SAVED_KEYS of the file `where`; Aval.parse reads the
    avals); serial.Misfit naming the key for a value saved_description does not write."""
    value = lambda key, tp: decode(tp, saved[key], f"{where}.{key}", strict=True)
    return Description.fixed(value("text", str), value("in_avals", tuple[str, ...]),
                             value("out_avals", tuple[str, ...]),
                             value("jaxpr_line", int | None))

  def get(self, primitive: str) -> tuple:
    """(text, in_avals, out_avals, jaxpr_line)"""
    if self._value is None:
      value = (primitive, (), (), None)
      if self._describe is not None:
        try:
          value = self._describe()
        except Exception:  # noqa: BLE001 - a description must never break lowering
          pass
      self._value, self._describe = value, None
    return self._value


# an equation's description as kernel.json keeps it, beside the record's fields
SAVED_KEYS = ("text", "in_avals", "out_avals", "jaxpr_line")


def saved_description(e: "Described") -> dict:
  """The record `e`'s description as SAVED_KEYS (its avals as text)."""
  return {"text": e.text, "in_avals": [str(a) for a in e.in_avals],
          "out_avals": [str(a) for a in e.out_avals], "jaxpr_line": e.jaxpr_line}


class Described:
  """What an equation's description and frame say: its text, avals, jaxpr line and
  the user's file:line. Shared by the record and by the lowering's EqnInfo."""
  __slots__ = ()

  @property
  def text(self) -> str:
    return self.description.get(self.primitive)[0]

  @property
  def in_avals(self) -> tuple[Aval, ...]:
    return self.description.get(self.primitive)[1]

  @property
  def out_avals(self) -> tuple[Aval, ...]:
    return self.description.get(self.primitive)[2]

  @property
  def jaxpr_line(self) -> int | None:
    """The line (0-based) of GeneratedKernel.jaxpr_text where the equation starts."""
    return self.description.get(self.primitive)[3]

  @property
  def location(self) -> str:
    if self.file is None:
      return "unknown"
    return f"{os.path.basename(self.file)}:{self.line}"

  @property
  def line_comment(self) -> str:
    """What the lowering writes after each generated line of the equation, `  # [4] exp @
    kernel.py:31` (codegen.py renders it; GeneratedKernel.code_lines takes it off again)."""
    return f"  # [{self.index}] {self.primitive} @ {self.location}"


def without_line_comment(text: str, comment: str) -> str:
  """A generated line without its equation's `comment` (Described.line_comment). A kernel
  saved by an older pallas-prof may have written the comment otherwise: its line is then
  cut where an equation's tag starts, the one place the text is parsed."""
  if text.endswith(comment):
    return text[:-len(comment)].rstrip()
  return text.partition("  # [")[0].rstrip()


def with_ref_names(text: str | None, ref_names: Iterable[tuple[str, str]] | None) -> str | None:
  """`text` (an equation, a printed jaxpr) with the jaxpr's letters for the kernel's refs
  replaced by the kernel's own names for them: `e:f32[8] <- b[d:d+8]` as
  `e:f32[8] <- x_ref[d:d+8]`, the names the kernel's code and the bounds check use.

  `ref_names`: (letter, name) pairs (GeneratedKernel.ref_names). A pair read back from
  a file is used only when both are plain identifiers, so that a damaged file can
  neither match every position nor write control characters into a report."""
  pairs = [pair for pair in (ref_names or ()) if isinstance(pair, (tuple, list))
           and len(pair) == 2]
  names = {letter: name for letter, name in pairs if _plain_name(letter) and _plain_name(name)}
  if not text or not names:
    return text
  # a whole variable only: not part of a longer word, a number (1e-05), a
  # parameter's name or value (name=f) or a string ('i')
  letters = "|".join(re.escape(letter) for letter in sorted(names, key=len, reverse=True))
  pattern = re.compile(rf"(?<![\w.='\"])(?:{letters})(?![\w='\"])")
  return pattern.sub(lambda match: names[match.group(0)], text)


def _plain_name(name) -> bool:
  return isinstance(name, str) and name.isidentifier() and name.isascii()
