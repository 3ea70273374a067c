"""The bounds-checked mode on a GPU: a read far outside its buffer (an illegal
address that would end the process's CUDA context) raises BoundsError naming
the user's line, and the process and its GPU go on working."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

PROGRAM = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp, numpy as np
    from jax.experimental import pallas as pl
    import pallas_prof
    pallas_prof.install(check_bounds=sys.argv[1] == "check")

    def kernel(s_ref, x_ref, o_ref):
      o_ref[...] = x_ref[pl.ds(s_ref[0], 16)] * 2          # LINE-OF-THE-READ

    f = jax.jit(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32)))
    x = jnp.arange(128, dtype=jnp.float32)
    assert float(f(jnp.array([3], jnp.int32), x)[0]) == 6.0
    for attempt in range(2):      # the second: a program JAX has run before (its fast path)
      try:
        # 2**30 floats (4 GiB) before the buffer: no allocation of this process there
        y = f(jnp.array([-2**30], jnp.int32), x)
        print("RETURNED")           # a failure is raised by the call that ran the kernel
        jax.block_until_ready(y)
        print("NO ERROR")
      except pallas_prof.BoundsError as e:
        print("RAISED", type(e).__name__, e.kernel, e.location)
        print(str(e)[-1500:])
      except Exception as e:
        print("OTHER", type(e).__name__)
        print(str(e)[-1500:])
    # the context is alive: XLA and pallas-prof both still run
    print("AFTER", float(jnp.sum(jnp.ones(1000))), float(f(jnp.array([5], jnp.int32), x)[0]))
""")


def _run(tmp_path, mode: str):
  script = tmp_path / "illegal_read.py"
  script.write_text(PROGRAM)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(),
                                                                   os.environ.get("PYTHONPATH")])))
  return subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True,
                        timeout=300, env=env)


def test_an_illegal_read_is_a_bounds_error_and_the_process_lives(tmp_path):
  done = _run(tmp_path, "check")
  out = done.stdout + done.stderr
  assert done.returncode == 0, out[-3000:]
  # `except pallas_prof.BoundsError` catches it (not a JaxRuntimeError), both times, from
  # the call itself
  assert done.stdout.count("RAISED BoundsError kernel") == 2, out[-3000:]
  assert "OTHER" not in done.stdout and "RETURNED" not in done.stdout, out[-3000:]
  assert "out of bounds: `get` in kernel `kernel`" in out, out[-3000:]
  line = PROGRAM.splitlines().index(next(l for l in PROGRAM.splitlines() if "LINE-OF-THE-READ" in l))
  assert f"illegal_read.py:{line + 1}" in out, out[-3000:]
  # the index is recorded clamped into (-2**30, 2**30)
  assert "reads x_ref (shape (128,), float32) at index [<=-1073741823:-1073741808]" in out, \
      out[-3000:]
  assert "AFTER 1000.0 10.0" in done.stdout, out[-3000:]


def test_without_check_mode_the_same_read_breaks_the_context(tmp_path):
  """What the mode saves you from (same program, check mode off)."""
  done = _run(tmp_path, "plain")
  out = done.stdout + done.stderr
  assert "AFTER 1000.0 10.0" not in done.stdout, (
      "the read 4 GiB before the buffer did not fail without check mode:\n" + out[-3000:])
  assert "ILLEGAL_ADDRESS" in out or "illegal" in out.lower(), out[-3000:]
