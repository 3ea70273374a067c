"""Faults in the cache (issue 38, items 3a, 3d and 5's first bullet): what an earlier run
left is checked, not trusted, and a cache folder that cannot be written costs a warning,
not the user's call.

Every case asserts the three properties of the suite (inject.py): the answer is right
(the kernel under Triton's interpreter against jax.numpy, a compile against a cold
compile's PTX and cubin); nothing wrong was persisted (the damaged file is moved aside,
the cache holds the whole file again, and the next process uses it without a word, no
`.tmp` is left); and where a `pallas-prof run` was going on, its report exists.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

from tests.faults import inject

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUTATIONS = list(inject.mutations(b"x" * 64))     # the kinds of damage, by name
PROGRAM = {}                                      # "path": CHILD's file (the `program` fixture)

# A user's program on the CPU: one pallas_call under Triton's interpreter, checked against
# jax.numpy; with --compile, also compiled for sm_90 (what `pallas-prof run` does on a CPU
# machine), so that the compile cache is used too. It prints what the test checks.
CHILD = r"""
import hashlib, json, os, sys, time
go = os.environ.get("CACHE_TEST_GO")
while go and not os.path.exists(go):      # two processes released at once
  time.sleep(0.005)
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
import pallas_prof
from pallas_prof.backend import kernel_registry
pallas_prof.install()

