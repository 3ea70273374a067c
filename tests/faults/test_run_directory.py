"""Run directories are data, not instructions (issue 38, item 6): `show`, `report`,
`report --html` and `diff` on a real run (examples/softmax.py on the CPU) whose files
were damaged, edited to lead elsewhere, replaced by FIFOs and links, or made to carry
terminal escapes. Each command either does its job or ends with one clear line (the
file, the fault, what to do); none leaves a traceback, hangs, follows a path out of the
run, changes the run, or prints a raw control character.
"""
from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess

import pytest

from tests.faults import inject
from tests.faults.cli_runs import (SOFTMAX, assert_clear, in_child, in_process, pallas_prof,
                                   raw_controls, snapshot)

# every file of a run `show`, `report` or `diff` may read; kernels/K/ is the kernel's folder
FILES = ("report.json", "trace.otlp.jsonl", "trace.perfetto.json", "K/kernel.json",
         "K/compiled.json", "K/spec.json", "K/source.py", "K/kernel.ttir", "K/kernel.ttgir",
         "K/kernel.ll", "K/kernel.ptx", "K/kernel.cubin")


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory):
  """A real run, made once: (its directory, its kernel folder's name, what `show` and
  `report` print of it undamaged)."""
  out = tmp_path_factory.mktemp("run") / "softmax"
  done = pallas_prof("run", "--out", str(out), SOFTMAX,
                     cache_dir=tmp_path_factory.mktemp("cache"))
  assert done.returncode == 0, done.stdout + done.stderr
  (kernel,) = os.listdir(out / "kernels")
  os.remove(out / "report.html")          # `report --html` writes elsewhere in these tests
  baseline = {name: in_process(*args(str(out), str(out))) for name, args in COMMANDS.items()}
  assert all(code == 0 for code, _, _ in baseline.values()), baseline
  return out, kernel, baseline


COMMANDS = {
    "show": lambda run, pristine: ["show", "softmax_kernel", "--dir", run],
    "show --ptx": lambda run, pristine: ["show", "softmax_kernel", "--dir", run, "--ptx"],
    "show --user": lambda run, pristine: ["show", "softmax_kernel", "--dir", run, "--user"],
    "report": lambda run, pristine: ["report", run],
    "report --html": lambda run, pristine: ["report", run, "--html", "--html-out",
                                            os.path.join(os.path.dirname(run), "page.html")],
    "diff": lambda run, pristine: ["diff", pristine, run],
}


def _copy(softmax_run, tmp_path):
  src, kernel, _ = softmax_run
  run = tmp_path / "run"
  shutil.copytree(src, run, symlinks=True)
  return run, run / "kernels" / kernel


def _path(run, kdir, name: str):
  return kdir / name[2:] if name.startswith("K/") else run / name


def _each_command(softmax_run, run, *names: str) -> dict[str, tuple]:
  """Every command on the damaged `run`: each did its job (exit 0, naming the kernel;
  the page written) or ended with a clear line naming one of `names`. The run is as it
  was after them, and the undamaged run still prints what it printed before."""
  src, _, baseline = softmax_run
  before = snapshot(run)
  outcomes = {}
  for command, args in COMMANDS.items():
    code, out, message = outcomes[command] = in_process(*args(str(run), str(src)))
    if code == 0 and command == "report --html":
      assert "softmax_kernel" in (run.parent / "page.html").read_text()
    elif code == 0:
      assert "softmax_kernel" in out, (command, out)
    else:
      assert_clear(message, *names)
  assert snapshot(run) == before                       # a read changes nothing of the run
  for command in ("show", "report"):                   # and nothing of it stays behind
    again = in_process(*COMMANDS[command](str(src), str(src)))
    assert again == baseline[command], "\n".join(difflib.unified_diff(
        baseline[command][1].splitlines(), again[1].splitlines(), lineterm=""))
  return outcomes


@pytest.mark.parametrize("name, mutation", [
    pytest.param(name, mutation, marks=pytest.mark.fault(inject.kind_of(mutation)))
    for name in FILES for mutation in ("truncate", "truncate_1", "empty", "garble", "append")])
