"""Secrets in the forms the redactor missed (issue 48, items 10 to 12): a short option, a
header, a bare token, credentials without a scheme among the script's arguments; a secret
in the script's exception; a secret in the script's path. A run records none of them: not
in any file it writes, not on the terminal. The script still gets its arguments as given.
"""
from __future__ import annotations

import json
import os

import pytest

from tests.faults.cli_runs import pallas_prof
from tests.faults.test_secrets import _files_holding

ARGS_SCRIPT = """
import json, sys
# what the script was given, kept outside the run (the marker's path is its last argument)
with open(sys.argv[-1], "w") as f:
  json.dump(sys.argv[1:-1], f)
"""


def _leaks(out, done, secrets) -> dict[str, list[str]]:
  """{secret: the run's files and streams that hold it} for each secret found anywhere."""
  found = {}
  for secret in secrets:
    where = _files_holding(out, secret)
    where += [stream for stream, text in (("stdout", done.stdout), ("stderr", done.stderr))
              if secret in text]
    if where:
      found[secret] = where
  return found


@pytest.mark.fault("secret_forms")
def test_argument_forms_are_recorded_nowhere(tmp_path):
  script, marker = tmp_path / "script.py", tmp_path / "given.json"
  script.write_text(ARGS_SCRIPT)
  tokens = {"ghp_" + "Gh1" * 12: "ghp_", "github_pat_" + "Pat2" * 8: "github_pat_",
            "hf_" + "Hf3x" * 9: "hf_", "sk-proj-" + "Sk4y" * 8: "sk-",
            "xoxb-1234-5678-" + "Sl5z" * 5: "xoxb-", "AKIAZ7Q3EXAMPLEKEY99": "AKIA",
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.Jw6sig": "eyJ"}
  secrets = {f"s3cr3t{i}" for i in range(1, 9)} | set(tokens)
  args = ["-p", "s3cr3t1", "--pass", "s3cr3t2", "--pwd=s3cr3t3",
          "--header", "Authorization: Bearer s3cr3t4", "-H", "X-Api-Key: s3cr3t5",
          "--dsn", "admin:s3cr3t6@db.internal:5432", "--url", "https://h/?token=s3cr3t7&n=1",
          "-u", "joe:s3cr3t8", *tokens,
          # ordinary arguments beside them stay as they are
          "--port", "-p", "8", "--max-tokens", "128", str(marker)]
  out = tmp_path / "out"
  done = pallas_prof("run", "--out", str(out), str(script), *args, cache_dir=tmp_path / "cache",
                     timeout=300)
  assert done.returncode == 0, done.stdout + done.stderr
  assert json.loads(marker.read_text()) == args[:-1]           # the script got them as given
  assert {"report.json", "report.html", "trace.otlp.jsonl", "trace.perfetto.json"} <= \
      set(os.listdir(out))
  assert _leaks(out, done, secrets) == {}
  command = json.loads((out / "report.json").read_text())["command"]
  assert command[-len(args):-1] == [
      "-p", "***", "--pass", "***", "--pwd=***", "--header", "Authorization: Bearer ***",
      "-H", "X-Api-Key: ***", "--dsn", "admin:***@db.internal:5432",
      "--url", "https://h/?token=***&n=1", "-u", "joe:***",
      *(prefix + "***" for prefix in tokens.values()),
      "--port", "-p", "8", "--max-tokens", "128"]


FAILING_SCRIPT = """
import os
def connect():
  raise OSError("auth failed: password=s3cr3t1 for host db")
try:
  connect()
except OSError as e:
  raise ConnectionError("cannot reach postgresql://admin:s3cr3t2@db:5432/app with headers "
                        "{'Authorization': 'Bearer s3cr3t3'} and token "
                        + os.environ["SERVICE_TOKEN"]) from e
"""


@pytest.mark.fault("secret_forms")
def test_an_exception_s_secrets_are_recorded_nowhere(tmp_path):
  """Item 11: the script's exception (a connection string, a header, a token from the
  environment, in the exception and in its cause) is masked in report.json, report.html
  and the traceback on the terminal."""
  script, out = tmp_path / "script.py", tmp_path / "out"
  script.write_text(FAILING_SCRIPT)
  env = dict(os.environ, SERVICE_TOKEN="tok-s3cr3t4-from-the-environment")
  done = pallas_prof("run", "--out", str(out), str(script), cache_dir=tmp_path / "cache",
                     timeout=300, env=env)
  assert done.returncode == 1, done.stdout + done.stderr        # the script's own failure
  secrets = ["s3cr3t1", "s3cr3t2", "s3cr3t3", "s3cr3t4"]
  assert _leaks(out, done, secrets) == {}
  # what failed is still said, with the secrets masked
  assert "ConnectionError: cannot reach postgresql://admin:***@db:5432/app" in done.stderr
  assert "OSError: auth failed: password=*** for host db" in done.stderr
  notes = json.loads((out / "report.json").read_text())["notes"]
  assert any("the script raised ConnectionError" in n and "'Authorization': '***'" in n
             and n.endswith("token *** (at " + str(script) + ":8)") for n in notes), notes


KERNELS_SCRIPT = """
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def double(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0

def sort(x_ref, o_ref):
  o_ref[...] = jnp.sort(x_ref[...])   # not lowerable: a kernel's error report

x = jnp.arange(16.0)
print(pl.pallas_call(double, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))(x)[1])
pl.pallas_call(sort, out_shape=jax.ShapeDtypeStruct((16,), jnp.float32))(x)
"""


@pytest.mark.fault("secret_forms")
def test_a_path_holding_a_secret_is_masked_everywhere(tmp_path):
  """Item 12: a script in a folder whose name holds credentials and a token is masked
  wherever its path is recorded: report.json's `command`, `script`, the kernels'
  source_info and source locations, kernel.json, report.html, both traces, the kernel's
  error report and the terminal."""
  folder = tmp_path / "admin:s3cr3tA@db" / "run;token=s3cr3tB"
  folder.mkdir(parents=True)
  script, out = folder / "script.py", tmp_path / "out"
  script.write_text(KERNELS_SCRIPT)
  done = pallas_prof("run", "--out", str(out), str(script), cache_dir=tmp_path / "cache",
                     timeout=300)
  assert done.returncode == 1, done.stdout + done.stderr       # the sort kernel's error
  assert "cannot lower `sort`" in done.stderr
  report = json.loads((out / "report.json").read_text())
  (kernel,) = report["kernels"]
  assert {"report.json", "report.html", "trace.otlp.jsonl", "trace.perfetto.json",
          "kernels"} <= set(os.listdir(out))
  assert any(f.endswith("kernel.json") for _, _, fs in os.walk(out / "kernels") for f in fs)
  assert _leaks(out, done, ["s3cr3tA", "s3cr3tB"]) == {}
  masked = str(tmp_path / "admin:***@db" / "run;token=***")
  assert report["script"] == masked and report["command"][-1] == masked
  assert kernel["source_info"].startswith("double at " + masked), kernel["source_info"]
  assert report["errors"][0]["location"].startswith(masked)


EXIT_SCRIPTS = {
    # a value after `key:` (an annotation's form) that is no type: it was kept as code
    "exception api_key:": "raise ValueError('rejected: api_key: s3cr3t5 for user admin')\n",
    # sys.exit(text): the text was printed on the terminal as it came
    "sys.exit(text)": "import sys\nsys.exit('login as admin:s3cr3t5@db failed, password=s3cr3t5')\n",
}


@pytest.mark.fault("secret_forms")
@pytest.mark.parametrize("how", list(EXIT_SCRIPTS))
def test_a_failing_script_s_other_texts_are_recorded_nowhere(tmp_path, how):
  """Item 11's kind, in two more forms: `api_key: S` in an exception's text (read as Python's
  `key: Type`), and the text a script gives sys.exit (printed as Python prints it, unmasked).
  Masked on the terminal and in every file; what failed is still said."""
  script, out = tmp_path / "script.py", tmp_path / "out"
  script.write_text(EXIT_SCRIPTS[how])
  done = pallas_prof("run", "--out", str(out), str(script), cache_dir=tmp_path / "cache",
                     timeout=300)
  assert done.returncode == 1, done.stdout + done.stderr
  assert _leaks(out, done, ["s3cr3t5"]) == {}
  said = "rejected: api_key: ***" if how.startswith("exception") else \
      "login as admin:***@db failed, password=***"
  assert said in done.stderr, done.stderr