def kernel(x_ref, y_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = jnp.exp(x) * 2.0 + y_ref[...] * x

@jax.jit
def f(x, y):
  spec = pl.BlockSpec((256,), lambda i: (i,))
  return pl.pallas_call(kernel, grid=(4,), in_specs=[spec, spec], out_specs=spec,
                        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

rng = np.random.default_rng(int(os.environ.get("CACHE_TEST_SEED", "0")))
x = jnp.asarray(rng.standard_normal(1024), jnp.float32)
y = jnp.asarray(rng.standard_normal(1024), jnp.float32)
got = np.asarray(f(x, y))
want = np.asarray(jnp.exp(x) * 2.0 + y * x)
gk = kernel_registry.kernels()[0].generated
digest = lambda data: hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()
out = {"right": bool(np.allclose(got, want, rtol=1e-5, atol=1e-6)),
       "max_error": float(np.max(np.abs(got - want))),
       "injected": os.environ.get("PALLAS_PROF_INJECTED"), "path": gk.path,
       "source": digest(gk.source)}
if "--compile" in sys.argv:
  from pallas_prof.backend.compiling import compile as pcompile
  ck = pcompile.compile_kernel(gk)
  # "code": the PTX before its debug sections, which spell out the kernel module's path
  # (a stand-in cache's differs)
  out.update(cache=ck.cache, ptx=digest(ck.ptx), cubin=digest(ck.cubin),
             code=digest(ck.ptx.split("\t.section\t.debug")[0].replace(gk.path, "KERNEL")))
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="session")
def program(tmp_path_factory) -> str:
  """CHILD as a file: the generated source names the program's file, so every run of it
  (plain or under `pallas-prof run`) lowers the same kernel module."""
  path = tmp_path_factory.mktemp("program") / "program.py"
  path.write_text(CHILD)
  PROGRAM["path"] = str(path)
  return str(path)


def _child(cache: str, *args: str, env: dict | None = None, wait: bool = True):
  env = dict(os.environ if env is None else env, PALLAS_PROF_CACHE_DIR=cache, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(p for p in (ROOT, (env or os.environ).get("PYTHONPATH"))
                                        if p))
  env.pop("PALLAS_PROF_INJECTED", None)
  proc = subprocess.Popen([sys.executable, PROGRAM["path"], *args], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  return _finish(proc) if wait else proc


def _finish(proc) -> dict:
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
  (line,) = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
  result = json.loads(line[len("RESULT "):])
  result["cache_warnings"] = [ln for ln in err.splitlines() if "CacheWarning" in ln]
  return result


def _right(result: dict) -> None:
  assert result["right"], f"a wrong answer: max error {result['max_error']}"
  assert result["injected"] is None, "a line appended to a cached file ran"


def _leftovers(folder: str) -> list[str]:
  """Temporary files or folders left under `folder` (half-written cache files)."""
  return [os.path.join(d, n) for d, dirs, files in os.walk(folder) for n in dirs + files
          if n.endswith(".tmp") or ".tmp" in n.split(".")]


# --- generated kernel modules --------------------------------------------------------------

@pytest.fixture(autouse=True)
def _program_file(program):
  return program


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, program):
  """The CHILD's kernel module and compile-cache entry as a cold run leaves them, and what
  that run computed."""
  cache = str(tmp_path_factory.mktemp("pristine") / "cache")
  first = _child(cache, "--compile")
  _right(first)
  assert first["cache"] == "miss" and not first["cache_warnings"]
  (entry,) = glob.glob(os.path.join(cache, "compiled", "*", "*"))
  return {"cache": cache, "run": first, "kernel": first["path"], "entry": entry}


def _copy_cache(pristine: dict, to: str) -> str:
  shutil.copytree(pristine["cache"], to)
  return to


def _damage(path: str, mutation: str) -> bytes:
  with open(path, "rb") as f:
    whole = f.read()
  with open(path, "wb") as f:
    f.write(inject.mutations(whole)[mutation])
  return whole


def _fault(mutation: str, *more: str):
  return pytest.param(mutation, marks=pytest.mark.fault(inject.kind_of(mutation), *more),
                      id=mutation)


@pytest.mark.parametrize("mutation", [_fault(m) for m in MUTATIONS])
def test_a_damaged_kernel_module_is_written_again_not_run(pristine, tmp_path, mutation):
  cache = _copy_cache(pristine, str(tmp_path / "cache"))
  path = pristine["kernel"].replace(pristine["cache"], cache)
  whole = _damage(path, mutation)
  damaged = open(path, "rb").read()

  result = _child(cache)
  _right(result)
  assert result["path"] == path
  # one warning, naming the file
  assert len(result["cache_warnings"]) == 1 and path in result["cache_warnings"][0], result
  # the cache holds the whole module again; the damaged one is kept aside, not run
  assert open(path, "rb").read() == whole
  (aside,) = glob.glob(path + ".bad-*")
  assert open(aside, "rb").read() == damaged
  assert not _leftovers(cache)
  # the next process inherits nothing: no warning, the same module, the right answer
  again = _child(cache)
  _right(again)
  assert not again["cache_warnings"] and open(path, "rb").read() == whole


@pytest.mark.fault("append")
def test_a_bytecode_file_beside_a_kernel_module_is_never_run(pristine, tmp_path):
  """Python runs a module's cached bytecode when its header matches the source's time and
  size. One planted beside a kernel module, holding the module with a line appended, is
  neither run by the program nor by the compile worker; pallas-prof writes none itself."""
  import importlib.util
  import marshal
  env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
  cold = str(tmp_path / "cold")
  _right(_child(cold, "--compile", env=env))
  assert not glob.glob(os.path.join(cold, "**", "__pycache__"), recursive=True)

  cache = _copy_cache(pristine, str(tmp_path / "cache"))
  shutil.rmtree(os.path.join(cache, "compiled"))      # so that the compile worker loads it too
  path = pristine["kernel"].replace(pristine["cache"], cache)
  marker = tmp_path / "planted-line-ran"
  planted = open(path).read() + f"\nopen({str(marker)!r}, 'w').close()\n"
  info = os.stat(path)
  pyc = importlib.util.cache_from_source(path)
  os.makedirs(os.path.dirname(pyc))
  with open(pyc, "wb") as f:
    f.write(importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
            + (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
            + marshal.dumps(compile(planted, path, "exec")))
  for cached in ("miss", "disk"):          # this process, compiling, and the next
    result = _child(cache, "--compile", env=env)
    _right(result)
    assert result["cache"] == cached and not result["cache_warnings"]
    assert not marker.exists(), "the planted bytecode ran"
  assert os.listdir(os.path.dirname(pyc)) == [os.path.basename(pyc)]


@pytest.mark.fault("garble", "truncate")
def test_a_damaged_kernel_module_in_a_run_still_gives_the_report(pristine, tmp_path):
  """`pallas-prof run` of a program whose cached kernel module (garbled) and compile-cache
  entry (its cubin cut short) are damaged: the program's answer is right, the report is
  written, and it shows the kernel compiled again rather than the damaged entry."""
  cache = _copy_cache(pristine, str(tmp_path / "cache"))
  kernel = pristine["kernel"].replace(pristine["cache"], cache)
  entry = pristine["entry"].replace(pristine["cache"], cache)
  _damage(kernel, "garble")
  _damage(os.path.join(entry, "kernel.cubin"), "truncate")
  env = dict(os.environ, PALLAS_PROF_CACHE_DIR=cache, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out",
                         str(tmp_path / "out"), PROGRAM["path"]], env=env, capture_output=True,
                        text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
  _right(json.loads(line[len("RESULT "):]))
  report = json.loads((tmp_path / "out" / "report.json").read_text())
  (k,) = report["kernels"]
  assert k["compile"]["cache"] == "miss" and not report["errors"]
  assert glob.glob(kernel + ".bad-*") and glob.glob(entry + ".bad-*")
  assert done.stderr.count("CacheWarning") == 1        # one warning, not one per file
  assert not _leftovers(cache)


# --- compile-cache entries -----------------------------------------------------------------
# An entry holds compiled.json and a file per stage (kernel.ttir, kernel.ttgir, kernel.ll,
# kernel.ptx, kernel.cubin), sealed with manifest.json: each is damaged in each way.
ENTRY_FILES = ("compiled.json", "kernel.ttir", "kernel.ttgir", "kernel.ll", "kernel.ptx",
               "kernel.cubin", "manifest.json")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
  """A kernel lowered in this process, its cold compile and the entry that compile stored."""
  from pallas_prof.backend.compiling import compile as pcompile
  from pallas_prof.backend.compiling import compile_cache
  from testkit.examples import lower_example
  cache = str(tmp_path_factory.mktemp("compiled") / "cache")
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("PALLAS_PROF_CACHE_DIR", cache)
    gk = lower_example("layer_norm")
    pcompile.clear_memory_cache()
    # as a fresh process: a test before this one in the same worker may have asked ptxas
    # its version already, and the memo would then not be written into this cache
    compile_cache._ptxas_version.cache_clear()
    ck = pcompile.compile_kernel(gk)
    assert ck.cache == "miss"
    entry = compile_cache._disk_dir(ck.key)
  return {"gk": gk, "ck": ck, "cache": cache, "entry": entry}


@pytest.fixture
def fresh_warnings(monkeypatch):
  """This process's one-warning memory, emptied: each case is a process of its own there."""
  from pallas_prof.backend import cache_files
  monkeypatch.setattr(cache_files, "_warned", set())
  monkeypatch.setattr(cache_files, "_stand_ins", {})


@pytest.mark.parametrize("name", ENTRY_FILES)
@pytest.mark.parametrize("mutation", [_fault(m) for m in MUTATIONS])
def test_a_damaged_compile_cache_entry_is_compiled_again_and_moved_aside(
    compiled, tmp_path, monkeypatch, fresh_warnings, name, mutation):
  from pallas_prof.backend import cache_files
  from pallas_prof.backend.compiling import compile as pcompile
  cache = str(tmp_path / "cache")
  shutil.copytree(compiled["cache"], cache)
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", cache)
  entry = compiled["entry"].replace(compiled["cache"], cache)
  _damage(os.path.join(entry, name), mutation)
  damaged = open(os.path.join(entry, name), "rb").read()

  pcompile.clear_memory_cache()
  with pytest.warns(cache_files.CacheWarning) as caught:
    again = pcompile.compile_kernel(compiled["gk"])
  # a miss, compiled again to what the cold compile gave: the damaged entry never launched
  assert again.cache == "miss"
  assert again.ptx == compiled["ck"].ptx and again.cubin == compiled["ck"].cubin
  assert len(caught) == 1 and entry in str(caught[0].message)
  # the damaged entry is aside, whole as it was found; a whole one took its place
  (aside,) = glob.glob(entry + ".bad-*")
  assert open(os.path.join(aside, name), "rb").read() == damaged
  assert cache_files.entry_damage(entry) is None
  assert not _leftovers(cache)
  # what a later process finds: the new entry, used as it is
  pcompile.clear_memory_cache()
  later = pcompile.compile_kernel(compiled["gk"])
  assert later.cache == "disk" and later.cubin == compiled["ck"].cubin


@pytest.mark.parametrize("mutation", [_fault(m) for m in MUTATIONS])
def test_a_damaged_ptxas_version_memo_is_asked_again(compiled, tmp_path, monkeypatch,
                                                      fresh_warnings, mutation):
  """The ptxas version is part of every compile key and caps the PTX version written for
  the driver: a damaged memo of it is not believed (moved aside, ptxas asked again)."""
  from pallas_prof.backend import cache_files
  from pallas_prof.backend.compiling import compile_cache
  cache = str(tmp_path / "cache")
  shutil.copytree(compiled["cache"], cache)
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", cache)
  (memo,) = glob.glob(os.path.join(cache, "tools", "ptxas-*"))
  whole = _damage(memo, mutation)
  compile_cache._ptxas_version.cache_clear()
  with pytest.warns(cache_files.CacheWarning, match="ptxas"):
    key = compile_cache.compile_key(compiled["gk"], ("cuda", 90))
  assert key == compiled["ck"].key
  assert open(memo, "rb").read() == whole                  # written again, whole
  assert len(glob.glob(memo + ".bad-*")) == 1 and not _leftovers(cache)
  compile_cache._ptxas_version.cache_clear()         # the next process: believed, silently
  with warnings_as_errors():
    assert compile_cache.compile_key(compiled["gk"], ("cuda", 90)) == key
  compile_cache._ptxas_version.cache_clear()


@contextlib.contextmanager
def warnings_as_errors():
  import warnings
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    yield


# --- a cache folder that cannot be written -------------------------------------------------

@contextlib.contextmanager
def _unwritable(how: str, tmp_path):
  """A cache folder that refuses writes, the way `how` says; yields (cache, after) where
  after() makes it writable again (the user's fix), or skips where this machine cannot."""
  cache = str(tmp_path / "cache")
  if how == "file_in_the_way":
    with open(cache, "w") as f:
      f.write("a file where the cache folder should be\n")
    yield cache, lambda: os.unlink(cache)
  elif how == "read_only_mount":
    os.makedirs(cache)
    if not inject._can_mount() or subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", cache],
        capture_output=True).returncode != 0:
      pytest.skip("cannot mount a read-only tmpfs here (not root, or a sandbox)")
    mounted = [True]

    def after():
      subprocess.run(["umount", "-l", cache], capture_output=True)
      mounted[0] = False
    try:
      yield cache, after
    finally:
      if mounted[0]:
        after()
  else:
    raise ValueError(how)


def _assert_stand_in(result: dict, cache: str) -> None:
  """Right answer, one warning naming the folder and what to do, the stand-in gone."""
  _right(result)
  (warning,) = result["cache_warnings"]
  assert cache in warning and "PALLAS_PROF_CACHE_DIR" in warning, warning
  stand_in = os.path.dirname(os.path.dirname(result["path"]))
  assert not result["path"].startswith(cache + os.sep) and stand_in in warning
  assert not os.path.exists(stand_in), "the stand-in cache outlived its process"


@pytest.mark.fault("readonly")
@pytest.mark.parametrize("how", ["file_in_the_way", "read_only_mount"])
def test_a_cache_folder_that_cannot_be_written_costs_one_warning(tmp_path, how):
  with _unwritable(how, tmp_path) as (cache, after):
    result = _child(cache, "--compile")
    _assert_stand_in(result, cache)
    assert result["cache"] == "miss"
    if os.path.isdir(cache):
      assert not _leftovers(cache) and not os.listdir(cache)
    after()
  # writable again: the next process fills the cache, with no warning
  again = _child(cache, "--compile")
  _right(again)
  assert not again["cache_warnings"] and again["path"].startswith(cache + os.sep)
  assert again["code"] == result["code"]


@pytest.mark.fault("readonly")
def test_a_read_only_cache_that_holds_everything_is_used_as_it_is(pristine, tmp_path):
  """A cache made read-only once filled (a shared, prepared one): its whole files are used,
  with no warning and no stand-in; nothing is written to it."""
  if not inject._can_mount():
    pytest.skip("cannot bind-mount read-only here (not root)")
  cache = _copy_cache(pristine, str(tmp_path / "cache"))
  if subprocess.run(["mount", "--bind", cache, cache], capture_output=True).returncode != 0:
    pytest.skip("cannot bind-mount here (a sandbox)")
  try:
    assert subprocess.run(["mount", "-o", "remount,bind,ro", cache]).returncode == 0
    before = sorted(os.path.join(d, n) for d, ds, fs in os.walk(cache) for n in ds + fs)
    result = _child(cache, "--compile")
    _right(result)
    assert not result["cache_warnings"] and result["cache"] == "disk"
    assert result["path"] == pristine["kernel"].replace(pristine["cache"], cache)
    assert sorted(os.path.join(d, n) for d, ds, fs in os.walk(cache) for n in ds + fs) == before
  finally:
    subprocess.run(["umount", "-l", cache], capture_output=True)


def _filled(folder: str) -> None:
  """Fills the file system of `folder` to the last block."""
  with open(os.path.join(folder, "filler"), "wb", buffering=0) as f:
    with contextlib.suppress(OSError):
      while True:
        f.write(b"\0" * 512)


@pytest.mark.fault("enospc")
@pytest.mark.parametrize("how", ["tmpfs", "injected_0", "injected_100"])
def test_a_full_cache_folder_costs_one_warning_and_leaves_no_temp_file(tmp_path, how):
  disk = str(tmp_path / "disk")
  with contextlib.ExitStack() as stack:
    if how == "tmpfs":
      mounted = stack.enter_context(inject.small_disk(disk))
      if mounted is None:
        pytest.skip("cannot mount a tmpfs here: the injected cases cover a full disk")
      _filled(disk)
      env = None
    else:
      os.makedirs(disk)
      env = inject.enospc_env(disk, after_bytes=int(how.split("_")[1]))
    cache = os.path.join(disk, "cache")
    result = _child(cache, "--compile", env=env)
    _assert_stand_in(result, cache)
    assert not _leftovers(disk), _leftovers(disk)
    assert not [f for d, _, fs in os.walk(cache) for f in fs], "a partial file was kept"
    if how == "tmpfs":
      os.unlink(os.path.join(disk, "filler"))
    # space again: the next process fills the cache, with no warning
    again = _child(cache, "--compile")
    _right(again)
    assert not again["cache_warnings"] and again["path"].startswith(cache + os.sep)
    assert again["code"] == result["code"] and again["cache"] == "miss"


@pytest.mark.fault("enospc")
def test_a_full_cache_during_a_run_keeps_the_report(tmp_path):
  """`pallas-prof run` with its cache folder on a full disk (injected): the report is
  written (it is not in the cache), the program's answer right, one warning."""
  disk = str(tmp_path / "disk")
  os.makedirs(disk)
  env = inject.enospc_env(disk, after_bytes=0, env=dict(
      os.environ, PALLAS_PROF_CACHE_DIR=os.path.join(disk, "cache"), JAX_PLATFORMS="cpu",
      PYTHONPATH=ROOT))
  done = subprocess.run([sys.executable, "-m", "pallas_prof", "run", "--out",
                         str(tmp_path / "out"), PROGRAM["path"]], env=env, capture_output=True,
                        text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
  _right(json.loads(line[len("RESULT "):]))
  report = json.loads((tmp_path / "out" / "report.json").read_text())
  assert report["kernels"][0]["compile"]["cache"] == "miss" and not report["errors"]
  assert done.stderr.count("CacheWarning") == 1, done.stderr[-3000:]
  assert not _leftovers(disk)


# --- two processes on one cache ------------------------------------------------------------

@pytest.mark.fault("concurrent")
@pytest.mark.parametrize("round_", [0, 1])
def test_two_processes_writing_one_kernel_at_once_both_right_the_files_whole(tmp_path, round_):
  from pallas_prof.backend import cache_files
  cache, go = str(tmp_path / "cache"), str(tmp_path / "go")
  env = dict(os.environ, CACHE_TEST_GO=go)
  procs = [_child(cache, "--compile", env=env, wait=False) for _ in range(2)]
  time.sleep(5)                 # both past their imports, waiting for the go
  open(go, "w").close()
  first, second = [_finish(p) for p in procs]
  for result in (first, second):
    _right(result)
    assert not result["cache_warnings"], result["cache_warnings"]
  assert first["path"] == second["path"] and first["ptx"] == second["ptx"]
  with open(first["path"], "rb") as f:
    assert hashlib.sha256(f.read()).hexdigest() == first["source"]
  (entry,) = glob.glob(os.path.join(cache, "compiled", "*", "*"))
  assert cache_files.entry_damage(entry) is None
  assert not _leftovers(cache) and not glob.glob(os.path.join(cache, "**", "*.bad-*"),
                                                 recursive=True)


# --- a cache folder other users can write (issue 48, item 8) -------------------------------

def _plant_entry(cache: str, entry: str) -> None:
  """What another user who can write the cache folder does: the compiled entry's PTX
  replaced, sealed again with a manifest that matches (a seal is no signature)."""
  ptx = os.path.join(entry, "kernel.ptx")
  with open(ptx) as f:
    text = f.read()
  with open(ptx, "w") as f:
    f.write("// PLANTED by another user\n" + text)
  files = {}
  for name in sorted(os.listdir(entry)):
    if name != "manifest.json":
      data = open(os.path.join(entry, name), "rb").read()
      files[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
  with open(os.path.join(entry, "manifest.json"), "w") as f:
    json.dump({"files": files}, f)


def _foreign(how: str, cache: str) -> str:
  """Makes `cache` (a filled cache folder) one another user can write, the way `how` says;
  returns the path to hand pallas-prof as PALLAS_PROF_CACHE_DIR."""
  other = 65534              # nobody / nogroup
  if how in ("another owner", "group", "link of another user") and os.geteuid() != 0:
    pytest.skip("only root can give a folder or link to another user here")
  if how == "all users":
    os.chmod(cache, 0o777)
  elif how == "shared, sticky":
    os.chmod(cache, 0o1777)
  elif how == "another owner":
    os.chown(cache, other, other)
  elif how == "group":
    os.chown(cache, 0, other)
    os.chmod(cache, 0o770)
  elif how == "open parent":
    parent = os.path.dirname(cache)
    os.chmod(parent, 0o777)
  elif how == "link of another user":
    link = cache + "-link"
    os.symlink(cache, link)
    os.lchown(link, other, other)
    return link
  return cache


FOREIGN = {"all users": "writable by all users", "shared, sticky": "writable by all users",
           "another owner": "owned by another user", "group": "writable by group",
           "open parent": "above it, is writable by all users without the sticky bit",
           "link of another user": "a link owned by another user"}


@pytest.mark.fault("foreign_cache")
@pytest.mark.parametrize("how", list(FOREIGN))
def test_a_cache_folder_others_can_write_is_not_trusted(pristine, tmp_path, how):
  """PALLAS_PROF_CACHE_DIR naming a folder another user can write into (or swap): what they
  plant there (a compiled entry sealed again) is never used. The cache is kept in a folder
  only this user can write: `user-<uid>` inside a shared folder with the sticky bit, else a
  temporary one removed at exit; one warning names the folder and why."""
  cache = _copy_cache(pristine, str(tmp_path / "shared" / "cache"))
  entry = pristine["entry"].replace(pristine["cache"], cache)
  _plant_entry(cache, entry)
  planted = {n: open(os.path.join(entry, n), "rb").read() for n in os.listdir(entry)}
  given = _foreign(how, cache)
  result = _child(given, "--compile")
  _right(result)
  # the planted entry was not used: compiled again, to what the cold compile gave
  assert result["cache"] == "miss" and result["code"] == pristine["run"]["code"], result
  (warning,) = result["cache_warnings"]
  assert given in warning and FOREIGN[how] in warning and "PALLAS_PROF_CACHE_DIR" in warning, \
      warning
  kept = os.path.dirname(os.path.dirname(result["path"]))       # <cache>/kernels/<module>
  assert kept in warning
  assert {n: open(os.path.join(entry, n), "rb").read() for n in os.listdir(entry)} == planted
  if how == "shared, sticky":          # a private folder inside it, this user's, kept
    assert kept == os.path.join(cache, f"user-{os.geteuid()}")
    info = os.stat(kept)
    assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o700
    again = _child(given, "--compile")
    _right(again)
    assert again["cache"] == "disk" and again["code"] == pristine["run"]["code"]
    assert again["path"] == result["path"] and len(again["cache_warnings"]) == 1
  else:                                # a temporary folder, gone with its process
    assert not kept.startswith(cache + os.sep) and not os.path.exists(kept)
    assert not os.path.exists(os.path.join(cache, f"user-{os.geteuid()}"))
  assert not _leftovers(cache)


def test_tuning_choices_and_the_last_run_note_live_in_the_private_folder(tmp_path, monkeypatch,
                                                                        fresh_warnings):
  """What pallas-prof reads back from its cache besides kernels and compiles (tuning
  choices, the note of the last run `show` opens) is in the private folder too."""
  from pallas_prof.backend import cache_files
  from pallas_prof.cli import run_directory
  from pallas_prof.tune import choice
  shared = tmp_path / "shared"
  shared.mkdir()
  os.chmod(shared, 0o1777)
  monkeypatch.setattr(cache_files, "_homes", {})
  monkeypatch.setenv("PALLAS_PROF_CACHE_DIR", str(shared))
  mine = str(shared / f"user-{os.geteuid()}")
  with pytest.warns(cache_files.CacheWarning, match="writable by all users"):
    assert cache_files.root() == mine
  assert choice.cache_path("0" * 64).startswith(mine + os.sep)
  assert run_directory._last_runs_path().startswith(mine + os.sep)