def test_a_damaged_file_is_shown_or_named(softmax_run, tmp_path, name, mutation):
  run, kdir = _copy(softmax_run, tmp_path)
  path = _path(run, kdir, name)
  path.write_bytes(inject.mutations(path.read_bytes(), seed=len(name))[mutation])
  outcomes = _each_command(softmax_run, run, os.path.basename(name))
  if name in ("report.json", "K/kernel.json") and mutation in ("truncate", "empty"):
    # what every command of that file needs: none can do its job, each says why
    needs = ("report", "diff") if name == "report.json" else ("show", "show --ptx")
    assert all(outcomes[c][0] != 0 for c in needs), outcomes


def _edit_json(path, edit):
  data = json.loads(path.read_text())
  edit(data)
  path.write_text(json.dumps(data))


def _set(*keys, value):
  def edit(data):
    for key in keys[:-1]:
      data = data[key]
    data[keys[-1]] = value
  return edit


# well-formed JSON with values its writer never writes: each was a traceback of `show`
# or `report --html` before kernel.json was decoded by type
WRONG_VALUES = [
    ("K/kernel.json", lambda d: d.clear() or d.update(schema="pallas-prof/generated/1"), "eqns"),
    ("K/kernel.json", _set("line_map", value=[]), "line_map"),
    ("K/kernel.json", _set("line_map", "13", value=10 ** 6), "line_map"),
    ("K/kernel.json", _set("line_map", "13", value=None), "line_map"),
    ("K/kernel.json", _set("line_map", "13", value=[]), "line_map"),
    ("K/kernel.json", _set("eqns", 0, "file", value=7), "eqns[0].file"),
    ("K/kernel.json", _set("eqns", 0, "line", value="x"), "eqns[0].line"),
    ("K/kernel.json", _set("eqns", 1, "index", value=0), "eqns[1].index"),
    ("K/kernel.json", _set("eqns", 0, "parent", value=99), "eqns[0].parent"),
    ("K/kernel.json", _set("source_path", value=None), "source_path"),
    ("K/kernel.json", _set("params", 0, value=None), "params[0]"),
    ("K/kernel.json", _set("launch_grid", value=[1, 2]), "launch_grid"),
    # options CompilerParams refuses at the user's line, so no run writes them
    ("K/kernel.json", _set("num_warps", value=3), "kernel.json.num_warps"),
    ("K/kernel.json", _set("num_stages", value=0), "kernel.json.num_stages"),
    ("K/kernel.json", _set("launch_group", value=-2), "kernel.json.launch_group"),
    ("K/kernel.json", _set("persistent", value=-1), "kernel.json.persistent"),
    ("K/kernel.json", _set("persistent", value="132"), "kernel.json.persistent"),
    ("K/compiled.json", _set("stages", value=["ptx", "../../x"]), "stages"),
    ("K/compiled.json", _set("target", value="cuda"), "target"),
    ("K/compiled.json", _set("target", value=["hip", 942]), "target"),
    ("K/compiled.json", _set("target", value=["hip", "gfx9x"]), "target"),
    ("K/compiled.json", _set("target_resources", value={"vgprs": "many"}), "target_resources"),
    ("K/compiled.json", _set("metadata", "num_warps", value="four"), "num_warps"),
    ("report.json", _set("kernels", 0, "files", value=[]), "files"),
    ("report.json", _set("kernels", 0, "label", value=None), "label"),
]


@pytest.mark.fault("wrong_value")
@pytest.mark.parametrize("name, edit, field", WRONG_VALUES,
                         ids=[f"{n}:{f}" for n, _, f in WRONG_VALUES])
def test_a_wrong_value_is_named_with_its_field(softmax_run, tmp_path, name, edit, field):
  run, kdir = _copy(softmax_run, tmp_path)
  _edit_json(_path(run, kdir, name), edit)
  outcomes = _each_command(softmax_run, run, os.path.basename(name))
  readers = ("report", "diff") if name == "report.json" else ("show", "show --ptx")
  for command in readers:
    code, _, message = outcomes[command]
    assert code != 0 and field in message, (command, message)


# --- figures no run writes: diff must not compare them (issue 48, item 9) ---------------

