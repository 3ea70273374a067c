"""The public functions show their own parameters (help(), inspect.signature), not a
wrapper's `(*args, **kwargs)`, and are still loaded on first use: `import pallas_prof`
imports no JAX, `import pallas_prof.profiler` (or .advice) not the modules behind profile()
(or advise()). Checked in a fresh process, where nothing was imported before."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# each public function with parameters its real definition has
EXPECTED = {"pallas_prof.tracing": {"exporters"},
            "pallas_prof.profile": {"kernels", "device", "mode", "probes"},
            "pallas_prof.advise": {"kernels", "budget_s", "trials"},
            "pallas_prof.autotune": {"configs", "key", "budget_s"},
            "pallas_prof.install": {"check_bounds"},
            "pallas_prof.compile_for": {"kernel", "target", "use_disk_cache"},
            "pallas_prof.profiler.profile": {"kernels", "device"},
            "pallas_prof.advice.advise": {"kernels", "budget_s"},
            "pallas_prof.advice.diagnose": {"kp", "gk"}}

_CHILD = """
import importlib, inspect, json, sys
out = {}
import pallas_prof.profiler, pallas_prof.advice
out["loaded_at_import"] = sorted(m for m in ("jax", "pallas_prof.profiler.api",
                                             "pallas_prof.advice.api", "pallas_prof.advice.engine")
                                 if m in sys.modules)
for name in sys.argv[1:]:
  module, _, attribute = name.rpartition(".")
  function = getattr(importlib.import_module(module), attribute)
  out[name] = [(p.name, p.kind.name) for p in inspect.signature(function).parameters.values()]
print(json.dumps(out))
"""


def test_public_functions_show_their_parameters_and_load_on_first_use():
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  done = subprocess.run([sys.executable, "-c", _CHILD, *EXPECTED], capture_output=True,
                        text=True, env=env, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  found = json.loads(done.stdout.splitlines()[-1])
  assert found.pop("loaded_at_import") == []
  for name, wanted in EXPECTED.items():
    parameters = dict(found[name])
    assert wanted <= parameters.keys(), f"{name}{tuple(parameters)} lacks {wanted - parameters.keys()}"
    only_forwarding = set(parameters.values()) <= {"VAR_POSITIONAL", "VAR_KEYWORD"}
    assert not only_forwarding, f"{name} shows a wrapper's (*args, **kwargs)"
