"""Which plain scan forms Triton 3.6 fails to compile for sm_90 (issue 28), on the CPU.

    python3 bench/probes/scan_forms_sm90.py

Each form runs through pallas-prof under the interpreter (testkit/fuzz/check.py),
then its kernel is compiled for sm_90 (testkit/fuzz/sm90.py); prints, per form,
how many of its (rows, cols, num_warps) variants failed and with which assertion.
"""
import collections
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from testkit.fuzz.check import check  # noqa: E402
from testkit.fuzz.programs import InputSpec, Program  # noqa: E402
from testkit.fuzz.sm90 import compile_sm90, forget  # noqa: E402

FORMS = {
    "cumsum(d[:, None], 0)": ("def fn(x0):\n  return (jnp.cumsum(x0[:, None], axis=0),)\n",
                              lambda n, m: [(n,)]),
    "cumsum(d[:, None] * a[None, :], 0)": (
        "def fn(x0, x1):\n  return (jnp.cumsum(x0[:, None] * x1[None, :], axis=0),)\n",
        lambda n, m: [(n,), (m,)]),
    "cumsum(x, 0)": ("def fn(x0):\n  return (jnp.cumsum(x0, axis=0),)\n", lambda n, m: [(n, m)]),
    "cumsum(x, 1)": ("def fn(x0):\n  return (jnp.cumsum(x0, axis=1),)\n", lambda n, m: [(n, m)]),
}


def main() -> None:
  results = collections.defaultdict(list)
  seed = 100
  for (name, (source, shapes)), n, m, warps in itertools.product(
      FORMS.items(), [16, 48, 64], [1, 3, 16], [None, 1, 2, 8]):
    seed += 1
    program = Program("values", source, tuple(InputSpec(s, "float32") for s in shapes(n, m)),
                      seed, 2e-4, num_warps=warps)
    forget(program)
    status = check(program).status
    outcome = compile_sm90(program)
    results[name].append((n, m, warps, status, outcome.status, outcome.signature))
  for name, rows in results.items():
    failed = [r for r in rows if r[4] != "compiled"]
    print(f"{name}: {len(failed)} of {len(rows)} fail to compile "
          f"({sum(r[3] == 'ok' for r in rows)} agree under the interpreter)")
    for n, m, warps, _, status, sig in failed:
      print(f"  rows {n}, cols {m}, num_warps {warps}: {status} {sig}")


if __name__ == "__main__":
  main()