def _timed(median_s):
  """A profile's runtime as a GPU run writes it (a CPU run has none), headline `median_s`."""
  timing = {"mode": "cold", "launches": 20, "warmup_launches": 3, "median_s": median_s,
            "p10_s": median_s, "p90_s": median_s, "min_s": median_s, "mean_s": median_s,
            "timed_window_s": 1e-3}
  runtime = {"device_index": 0, "input_sets": 2, "set_bytes": 512000, "l2_bytes": 1 << 20,
             "outputs_written": True, "unwritten_elements": [None], "mode": "cold",
             "cold": timing}

  def edit(data):
    for profile in (data["profile"], *data["profiles"]):
      profile["kernels"][0]["runtime"] = runtime
  return edit


def _headline(mode, missing=None):
  """A timed runtime whose headline `mode` is no timing's, or names one that is missing."""
  def edit(data):
    _timed(20e-6)(data)
    for profile in (data["profile"], *data["profiles"]):
      runtime = profile["kernels"][0]["runtime"]
      runtime["mode"] = mode
      if missing:
        runtime[missing] = None
  return edit


DAMAGED_FIGURES = [
    ("nan runtime", _timed(float("nan")), "runtime.cold.median_s"),
    ("negative runtime", _timed(-1e-3), "runtime.cold.median_s"),
    ("unknown-mode runtime", _headline("hot"), "runtime.mode"),
    ("headless runtime", _headline("sustained"), "runtime.mode"),
    ("cold-less runtime", _headline("cold", missing="cold"), "runtime.mode"),
    ("infinite runtime", _timed(float("inf")), "runtime.cold.median_s"),
    ("nan registers", _set("kernels", 0, "resources", "registers", value=float("nan")),
     "resources.registers"),
    ("text registers", _set("kernels", 0, "resources", "registers", value="many"),
     "resources.registers"),
    ("huge registers", _set("kernels", 0, "resources", "registers", value=10 ** 400),
     "resources.registers"),
    ("negative shared", _set("kernels", 0, "resources", "shared_bytes", value=-4096),
     "resources.shared_bytes"),
    ("text spills", _set("kernels", 0, "resources", "spill_stores", value="none"),
     "resources.spill_stores"),
    ("negative instructions", _set("profile", "kernels", 0, "static", "sass_instructions",
                                   value=-5), "static.sass_instructions"),
]


@pytest.mark.fault("nan_report")
@pytest.mark.parametrize("how, edit, field", DAMAGED_FIGURES, ids=[d[0] for d in DAMAGED_FIGURES])
def test_a_damaged_figure_fails_the_regression_gate_naming_run_kernel_and_field(
    softmax_run, tmp_path, how, edit, field):
  """`diff --fail-on-regression` of a good run and one whose figure no run writes (NaN,
  negative, infinite, a text, a number beyond any count): a damaged run proves nothing, so
  the gate fails, either way round, with one line naming that run, the kernel and the field
  (a NaN compared as "same", a negative runtime as "faster", a text or a huge count ended
  in a traceback)."""
  src, kernel, _ = softmax_run
  good, bad = tmp_path / "good", tmp_path / "bad"
  for run in (good, bad):
    shutil.copytree(src, run, symlinks=True)
  if how.endswith("runtime"):
    _edit_json(good / "report.json", _timed(20e-6))       # both timed: the runtime compares
  _edit_json(bad / "report.json", edit)
  before = snapshot(bad)
  label = json.loads((src / "report.json").read_text())["kernels"][0]["label"]
  for a, b in ((good, bad), (bad, good)):
    code, out, message = in_process("diff", str(a), str(b), "--fail-on-regression", "5")
    assert code != 0, (how, out)
    assert_clear(message, "report.json")
    assert str(bad / "report.json") in message and label in message and field in message, \
        message
  for command in ("report", "show"):              # the other readers refuse it the same way
    code, _, message = in_process(*COMMANDS[command](str(bad), str(src)))
    assert code != 0 and field in message, (command, message)
  # nothing of it is kept: the damaged run is as it was, the good one still passes the gate
  assert snapshot(bad) == before
  code, out, _ = in_process("diff", str(good), str(src), "--fail-on-regression", "5")
  assert code == 0 and "softmax_kernel" in out


# --- paths leading out, links, FIFOs -----------------------------------------------------

