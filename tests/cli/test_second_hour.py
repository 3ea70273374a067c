"""A newcomer's second hour (issue 39): their own kernels and scripts, on a CPU machine."""
from __future__ import annotations

import json
import textwrap

from tests.cli.test_cli import pallas_prof

INTERPRETED = textwrap.dedent("""\
    import jax, jax.numpy as jnp
    from jax.experimental import pallas as pl

    def add_kernel(x_ref, y_ref, o_ref):
      o_ref[...] = x_ref[...] + y_ref[...]

    x = jnp.arange(128, dtype=jnp.float32)
    out = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         interpret=True)(x, x)             # LINE 8
    print("SUM", float(out.sum()))
    """)


def test_a_kernel_jax_interprets_is_said_not_silently_missing(tmp_path):
  """interpret=True: JAX's own interpreter ran the kernel, pallas-prof never saw it, and the
  run said only that no kernel was lowered. The run now says which kernel, where, and what
  to do, on the terminal and in report.json; what JAX computed is unchanged."""
  script = tmp_path / "interpreted.py"
  script.write_text(INTERPRETED)
  result = pallas_prof("run", "--no-analysis", "--out", str(tmp_path / "out"), str(script),
                       cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert "SUM 16256.0" in result.stdout                  # JAX's interpreter still ran it
  said = " ".join((result.stdout + result.stderr).split())
  assert f"`add_kernel` at {script}:8" in said, said
  assert "interpret=True" in said and "Drop interpret=True" in said, said
  notes = json.loads((tmp_path / "out" / "report.json").read_text())["notes"]
  assert any(f"`add_kernel` at {script}:8" in n and "Drop interpret=True" in n
             for n in notes), notes
