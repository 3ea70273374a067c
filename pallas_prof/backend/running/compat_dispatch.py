"""JAX's dispatch of compiled programs (pxla's ExecuteReplicated, pjit's C++ fast path),
wrapped so that a kernel's failure in a host callback reaches the caller as itself
(runtime_errors.py). Beside compat.py and builtin_triton.py, the one other module that
reaches into JAX's internals: the version knowledge of how JAX runs a compiled program
and logs a failed callback, kept out of compat.py, which the size rule has full.
"""
from __future__ import annotations

# where JAX logs a host callback's exception before jaxlib raises its text as a
# JaxRuntimeError
CALLBACK_LOGGERS = ("jax._src.callback", "jax._src.debugging")


def wrap_python_executions(wrapper, keep_in_python) -> bool:
  """Executions JAX runs from Python (pxla.ExecuteReplicated) go through wrapper(run, has
  host callbacks); while keep_in_python(), programs with host callbacks get no C++ fast path.

  False, and nothing changed, where this JAX has neither (a release that moved them):
  a kernel's failure then reaches the caller as JAX's JaxRuntimeError, as before."""
  from jax._src import pjit
  from jax._src.interpreters import pxla
  execute = getattr(getattr(pxla, "ExecuteReplicated", None), "__call__", None)
  fastpath = getattr(pjit, "_get_fastpath_data", None)
  if execute is None or fastpath is None:
    return False

  def call(self, *args):
    return wrapper(lambda: execute(self, *args), bool(self.has_host_callbacks))

  def fastpath_data(executable, *args, **kwargs):
    callbacks = getattr(getattr(executable, "unsafe_call", None), "has_host_callbacks", False)
    return None if callbacks and keep_in_python() else fastpath(executable, *args, **kwargs)

  pxla.ExecuteReplicated.__call__, pjit._get_fastpath_data = call, fastpath_data
  return True


def forget_failed_tokens() -> None:
  """Waits out JAX's runtime tokens and forgets them. On a GPU the token of a program
  whose host callback failed keeps that failure, and JAX's exit handlers wait on it and
  print it again as an "Exception ignored in atexit callback" traceback, after the
  kernel's failure has been reported. Nothing to do where this JAX keeps no such set."""
  from jax._src import dispatch
  tokens = getattr(dispatch, "runtime_tokens", None)
  if tokens is None:
    return
  try:
    tokens.block_until_ready()
  except Exception:  # noqa: BLE001 - the failure already reported, or another of the same run
    pass
  finally:
    if hasattr(tokens, "clear"):
      tokens.clear()



def backends_started() -> bool:
  """Whether JAX has started its backends (XLA has read XLA_FLAGS by then)."""
  from jax._src import xla_bridge
  started = getattr(xla_bridge, "backends_are_initialized", None)
  return bool(started()) if started is not None else bool(getattr(xla_bridge, "_backends", {}))