def _subprocess(softmax_run, run, tmp_path, *names):
  """Every command on `run` in a child process (a FIFO that blocked would hang this one),
  which must end within COMMAND_SECONDS: each with no traceback, doing its job or ending
  with a clear line naming one of `names`, never showing what lies outside the run. The
  run is as it was. Returns {command: {"code", "stdout", "message", "error"}}."""
  src, _, _ = softmax_run
  before = snapshot(run)
  try:
    done = in_child({c: args(str(run), str(src)) for c, args in COMMANDS.items()},
                    tmp_path / "cache")
  except subprocess.TimeoutExpired:
    pytest.fail("a command hung on the run")
  for command, p in done.items():
    assert p["error"] is None, (command, p["error"])
    assert "OUTSIDE-THE-RUN" not in p["stdout"] + p["message"], command
    if p["code"] != 0:
      assert_clear(p["message"], *names)
  assert snapshot(run) == before
  return done


def _outside_kernel(tmp_path, kdir):
  """A copy of the kernel's folder outside the run, its source marked."""
  outside = tmp_path / "elsewhere"
  shutil.copytree(kdir, outside)
  source = (outside / "source.py").read_text()
  (outside / "source.py").write_text(source.replace("def ", "# OUTSIDE-THE-RUN\ndef ", 1))
  return outside


@pytest.mark.fault("hostile_path")
@pytest.mark.parametrize("how", ["dotdot", "absolute", "trace"])
def test_report_paths_leading_out_are_refused(softmax_run, tmp_path, how):
  run, kdir = _copy(softmax_run, tmp_path)
  outside = _outside_kernel(tmp_path, kdir)
  hostile = {"dotdot": os.path.relpath(outside / "kernel.json", run),
             "absolute": str(outside / "kernel.json"), "trace": "/etc/passwd"}[how]
  keys = ("traces", "perfetto") if how == "trace" else ("kernels", 0, "files", "kernel")
  _edit_json(run / "report.json", _set(*keys, value=hostile))
  done = _subprocess(softmax_run, run, tmp_path, "report.json")
  for command in ("show", "report", "diff"):
    assert done[command]["code"] != 0 and "not a file inside the run directory" in \
        done[command]["message"], (command, done[command])


@pytest.mark.fault("hostile_path")
@pytest.mark.parametrize("what", ["kernel folder", "kernel.json", "source.py"])
def test_links_leading_out_are_not_followed(softmax_run, tmp_path, what):
  run, kdir = _copy(softmax_run, tmp_path)
  outside = _outside_kernel(tmp_path, kdir)
  if what == "kernel folder":
    shutil.rmtree(kdir)
    os.symlink(outside, kdir)
  else:
    os.remove(kdir / what)
    os.symlink(outside / what, kdir / what)
  done = _subprocess(softmax_run, run, tmp_path, kdir.name, what)
  assert done["show"]["code"] != 0 and "leads outside the run directory" in \
      done["show"]["message"], done["show"]
  assert done["report"]["code"] == 0           # the report names no file it reads there


@pytest.mark.fault("hostile_path")
def test_report_of_a_folder_does_not_follow_a_link_out_of_it(softmax_run, tmp_path):
  """`report runs/` merges the runs the folder holds: a child that is a link to a run
  elsewhere is refused, naming the link, as `show` refuses a link out of its run."""
  src, _, _ = softmax_run
  runs = tmp_path / "runs"
  runs.mkdir()
  shutil.copytree(src, runs / "a", symlinks=True)
  elsewhere = tmp_path / "elsewhere"
  shutil.copytree(src, elsewhere, symlinks=True)
  _edit_json(elsewhere / "report.json", _set("kernels", 0, "label",
                                             value="OUTSIDE-THE-RUN#000000"))
  os.symlink(elsewhere, runs / "b")
  before = snapshot(runs)
  done = in_child({"report": ["report", str(runs)], "report --json": ["report", str(runs), "--json"],
                   "report --html": ["report", str(runs), "--html", "--html-out",
                                     str(tmp_path / "page.html")]}, tmp_path / "cache")
  for command, p in done.items():
    assert p["error"] is None, (command, p["error"])
    assert "OUTSIDE-THE-RUN" not in p["stdout"] + p["message"], command
    assert p["code"] != 0 and "leads outside" in p["message"], (command, p)
    assert str(runs / "b") in p["message"] and "remove the link" in p["message"], p["message"]
  assert not (tmp_path / "page.html").exists() and snapshot(runs) == before
  os.remove(runs / "b")                       # the user's fix: the folder's own run reports
  code, out, _ = in_process("report", str(runs))
  assert code == 0 and "softmax_kernel" in out and "OUTSIDE-THE-RUN" not in out


