"""Every Triton-language name the generated source spells, in one place.

The lowering writes Triton source as text; each `tl.<name>` it emits is one of the
strings below, imported as `from .. import triton_names as tl` and written
`f"{tl.where}({c}, {a}, {b})"`, so the rule reads like the code it emits. When a Triton
release renames or moves a function, a type or an enum (`tl.PropagateNan.ALL`), the
value here changes and every rule emits the new spelling: one edit, and the generated
source of every other name stays byte-identical (tools/generated_sources.py).
tests/structure/test_triton_seam.py finds a `tl.` name written anywhere else.

The attribute is pallas-prof's name for the thing (a Triton rename changes the value,
not the attribute); the value is what the kernel's module calls it, under IMPORTS.
Imports nothing: compiling/ (failures/target_features.py) and the CLI's check of a
saved kernel (cli/saved_runs/source_check.py) read it too.
"""
from __future__ import annotations

# The generated module's header: the names below resolve through these imports
# (`tl` is triton.language; `libdevice` is Triton's device library, CUDA's libdevice
# on NVIDIA, ocml on AMD).
MODULE = "tl"
IMPORTS = ["import triton", "import triton.language as tl",
           "from triton.language.extra import libdevice"]

# --- types -----------------------------------------------------------------------------
constexpr = "tl.constexpr"
int1 = "tl.int1"
int8 = "tl.int8"
int16 = "tl.int16"
int32 = "tl.int32"
int64 = "tl.int64"
uint8 = "tl.uint8"
uint16 = "tl.uint16"
uint32 = "tl.uint32"
uint64 = "tl.uint64"
float16 = "tl.float16"
bfloat16 = "tl.bfloat16"
float32 = "tl.float32"
float64 = "tl.float64"
float8e4nv = "tl.float8e4nv"
float8e5 = "tl.float8e5"


def signed_int(bits: int) -> str:
  """The signed integer type of `bits` bits (8, 16, 32, 64): tl.int32 for 32."""
  return f"tl.int{bits}"


# --- enums -----------------------------------------------------------------------------
propagate_nan_all = "tl.PropagateNan.ALL"     # tl.maximum/minimum's NaN-propagating mode

# --- program and tensor creation ---------------------------------------------------------
program_id = "tl.program_id"
arange = "tl.arange"
full = "tl.full"
zeros = "tl.zeros"
cast = "tl.cast"

# --- shape -----------------------------------------------------------------------------
reshape = "tl.reshape"
broadcast_to = "tl.broadcast_to"
permute = "tl.permute"
trans = "tl.trans"
join = "tl.join"
split = "tl.split"
gather = "tl.gather"
pipelined_range = "tl.range"   # a loop whose loads Triton pipelines (num_stages=)

# --- elementwise -----------------------------------------------------------------------
where = "tl.where"
maximum = "tl.maximum"
minimum = "tl.minimum"
abs = "tl.abs"          # noqa: A001 - Triton's name
exp = "tl.exp"
fma = "tl.fma"

# --- reductions and scans ------------------------------------------------------------------
reduce = "tl.reduce"
sum = "tl.sum"          # noqa: A001 - Triton's name
max = "tl.max"          # noqa: A001 - Triton's name
min = "tl.min"          # noqa: A001 - Triton's name
associative_scan = "tl.associative_scan"
cumsum = "tl.cumsum"
cumprod = "tl.cumprod"
scan = "tl.scan"

# --- dot ---------------------------------------------------------------------------------
dot = "tl.dot"

# --- memory ------------------------------------------------------------------------------
load = "tl.load"
store = "tl.store"
make_tensor_descriptor = "tl.make_tensor_descriptor"
atomic_add = "tl.atomic_add"
atomic_and = "tl.atomic_and"
atomic_cas = "tl.atomic_cas"
atomic_max = "tl.atomic_max"
atomic_min = "tl.atomic_min"
atomic_or = "tl.atomic_or"
atomic_xchg = "tl.atomic_xchg"
atomic_xor = "tl.atomic_xor"

# --- compiler hints, synchronisation, debugging --------------------------------------------
multiple_of = "tl.multiple_of"
max_contiguous = "tl.max_contiguous"
debug_barrier = "tl.debug_barrier"
device_print = "tl.device_print"
inline_asm_elementwise = "tl.inline_asm_elementwise"
