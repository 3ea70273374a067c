"""`pallas-prof show KERNEL --target ...` and pallas_prof.compile_for (issue 40 item 2): a
saved run's kernel compiled for other GPUs on this CPU machine, one run made once of a
script with a plain kernel and an fp8 e4m3 one (which sm_80 lacks)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.faults.cli_runs import ROOT, in_process, pallas_prof

SCRIPT = textwrap.dedent("""\
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl


    def add_kernel(x_ref, y_ref, o_ref):
      o_ref[...] = x_ref[...] + y_ref[...]


    def fp8_kernel(x_ref, o_ref):
      o_ref[...] = x_ref[...].astype(jnp.float8_e4m3fn).astype(jnp.float32)


    x = jnp.arange(128, dtype=jnp.float32)
    add = pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    fp8 = pl.pallas_call(fp8_kernel, out_shape=jax.ShapeDtypeStruct((128,), jnp.float32))
    print(float(add(x, x).sum()), float(fp8(x).sum()))
    """)
FP8_LINE = 11          # the astype line of fp8_kernel in SCRIPT


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """(the run directory, the script's path), its cache the module's own."""
  root = tmp_path_factory.mktemp("targets")
  script = root / "two_kernels.py"
  script.write_text(SCRIPT)
  cache = root / "cache"
  done = pallas_prof("run", "--out", str(root / "run"), str(script), cache_dir=cache)
  assert done.returncode == 0, done.stdout + done.stderr
  with pytest.MonkeyPatch.context() as patch:          # the compiles below: in_process
    patch.setenv("PALLAS_PROF_CACHE_DIR", str(cache))
    yield str(root / "run"), str(script)


def _json(saved, kernel, *targets):
  code, out, message = in_process("show", kernel, "--dir", saved[0], "--json",
                                  *[a for t in targets for a in ("--target", t)])
  return code, json.loads(out) if out.strip() else None, message


def test_a_kernel_compiles_for_sm80_and_gfx942_side_by_side(saved):
  code, data, _ = _json(saved, "add_kernel", "sm_80,gfx942")
  assert code == 0
  by = {r["target"]: r for r in data["targets"]}
  assert list(by) == ["sm_80", "gfx942"]
  assert all(r["status"] == "compiled" for r in by.values())
  nv, amd = by["sm_80"], by["gfx942"]
  assert nv["figures"]["registers"] > 0 and nv["figures"]["spill_unit"] == "bytes"
  assert amd["figures"]["warp_size"] == 64 and amd["figures"]["vgprs"] > 0
  # occupancy on each GPU's own limits: A100 holds 64 warps per SM, so 4-warp CTAs
  # are 16 by warps; an MI300 CU 8 waves per SIMD, a 4-wave workgroup one per SIMD
  assert nv["occupancy"]["groups_per_unit"] == 16 and nv["occupancy"]["limited_by"] == "warps"
  assert amd["occupancy"]["groups_per_unit"] == 8
  assert any("SMs have nothing to do" in a for a in nv["advice"])   # the static advice
  code, table, _ = in_process("show", "add_kernel", "--dir", saved[0], "--target", "sm_80",
                              "--target", "gfx942")
  assert code == 0 and "sm_80" in table and "gfx942" in table and "workgroups/CU" in table


def test_fp8_on_sm80_is_refused_at_the_users_line(saved):
  code, data, _ = _json(saved, "fp8_kernel", "sm_80", "sm_90")
  assert code == 1                       # one target did not compile
  by = {r["target"]: r for r in data["targets"]}
  assert by["sm_90"]["status"] == "compiled"
  assert by["sm_80"]["status"] == "refused" and by["sm_80"]["figures"] == {}
  assert "sm_80 has no float8_e4m3fn" in by["sm_80"]["reason"]
  assert f"{saved[1]}:{FP8_LINE}" in by["sm_80"]["error"]
  assert "bfloat16 or float16" in by["sm_80"]["error"]


def test_a_typo_in_the_target_names_the_nearest_and_exits_2(saved):
  code, out, message = in_process("show", "add_kernel", "--dir", saved[0], "--target", "sm_8O")
  assert code == 2 and out == ""
  assert "'sm_8O' is not a GPU target" in message and "did you mean sm_80?" in message
  code, _, message = in_process("show", "add_kernel", "--dir", saved[0], "--target", "gfx943")
  assert code == 2 and "did you mean gfx942?" in message


def test_target_with_ptx_shows_that_targets_assembly(saved):
  code, out, _ = in_process("show", "add_kernel", "--dir", saved[0], "--target", "gfx942",
                            "--target", "sm_80", "--ptx", "--wide")
  assert code == 0
  assert "amdgcn of add_kernel compiled for gfx942" in out
  # the assembly's own target line (its triple's spelling differs between Triton versions)
  assert any(".amdgcn_target" in line and "gfx942" in line for line in out.splitlines())
  assert "ptx of add_kernel compiled for sm_80" in out and ".target sm_80" in out


_API = textwrap.dedent("""\
    import sys, runpy
    import pallas_prof
    pallas_prof.install()
    runpy.run_path(sys.argv[1])
    refused = pallas_prof.compile_for("fp8_kernel", "sm_80")
    compiled = pallas_prof.compile_for(pallas_prof.kernels()[0], "gfx942")
    try:
      pallas_prof.compile_for("fp8_kernel", "sm_8O")
    except ValueError as e:
      typo = str(e)
    print(refused.status, refused.error.eqn.line, compiled.status,
          compiled.figures()["warp_size"], "did you mean sm_80?" in typo,
          "compile_for" in pallas_prof.__all__)
    """)


def test_the_api_compiles_a_lowered_kernel_for_a_target(saved):
  env = dict(os.environ)
  env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
  done = subprocess.run([sys.executable, "-c", _API, saved[1]], capture_output=True, text=True,
                        env=env, timeout=300)
  assert done.returncode == 0, done.stderr
  assert done.stdout.split()[-6:] == ["refused", str(FP8_LINE), "compiled", "64", "True", "True"]


def test_a_saved_amd_compile_loads_with_its_figures(saved, tmp_path):
  """A run saved from an AMD compile names its target ["hip", "gfx942"]: the saved-run
  reader refused every target whose arch was not a number, and read an hsaco as text."""
  import shutil
  from pallas_prof.backend.compiling.for_targets import compile_for
  from pallas_prof.backend.targets import Target
  from pallas_prof.cli import run_directory
  run = tmp_path / "run"
  shutil.copytree(saved[0], run)
  kdir = run_directory.find_kernel(str(run), "add_kernel")
  gk, _ = run_directory.load_kernel(kdir, str(run))
  amd = compile_for(gk, "gfx942").compiled
  for name in os.listdir(kdir):
    if name.startswith("kernel.") and name != "kernel.json":
      os.remove(os.path.join(kdir, name))
  amd.save(kdir)
  _, ck = run_directory.load_kernel(kdir, str(run))
  assert ck.target == Target("hip", "gfx942")
  assert ck.target_resources == amd.target_resources and ck.asm["hsaco"] == amd.asm["hsaco"]
  code, out, _ = in_process("show", "add_kernel", "--dir", str(run))
  assert code == 0 and "add_kernel" in out