@pytest.mark.fault("hostile_path")
@pytest.mark.parametrize("name", ["report.json", "K/kernel.json", "K/source.py",
                                  "K/compiled.json", "K/kernel.ptx"])
def test_a_fifo_in_place_of_a_file_never_blocks(softmax_run, tmp_path, name):
  run, kdir = _copy(softmax_run, tmp_path)
  path = _path(run, kdir, name)
  os.remove(path)
  os.mkfifo(path)
  done = _subprocess(softmax_run, run, tmp_path, os.path.basename(name))
  command = "report" if name == "report.json" else "show --ptx"
  assert done[command]["code"] != 0 and "not a regular file" in done[command]["message"]


@pytest.mark.fault("hostile_path")
def test_a_file_over_the_size_cap_is_refused(softmax_run, tmp_path):
  from pallas_prof.cli.saved_runs.files import MAX_FILE_BYTES
  run, kdir = _copy(softmax_run, tmp_path)
  with open(kdir / "kernel.ptx", "wb") as f:          # sparse: costs no disk
    f.truncate(MAX_FILE_BYTES + 1)
  done = _subprocess(softmax_run, run, tmp_path, "kernel.ptx")
  assert done["show --ptx"]["code"] != 0 and "too large" in done["show --ptx"]["message"]


@pytest.mark.fault("hostile_path")
@pytest.mark.parametrize("user_file", ["fifo.py", "/etc/passwd", "/dev/zero"])
def test_a_user_file_the_run_names_is_read_only_if_it_is_python_source(softmax_run, tmp_path,
                                                                       user_file):
  """The equations name the user's file (outside the run, as it should be): a FIFO there
  must not block, a file that is not Python source is not shown."""
  run, kdir = _copy(softmax_run, tmp_path)
  if user_file == "fifo.py":
    user_file = str(tmp_path / "fifo.py")
    os.mkfifo(user_file)
  meta = json.loads((kdir / "kernel.json").read_text())
  for e in meta["eqns"]:
    e["file"] = user_file
  (kdir / "kernel.json").write_text(json.dumps(meta))
  done = _subprocess(softmax_run, run, tmp_path, "kernel.json", os.path.basename(user_file))
  assert done["show"]["code"] == 0 and "root:" not in done["show"]["stdout"]
  assert done["show --user"]["code"] != 0 and "is not readable here" in \
      done["show --user"]["message"]


# --- show --target compiles a saved kernel: it runs nothing the run planted (issue 48, 8a)

def _planted(source: str, how: str, marker: str) -> str:
  """softmax's generated source with a line that creates `marker` when Python or Triton's
  code generator runs it, planted `how`."""
  touch = f"open({marker!r}, 'w').close()"
  if how in ("appended", "top level"):
    return source + f"\n{touch}\n"
  if how == "default argument":
    return source.replace("def softmax_kernel(x_ref, o_ref):",
                          f"def softmax_kernel(x_ref, o_ref, planted={touch}):", 1)
  if how == "decorator":
    return source.replace("@triton.jit\ndef softmax_kernel",
                          f"@triton.jit\n@(lambda f: ({touch}, f)[1])\ndef softmax_kernel", 1)
  assert how == "body"       # reaches os through a module Triton's name leads to
  return source.replace("    pid0 = tl.program_id(0)",
                        f"    triton.knobs.os.system('touch {marker}')\n    pid0 = tl.program_id(0)",
                        1)


@pytest.mark.fault("hostile_path")
@pytest.mark.parametrize("how", ["appended", "top level", "default argument", "decorator",
                                 "body"])
