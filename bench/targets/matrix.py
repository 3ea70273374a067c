"""Every example's kernels, a few feature kernels and a fuzz sample, compiled on the CPU
for each GPU Triton compiles for (issue 40): compiled / refused / failed, registers,
spills and shared memory per target.

    python3 bench/targets/matrix.py                          # the default targets, 40 fuzz programs
    python3 bench/targets/matrix.py --fuzz 200 --targets sm_80,gfx942
    python3 bench/targets/matrix.py --out bench/results      # writes the table there too
    python3 bench/targets/matrix.py --saved DIR              # and kernels another process saved
    python3 bench/targets/matrix.py --groups jax_ops         # one group (compiles one at a time)

Groups: the examples, feature kernels, JAX's own Pallas GPU ops (jax_ops.py: forward and
backward), a fuzz sample, and with --saved the kernels bench/targets/dump_kernels.py saved
(JAX's conformance tests, run on a GPU machine under that pytest plugin).

No GPU: Triton compiles NVIDIA targets with its own ptxas and AMD ones with its
LLVM. The kernels are lowered once (jax.jit(...).lower on the CPU: nothing runs)
at the examples' GPU sizes, and each GeneratedKernel goes through pallas-prof's
compile (pallas_prof.backend.compiling.for_targets) for every target, the cache
bypassed. Writes targets_cpu_<commit>_triton<version>.{json.gz,md} under --out: the
markdown is the section bench/results/README.md and docs/targets.md quote.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import importlib.util
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from bench.targets import jax_ops  # noqa: E402 - after ROOT is on the path

DEFAULT_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "gfx942", "gfx950")
# what --groups names: "conformance" is the kernels --saved reads
GROUPS = ("example", "feature", "jax_ops", "fuzz", "conformance")


@dataclasses.dataclass
class Lowered:
  group: str          # "example", "feature", "jax_ops", "fuzz", "conformance"
  label: str          # where it came from: "matmul.py", "fuzz seed 12"
  gk: object          # the GeneratedKernel
  relower: object = None   # its registry record's: the workarounds a run would take


def _example(name: str):
  path = os.path.join(ROOT, "examples", f"{name}.py")
  sys.path.insert(0, os.path.dirname(path))
  try:
    spec = importlib.util.spec_from_file_location(f"matrix_example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  finally:
    sys.path.pop(0)
  return module


def _lowered(group: str, label: str, fn, *args) -> list[Lowered]:
  """The kernels `fn` lowers for these argument shapes (nothing runs)."""
  import jax
  from pallas_prof.backend import kernel_registry
  kernel_registry.clear()
  jax.clear_caches()
  fn.lower(*args)
  seen, out = set(), []
  for rec in kernel_registry.kernels():
    if rec.generated.key not in seen:
      seen.add(rec.generated.key)
      out.append(Lowered(group, f"{label}: {rec.generated.name}", rec.generated, rec.relower))
  return out


def example_kernels() -> list[Lowered]:
  """Each example's kernels at its --large (GPU) sizes; pipeline.py calls the kernels
  of layer_norm, matmul, softmax and vector_add, so it adds none of its own."""
  import jax
  import jax.numpy as jnp
  s = jax.ShapeDtypeStruct
  f32, f16, bf16 = jnp.float32, jnp.float16, jnp.bfloat16
  m = {n: _example(n) for n in ("vector_add", "softmax", "layer_norm", "matmul",
                                "flash_attention", "selective_scan", "multi_gpu")}
  ch, length, n = 1024, 4096, 16
  scan_in = (s((ch, length), f32), s((ch, length), f32), s((ch, n), f32), s((length, n), f32),
             s((length, n), f32))
  cases = [
      ("vector_add.py", m["vector_add"].add, s((1 << 26,), f32), s((1 << 26,), f32)),
      ("softmax.py", m["softmax"].softmax, s((4096, 4096), f32)),
      ("layer_norm.py", m["layer_norm"].layer_norm, s((8192, 8192), f32), s((8192,), f32),
       s((8192,), f32)),
      ("matmul.py", m["matmul"].matmul, s((4096, 4096), bf16), s((4096, 4096), bf16)),
      ("flash_attention.py", m["flash_attention"].flash_attention,
       *(s((4, 4096, 16, 64), f16),) * 3),
      ("flash_attention.py causal", functools.partial(m["flash_attention"].flash_attention,
                                                      causal=True),
       *(s((4, 4096, 16, 64), f16),) * 3),
      ("selective_scan.py forward", m["selective_scan"].forward, *scan_in),
      ("selective_scan.py backward", m["selective_scan"].backward, *scan_in,
       s((ch, length // m["selective_scan"].T, n), f32), s((ch, length), f32)),
      ("multi_gpu.py", jax.jit(m["multi_gpu"].rms_norm), s((1024, 4096), bf16)),
  ]
  out = []
  for label, fn, *args in cases:
    fn = fn if hasattr(fn, "lower") else jax.jit(fn)
    out += _lowered("example", label, fn, *args)
  return out


def feature_kernels() -> list[Lowered]:
  """The test suite's kernels that meet what a target lacks (testkit/target_kernels.py, as
  tests/backend/compiling/test_targets.py refuses them), and a TMA matmul (test_tma.py's kind)."""
  import jax
  import jax.numpy as jnp
  from jax.experimental import pallas as pl
  import pallas_prof
  from testkit import target_kernels as t
  s = jax.ShapeDtypeStruct

  def call(kernel, name, **kw):
    return jax.jit(pl.pallas_call(kernel, name=name, **kw))

  mm = dict(grid=(2, 1), in_specs=[pl.BlockSpec((128, 256), lambda i, j: (i, 0)),
                                   pl.BlockSpec((256, 256), lambda i, j: (0, j))],
            out_specs=pl.BlockSpec((128, 256), lambda i, j: (i, j)),
            out_shape=s((256, 256), jnp.float32))
  e5 = s((64, 64), jnp.float8_e5m2)
  out = _lowered("feature", "fp8 e4m3 convert", call(
      t.fp8_convert, "fp8_e4m3_convert", out_shape=s((128,), jnp.float32)),
      s((128,), jnp.float32))
  out += _lowered("feature", "fp8 e5m2 dot", call(
      t.mm, "fp8_e5m2_dot", out_shape=s((64, 64), jnp.float32)), e5, e5)
  out += _lowered("feature", "192 KiB of shared memory", call(t.mm, "big_shared", **mm),
                  s((256, 256), jnp.float16), s((256, 256), jnp.float16))
  out += _lowered("feature", "TMA matmul", call(
      t.mm, "tma_matmul", compiler_params=pallas_prof.CompilerParams(tma=True),
      **dict(mm, in_specs=[pl.BlockSpec((128, 128), lambda i, j: (i, 0)),
                           pl.BlockSpec((128, 128), lambda i, j: (0, j))],
             out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
             out_shape=s((256, 128), jnp.float32))),
      s((256, 128), jnp.float16), s((128, 128), jnp.float16))
  return out


def fuzz_kernels(count: int, seed: int = 0) -> tuple[list[Lowered], int]:
  """The kernels of `count` programs of the CPU fuzzer's (bench/fuzz/fuzz.py's strategy:
  values, kernels, hazards, scans), drawn from `seed`, lowered; and how many programs
  pallas-prof refused to lower (a limitation it reports, not a compile)."""
  if count <= 0:
    return [], 0
  import jax
  from hypothesis import HealthCheck, Phase, given, settings
  from hypothesis import seed as hypothesis_seed
  from bench.fuzz.fuzz import strategy_for
  drawn = []

  @hypothesis_seed(seed)
  @settings(max_examples=count, database=None, deadline=None, derandomize=False,
            suppress_health_check=list(HealthCheck), phases=[Phase.generate])
  @given(strategy_for("all"))
  def draw(program):
    drawn.append(program)

  draw()
  out, refused = [], 0
  for i, program in enumerate(drawn[:count]):
    try:
      out += _lowered("fuzz", f"fuzz {i} {program.describe()}", *_fuzz_call(program, i))
    except Exception as e:  # noqa: BLE001 - a program pallas-prof refuses to lower: counted apart
      refused += 1
      print(f"  not lowered: fuzz {i}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
  return out, refused


def _fuzz_call(program, index: int):
  """(jitted pallas_call, argument shapes) of a fuzz program, as testkit/fuzz/check.py builds it."""
  import jax
  from jax.experimental import pallas as pl
  from testkit.fuzz.check import build, make_inputs
  args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in make_inputs(program)]
  scope = build(program)
  name = f"fuzz_{index}"
  if program.kind != "values":
    return (jax.jit(pl.pallas_call(scope["kernel"], name=name, **scope["call"])), *args)
  fn = scope["fn"]
  outs = jax.eval_shape(fn, *args)

  def kernel(*refs):
    for ref, value in zip(refs[len(args):], fn(*[r[...] for r in refs[:len(args)]])):
      ref[...] = value

  return (jax.jit(pl.pallas_call(kernel, out_shape=list(outs), name=name)), *args)


def compile_all(kernels: list[Lowered], targets) -> list[dict]:
  from pallas_prof.backend.compiling.for_targets import compile_for
  rows = []
  total, started = len(kernels) * len(targets), time.perf_counter()
  for target in targets:      # target by target: each in a compile worker of its own
    for k in kernels:
      t0 = time.perf_counter()
      outcome = compile_for(k.gk, target, relower=k.relower, use_disk_cache=False)
      rows.append({"group": k.group, "kernel": k.label, "target": target.name,
                   "status": outcome.status, "reason": outcome.reason,
                   "seconds": round(time.perf_counter() - t0, 3), **outcome.figures()})
      _progress(rows, total, started)
  return rows


def _progress(rows: list[dict], total: int, started: float) -> None:
  """A line on stderr every 100 compiles (and at the last): how far, what failed, how long
  is left at the pace so far. A full matrix is thousands of compiles."""
  done = len(rows)
  if done % 100 and done != total:
    return
  spent = time.perf_counter() - started
  not_compiled = sum(r["status"] != "compiled" for r in rows)
  print(f"  compiled {done}/{total} ({rows[-1]['target']}; {not_compiled} refused or failed) "
        f"{spent:.0f} s, about {spent / done * (total - done):.0f} s left",
        file=sys.stderr, flush=True)


def _summary(rows: list[dict], targets) -> list[str]:
  """One line per target: counts, registers (median, most), kernels that spill, most shared."""
  lines = ["| target | warp | compiled | refused | failed | registers median / max | "
           "kernels spilling (most) | shared/LDS max |", "|---" * 8 + "|"]
  for target in targets:
    mine = [r for r in rows if r["target"] == target.name]
    done = [r for r in mine if r["status"] == "compiled"]
    regs = sorted(r["registers"] for r in done if r["registers"] is not None)
    spilling = [r["spills"] for r in done if r.get("spills")]
    unit = "B" if target.backend == "cuda" else " regs"
    count = {s: sum(r["status"] == s for r in mine) for s in ("compiled", "refused", "failed")}
    lines.append(
        f"| {target.name} | {target.warp_size} | {count['compiled']} | {count['refused']} | "
        f"{count['failed']} | {regs[len(regs) // 2] if regs else '-'} / "
        f"{regs[-1] if regs else '-'} | {len(spilling)}"
        f"{f' ({max(spilling)}{unit})' if spilling else ''} | "
        f"{max((r['shared_bytes'] for r in done), default=0) // 1024} KiB |")
  return lines


def _cell(row: dict) -> str:
  if row["status"] != "compiled":
    return row["status"]
  spills = f", spills {row['spills']}" if row.get("spills") else ""
  return f"{row['registers']} regs, {row['shared_bytes'] // 1024} KiB{spills}"


def _detail(rows: list[dict], targets, group: str) -> list[str]:
  names = list(dict.fromkeys(r["kernel"] for r in rows if r["group"] == group))
  lines = ["| kernel | " + " | ".join(t.name for t in targets) + " |",
           "|---" * (len(targets) + 1) + "|"]
  for name in names:
    by_target = {r["target"]: r for r in rows if r["kernel"] == name}
    lines.append(f"| {name} | " + " | ".join(_cell(by_target[t.name]) for t in targets) + " |")
  return lines


def _section(rows: list[dict], targets, group: str, title: str) -> list[str]:
  """The group's table under its title; nothing where the group was not compiled."""
  if not any(r["group"] == group for r in rows):
    return []
  return [title, "", *_detail(rows, targets, group), ""]


def _not_compiled(rows: list[dict]) -> list[str]:
  """Each distinct refusal or failure once, with the kernels and targets it met."""
  seen: dict[tuple, list[str]] = {}
  for r in rows:
    if r["status"] != "compiled":
      seen.setdefault((r["status"], r["reason"]), []).append(f"{r['kernel']} on {r['target']}")
  return [f"- {status}: {reason} ({len(where)}x: {'; '.join(where[:4])}"
          f"{'; ...' if len(where) > 4 else ''})" for (status, reason), where in seen.items()]


def markdown(rows, targets, command: str, commit: str, triton: str, seconds: float,
             fuzz_programs: int, not_lowered: int, ops_not_lowered=(), saved_bad=()) -> str:
  # kernels, not names: a row per kernel and target (conformance tests share kernel names)
  groups = {g: sum(r["group"] == g for r in rows) // max(1, len(targets))
            for g in ("example", "feature", "jax_ops", "fuzz", "conformance")}
  out = [f"## Target matrix, CPU, triton {triton}, commit {commit}", "",
         f"    {command}", "",
         f"{groups['example']} example kernels, {groups['feature']} feature kernels, "
         f"{groups['jax_ops']} kernels of JAX's own Pallas GPU ops, "
         f"{groups['conformance']} saved (conformance) kernels, "
         f"{groups['fuzz']} fuzz kernels (from {fuzz_programs} programs drawn; "
         f"{not_lowered} pallas-prof refused to lower, a limitation it reports), "
         f"each compiled for {len(targets)} targets "
         f"({len(rows)} compiles, {seconds:.0f} s on this machine). Registers: ptxas's per "
         "thread on NVIDIA; VGPRs (AGPRs included) per lane on AMD. Spills: bytes on NVIDIA, "
         "registers spilled on AMD.", "", *_summary(rows, targets), "",
         *_section(rows, targets, "example", "Examples (registers, shared memory or LDS, "
                                             "spills):"),
         *_section(rows, targets, "feature", "Feature kernels:"),
         *(["JAX's own Pallas GPU ops (jax.experimental.pallas.ops.gpu, forward and "
            "backward):", "", *_detail(rows, targets, "jax_ops"), "",
            *[f"- not lowered: {op}: {why}" for op, why in ops_not_lowered], ""]
           if groups["jax_ops"] or ops_not_lowered else []),
         *(["Saved kernels (--saved; the test that lowered each):", "",
            *_detail(rows, targets, "conformance"), "",
            *[f"- not read: {path}: {why}" for path, why in saved_bad], ""]
           if groups["conformance"] or saved_bad else []),
         "Not compiled, by reason:", "",
         *(_not_compiled(rows) or ["- none"]), ""]
  return "\n".join(out)


def _commit() -> str:
  try:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return os.environ.get("PALLAS_PROF_COMMIT", "unknown")


def chosen_groups(parser: argparse.ArgumentParser, args) -> set[str]:
  """The groups to compile: --groups's, else every group but those --no-examples (the
  examples and feature kernels) and --no-jax-ops leave out, with --saved's when given."""
  if args.groups is None:
    groups = set(GROUPS) - {"conformance"}
    if args.no_examples:
      groups -= {"example", "feature"}
    if args.no_jax_ops:
      groups.discard("jax_ops")
    return groups | ({"conformance"} if args.saved else set())
  groups = {g.strip() for g in args.groups.split(",") if g.strip()}
  unknown = sorted(groups - set(GROUPS))
  if unknown or not groups:
    parser.error(f"--groups {args.groups!r}: {', '.join(unknown) or 'no group'} is not a "
                 f"group; name some of {', '.join(GROUPS)}")
  if "conformance" in groups and not args.saved:
    parser.error("--groups conformance compiles the kernels of --saved DIR: give --saved")
  if args.saved and "conformance" not in groups:
    parser.error(f"--saved {args.saved} with --groups {args.groups}: add conformance to the "
                 "groups, or leave --saved out")
  return groups


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS),
                      help="comma-separated: sm_80, cuda:80, gfx942, hip:gfx942, ...")
  parser.add_argument("--fuzz", type=int, default=40, help="fuzz programs in the sample")
  parser.add_argument("--seed", type=int, default=0, help="the fuzz sample's seed")
  parser.add_argument("--no-examples", action="store_true")
  parser.add_argument("--no-jax-ops", action="store_true", help="leave JAX's own ops out")
  parser.add_argument("--saved", default=None,
                      help="a folder of kernels bench/targets/dump_kernels.py saved")
  parser.add_argument("--groups", default=None,
                      help=f"comma-separated, of {', '.join(GROUPS)} (the last is --saved's "
                           "kernels): only these; the record's name ends with them")
  parser.add_argument("--out", default=None, help="folder for the .json and .md (else printed)")
  args = parser.parse_args(argv)
  groups = chosen_groups(parser, args)
  import pallas_prof
  from pallas_prof.backend.targets import parse_target
  from importlib import metadata
  targets = [parse_target(t) for t in args.targets.split(",") if t.strip()]
  pallas_prof.install()
  commit = _commit()     # the code that runs: read before the compiles, which take long
  t0 = time.perf_counter()
  fuzz = args.fuzz if "fuzz" in groups else 0
  fuzzed, not_lowered = fuzz_kernels(fuzz, args.seed)
  kernels = ((example_kernels() if "example" in groups else [])
             + (feature_kernels() if "feature" in groups else []) + fuzzed)
  ops_not_lowered, saved_bad = [], []
  if "jax_ops" in groups:
    ops, ops_not_lowered = jax_ops.jax_op_kernels(_lowered)
    kernels += ops
  if "conformance" in groups:
    saved, saved_bad = jax_ops.saved_kernels(args.saved, Lowered)
    kernels += saved
  rows = compile_all(kernels, targets)
  triton = metadata.version("triton")
  command = "python3 bench/targets/matrix.py " + " ".join(sys.argv[1:] if argv is None else argv)
  text = markdown(rows, targets, command.strip(), commit, triton, time.perf_counter() - t0,
                  fuzz, not_lowered, ops_not_lowered, saved_bad)
  print(text)
  if args.out:
    os.makedirs(args.out, exist_ok=True)     # a new folder, as --out folders are elsewhere
    only = "".join(f"_{g}" for g in GROUPS if g in groups) if args.groups else ""
    stem = os.path.join(args.out, f"targets_cpu_{commit}_triton{triton}{only}")
    with open(stem + ".md", "w") as f:
      f.write(text)
    with gzip.open(stem + ".json.gz", "wt") as f:
      json.dump({"command": command, "commit": commit, "triton": triton,
                 "targets": [t.name for t in targets], "rows": rows,
                 "ops_not_lowered": ops_not_lowered, "saved_not_read": saved_bad}, f, indent=1)
    print(f"wrote {stem}.md and .json.gz")
  return 0


if __name__ == "__main__":
  sys.exit(main())
