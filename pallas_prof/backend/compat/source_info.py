"""Where an equation came from (the user's frame, not JAX's nor pallas-prof's) and how
errors reach the user through JAX's tracebacks.
"""
from __future__ import annotations

import functools
import os

import jax
from jax._src import source_info_util

_JAX_DIR = os.path.dirname(os.path.dirname(jax.__file__)) + os.sep + "jax" + os.sep
# JAX's own example kernels (softmax, attention, ...) are "user code" for our
# purposes: their lines are where the equations come from.
_JAX_KERNEL_DIRS = (os.path.join(_JAX_DIR, "experimental", "pallas", "ops") + os.sep,)
# pallas_prof/ (this file is pallas_prof/backend/compat/source_info.py)
_OUR_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


@functools.lru_cache(maxsize=4096)
def is_user_file(path: str) -> bool:
  if path.startswith(_JAX_KERNEL_DIRS):
    return True
  if path.startswith(_JAX_DIR) or path.startswith(_OUR_DIR):
    return False
  return source_info_util.is_user_filename(path)


def user_frame(source_info):
  """The innermost frame of the user's code that produced an equation."""
  traceback = getattr(source_info, "traceback", None)
  if traceback is None:
    return None
  code, lasti = traceback.raw_frames()
  for c, i in zip(code, lasti, strict=True):
    if is_user_file(c.co_filename):
      return source_info_util.raw_frame_to_frame(c, i)
  return None


def frame_in(source_info, path: str):
  """The innermost frame in file `path` that produced an equation (None: none is): where
  a kernel's own line is wanted, whatever JAX counts as user code."""
  traceback = getattr(source_info, "traceback", None)
  if traceback is None or not path:
    return None
  code, lasti = traceback.raw_frames()
  for c, i in zip(code, lasti, strict=True):
    if c.co_filename == path:
      return source_info_util.raw_frame_to_frame(c, i)
  return None


# --- how errors reach the user -------------------------------------------------------

# JAX wraps an exception raised while it lowers an equation in an exception of
# this type carrying the user's frames and a copy of the message (printed above
# it: the message twice), unless the exception already is one. A LoweringError
# names the user's line itself, so it is one (backend/errors.py).
ErrorWithUserContext = source_info_util.JaxStackTraceBeforeTransformation


def hide_frames_in_tracebacks(path: str) -> None:
  """Frames of files under `path` leave the tracebacks JAX filters, as JAX's own
  do (JAX_TRACEBACK_FILTERING=off shows them)."""
  # lazy: private to JAX: a release that moves it fails this call, not compat/'s import
  from jax._src import traceback_util
  if path not in getattr(traceback_util, "_exclude_paths", ()):
    traceback_util.register_exclusion(path)