def test_show_target_never_runs_code_planted_in_a_run(softmax_run, tmp_path, how):
  """A run someone sent you is data: `show K --target sm_80` compiles its source.py (and
  `--eject` writes it into a program) only if it is what pallas-prof generates. A line planted in it (its digest in kernel.json left, or
  made again to match, as a sender can) is refused before Python or Triton runs any of it,
  with one line naming the file; the run is as it was, the cache holds no copy of the
  planted source, and the run it came from still compiles."""
  import hashlib
  src, _, _ = softmax_run
  run, kdir = _copy(softmax_run, tmp_path)
  marker = str(tmp_path / "planted-code-ran")
  source = _planted((kdir / "source.py").read_text(), how, marker)
  (kdir / "source.py").write_text(source)
  if how != "appended":
    _edit_json(kdir / "kernel.json", _set("key", value=hashlib.sha256(source.encode()).hexdigest()))
  before = snapshot(run)
  cache = tmp_path / "cache"
  target = ["show", "softmax_kernel", "--target", "sm_80", "--dir"]
  ejected = tmp_path / "ejected.py"
  commands = {"planted": target + [str(run)],
              "eject": ["show", "softmax_kernel", "--dir", str(run), "--eject", str(ejected)]}
  if how == "top level":        # (one compile of the run it came from is proof enough)
    commands["pristine"] = target + [str(src)]
  done = in_child(commands, cache)
  assert not os.path.exists(marker), "code planted in the run's source.py ran"
  planted = done["planted"]
  assert planted["error"] is None, planted["error"]
  assert planted["code"] != 0, planted
  assert_clear(planted["message"], str(kdir / "source.py"))
  assert "not a kernel pallas-prof generated" in planted["message"]
  # nor written into a program for you to run (`--eject`)
  assert done["eject"]["code"] != 0 and not ejected.exists(), done["eject"]
  assert_clear(done["eject"]["message"], str(kdir / "source.py"))
  assert snapshot(run) == before
  kept = [os.path.join(d, n) for d, _, ns in os.walk(cache) for n in ns if n.endswith(".py")]
  assert not [p for p in kept if marker in open(p).read()], kept
  if "pristine" in done:
    assert done["pristine"]["code"] == 0 and "compiled" in done["pristine"]["stdout"], \
        done["pristine"]


# --- escapes ---------------------------------------------------------------------------

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\u202e"      # a title, a cleared screen, a bidi override


@pytest.mark.fault("escape")
@pytest.mark.parametrize("where", ["source", "notes", "names", "user line"])
def test_escapes_in_a_run_never_reach_the_terminal(softmax_run, tmp_path, where):
  run, kdir = _copy(softmax_run, tmp_path)
  if where == "source":
    source = (kdir / "source.py").read_text().splitlines()
    source[0] += f"  # {ESCAPES}"
    (kdir / "source.py").write_text("\n".join(source) + "\n")
  elif where == "notes":
    _edit_json(run / "report.json", _set("notes", value=[f"note {ESCAPES} [bold]"]))
  elif where == "names":
    for name in (run / "report.json", kdir / "kernel.json"):
      meta = json.loads(name.read_text())
      kernels = meta["kernels"] if "kernels" in meta else [meta]
      for k in kernels:
        k["name"] = f"softmax_kernel{ESCAPES}[bold]"
        k["label"] = f"softmax_kernel{ESCAPES}[bold]#1"
      if "eqns" in meta:
        meta["eqns"][0]["primitive"] += ESCAPES
      name.write_text(json.dumps(meta))
  else:
    user = tmp_path / "user.py"
    user.write_text("".join(f"x{n} = 1  # {ESCAPES}\n" for n in range(40)))
    _edit_json(kdir / "kernel.json", lambda m: [e.update(file=str(user)) for e in m["eqns"]])
  done = _subprocess(softmax_run, run, tmp_path, "kernel.json")
  for command, p in done.items():
    shown = p["stdout"] + p["message"]
    assert not raw_controls(shown), (command, [hex(ord(c)) for c in raw_controls(shown)])
  planted = {"source": ["show"], "notes": ["report"], "names": ["show", "report"],
             "user line": ["show", "show --user"]}[where]
  for command in planted:                     # shown, visibly
    assert done[command]["code"] == 0, done[command]
    assert "\u241b]0;pwned" in done[command]["stdout"] and "<U+202E>" in done[command]["stdout"]
  if where in ("notes", "names"):
    assert "[bold]" in done["report"]["stdout"]   # printed as written, not read as markup
