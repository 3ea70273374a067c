"""The interpreter's memory guard: every load, store and atomic of an interpreted kernel
checked, before it happens, against the arrays it was launched with (MemoryGuard), and the
error of an access outside them all (OutOfBuffers).

Dependency-free like interpreter_runtime.py, which runs launches under it: numpy and triton
only, no JAX and no pallas_prof import, so `pallas-prof show --eject` copies this file
verbatim into an ejected program. No `from __future__` here: the source is pasted into the
middle of a file.
"""
import numpy as np


class OutOfBuffers(IndexError):
  """An interpreted kernel tried to read or write memory outside every array
  it was given (on a GPU: an illegal address, or another buffer's data)."""


class MemoryGuard:
  """While active, every load, store and atomic of an interpreted kernel is
  checked against the arrays it was launched with, before it happens: an
  access outside all of them raises OutOfBuffers instead of reading stray
  host memory (zeros, other data) or ending the process with a segmentation
  fault. Only lanes the access really performs (its mask) are checked; the
  generated code is not changed (PALLAS_PROF_CHECK=bounds checks each ref
  against its own extent and names the index).

  `owner()`, called inside an access, gives the ref it indexes (its name and array), or None
  where not known: a failed access then counts its elements outside that ref, not only
  those outside every buffer (a read past one array's end lands mostly in the next one,
  and counted so it understated the overrun)."""

  def __init__(self, arrays, owner=None):
    self._owner = owner
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays if a.nbytes)
    self._starts = np.array([b for b, _ in spans], dtype=np.uint64)
    self._ends = np.array([e for _, e in spans], dtype=np.uint64)

  def check(self, ptrs, mask, itemsize: int, what: str) -> None:
    p = np.asarray(ptrs).astype(np.uint64)
    if mask is not None:
      active = np.broadcast_to(np.asarray(mask, dtype=bool), p.shape)
      p = p[active]
    p = p.reshape(-1)
    if not p.size:
      return
    k = np.searchsorted(self._starts, p, side="right").astype(np.int64) - 1
    inside = (k >= 0) & (p + np.uint64(itemsize) <= self._ends[np.maximum(k, 0)]) \
        if self._ends.size else np.zeros(p.shape, bool)
    if inside.all():
      return
    raise OutOfBuffers(f"the kernel {self._outside(p, itemsize, what, int((~inside).sum()))} "
                       "(on a GPU: an illegal address); PALLAS_PROF_CHECK=bounds names the "
                       "ref and the index")

  def _outside(self, p, itemsize: int, what: str, outside_all: int) -> str:
    """What the failed access did, counted in elements: outside its own ref where known."""
    own = self._owner() if self._owner is not None else None
    if own is None:
      return f"{what} {outside_all} element(s) outside every buffer it was given"
    name, array = own
    start = np.uint64(array.ctypes.data)
    outside_own = int(((p < start) | (p + np.uint64(itemsize) > start + np.uint64(array.nbytes)))
                      .sum())
    elsewhere = outside_own - outside_all
    return (f"{what} {outside_own} element(s) outside {name}"
            + (f", {elsewhere} of them inside another of its buffers" if elsewhere else ""))

  def __enter__(self):
    # lazy: keeps triton out of this module's import (start-up time)
    from triton.runtime.interpreter import InterpreterBuilder, _get_np_dtype
    self._saved = {name: getattr(InterpreterBuilder, name) for name in
                   ("create_masked_load", "create_masked_store", "create_atomic_rmw",
                    "create_atomic_cas")}
    guard, saved = self, self._saved

    def size_of(ptrs) -> int:
      return np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize

    # keywords too: the interpreter's tensor-descriptor loads pass their options so
    def masked_load(builder, ptrs, mask, *rest, **options):
      guard.check(ptrs.data, mask.data, size_of(ptrs), "reads")
      return saved["create_masked_load"](builder, ptrs, mask, *rest, **options)

    def masked_store(builder, ptrs, value, mask, *rest, **options):
      guard.check(ptrs.data, mask.data, size_of(ptrs), "writes")
      return saved["create_masked_store"](builder, ptrs, value, mask, *rest, **options)

    def atomic_rmw(builder, op, ptr, val, mask, *rest):
      guard.check(ptr.data, mask.data, size_of(ptr), "updates")
      return saved["create_atomic_rmw"](builder, op, ptr, val, mask, *rest)

    def atomic_cas(builder, ptr, cmp, val, *rest):
      guard.check(ptr.data, None, size_of(ptr), "updates")
      return saved["create_atomic_cas"](builder, ptr, cmp, val, *rest)

    InterpreterBuilder.create_masked_load = masked_load
    InterpreterBuilder.create_masked_store = masked_store
    InterpreterBuilder.create_atomic_rmw = atomic_rmw
    InterpreterBuilder.create_atomic_cas = atomic_cas
    return self

  def __exit__(self, *exc):
    # lazy: keeps triton out of this module's import (start-up time)
    from triton.runtime.interpreter import InterpreterBuilder
    for name, fn in self._saved.items():
      setattr(InterpreterBuilder, name, fn)
    return None
