"""The forms a secret takes on a command line and in a text, each masked, and the
ordinary arguments and texts around them left as they are (pallas_prof/redaction)."""
from __future__ import annotations

import pytest

from pallas_prof.redaction import MASK, Redactor, redact_argv, redact_text
from pallas_prof.redaction.names import secret_name, secret_name_last

S = "s3cr3t"
GHP = "ghp_" + "a1B2" * 9
TOKENS = {
    GHP: "ghp_",
    "github_pat_11ABCDEFG0" + "x1" * 20: "github_pat_",
    "hf_" + "aBc4" * 9: "hf_",
    "sk-proj-" + "Ab3-" * 8: "sk-",
    "sk-ant-api03-" + "z9" * 20: "sk-",
    "xoxb-1234567890-0987654321-" + "q" * 24: "xoxb-",
    "xoxp-1234567890-abcdefghij": "xoxp-",
    "AKIAIOSFODNN7EXAMPLE": "AKIA",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U":
        "eyJ",
    "glpat-" + "a" * 20: "glpat-",
}


@pytest.mark.parametrize("argv, recorded", [
    (["--api-token=" + S], [f"--api-token={MASK}"]),
    (["--api-token", S, "--n", "4"], ["--api-token", MASK, "--n", "4"]),
    (["--password", S], ["--password", MASK]),
    (["-passwd", "-" + S], ["-passwd", MASK]),                # a value may start with -
    (["--DB_PASSWORD", S], ["--DB_PASSWORD", MASK]),
    (["--apikey=" + S], [f"--apikey={MASK}"]),
    (["--apiKey", S], ["--apiKey", MASK]),
    (["--client-secret", S], ["--client-secret", MASK]),
    (["--credentials-file", "c.json"], ["--credentials-file", MASK]),
    (["--x-auth=" + S], [f"--x-auth={MASK}"]),
    (["API_KEY=" + S, "HF_TOKEN=" + S], [f"API_KEY={MASK}", f"HF_TOKEN={MASK}"]),
    # issue 48, item 10: the forms the redactor missed
    (["-p", S], ["-p", MASK]),
    (["-p" + S], ["-p" + MASK]),                              # mysql's attached form
    (["-pHunter2!"], ["-p" + MASK]),
    (["--pass", S, "--pwd", S, "--pwd=" + S], ["--pass", MASK, "--pwd", MASK, f"--pwd={MASK}"]),
    (["--passphrase", S], ["--passphrase", MASK]),
    (["--header", "Authorization: Bearer " + S], ["--header", f"Authorization: Bearer {MASK}"]),
    (["-H", "X-Api-Key: " + S], ["-H", f"X-Api-Key: {MASK}"]),
    (["--header=Authorization: token " + S], [f"--header=Authorization: token {MASK}"]),
    (["-H", "Cookie: session=" + S + "; theme=dark"], ["-H", f"Cookie: {MASK}"]),
    (["user:" + S + "@db.example.com"], [f"user:{MASK}@db.example.com"]),
    (["--dsn", "admin:" + S + "@10.0.0.1:5432/app"], ["--dsn", f"admin:{MASK}@10.0.0.1:5432/app"]),
    (["-u", "joe:" + S], ["-u", f"joe:{MASK}"]),
    (["--user=joe:" + S], [f"--user=joe:{MASK}"]),
    (["--env", "GITHUB_TOKEN=" + S], ["--env", f"GITHUB_TOKEN={MASK}"]),
    (["https://h/p?token=" + S + "&api_key=" + S + "&n=1"],
     [f"https://h/p?token={MASK}&api_key={MASK}&n=1"]),
    (["--url=https://acct.blob.core.windows.net/c?sv=2020&sig=" + S],
     [f"--url=https://acct.blob.core.windows.net/c?sv=2020&sig={MASK}"]),
    # an option naming a secret right before another option: that option is no value
    (["--token", "--n", "4"], ["--token", "--n", "4"]),
    (["--otlp-endpoint", "http://user:" + S + "@127.0.0.1:4318"],
     ["--otlp-endpoint", f"http://user:{MASK}@127.0.0.1:4318"]),
    (["--otlp-endpoint=https://" + S + "@host/v1"], [f"--otlp-endpoint=https://{MASK}@host/v1"]),
])
def test_secret_values_are_masked(argv, recorded):
  assert redact_argv(argv) == recorded
  assert not any(S in a for a in redact_argv(argv))


@pytest.mark.parametrize("token, prefix", TOKENS.items())
def test_bare_tokens_are_masked_wherever_they_are(token, prefix):
  assert redact_argv([token]) == [prefix + MASK]
  assert redact_argv(["--model", "m", token[:-1] + "Z"])[-1] == prefix + MASK
  assert redact_text(f"401 for {token}: bad credentials") == \
      f"401 for {prefix}{MASK}: bad credentials"


@pytest.mark.parametrize("argv", [
    # short options that mean no password: a port, a count, a uid:gid pair
    ["-p", "8"], ["-p", "8080"], ["-p8080"], ["-p", "8080:80"], ["-u", "1000:1000"],
    # one-dash options and bundled flags that start with p
    ["-path", "/data", "-pretrained", "-pv"], ["-p", "-h", "db"],
    ["-u", "root"], ["-n", "4", "-k", "v", "-t", "10"],
    # names that hold a secret's word but count or name something else
    ["--max-tokens", "128", "--num-keys", "4", "--n-tokens", "7", "--tokenizer", "gpt2",
     "--author", "me", "--keyboard", "us", "--num-passes", "3", "--bypass-cache", "x"],
    ["--n", "4", "--out", "o", "--kernel", "k", "size=3", "--seed", "1", "max_tokens=64"],
    # at signs and colons that are no credentials
    ["git@github.com:org/repo.git", "user@example.com", "python:3.12@sha256:0123abcd",
     "http://host/a@b", "localhost:8080", "12:30", "a:b", "--target", "sm_80"],
    # prefixes of tokens, too short or glued to a word
    ["sk-learn", "hf_hub", "task-abcdefghijklmnopqrstuvwxyz", "eyJ", "ghp_short",
     "ASKAIOSFODNN7EXAMPLE"],
])
def test_ordinary_arguments_stay_as_they_are(argv):
  assert redact_argv(argv) == argv


@pytest.mark.parametrize("text, recorded", [
    ("http://user:s3cr3t@host:4318/v1/traces", f"http://user:{MASK}@host:4318/v1/traces"),
    ("grpc://s3cr3t@host", f"grpc://{MASK}@host"),
    ("https://user:p@ss" + S + "@host/x", f"https://user:{MASK}@host/x"),
    ("https://h/p?access_token=s3cr3t&n=1", f"https://h/p?access_token={MASK}&n=1"),
    ("https://h/p?n=1&API_KEY=s3cr3t#f", f"https://h/p?n=1&API_KEY={MASK}#f"),
    ("see user@example.com at http://host/a@b", "see user@example.com at http://host/a@b"),
    # what an exception says
    ("could not connect to postgresql://admin:s3cr3t@db:5432/app",
     f"could not connect to postgresql://admin:{MASK}@db:5432/app"),
    ("host=db user=admin password=s3cr3t dbname=app",
     f"host=db user=admin password={MASK} dbname=app"),
    ("jdbc:sqlserver://h;user=sa;password=s3cr3t;database=x",
     f"jdbc:sqlserver://h;user=sa;password={MASK};database=x"),
    ("headers {'Authorization': 'Bearer s3cr3t', 'Accept': 'json'}",
     f"headers {{'Authorization': '{MASK}', 'Accept': 'json'}}"),
    ('{"api_key": "s3cr3t", "n": 3}', f'{{"api_key": "{MASK}", "n": 3}}'),
    ("401: Authorization: Bearer s3cr3t rejected", f"401: Authorization: Bearer {MASK} rejected"),
    ("sent Bearer s3cr3tvalue to the server", f"sent Bearer {MASK} to the server"),
    ("ran ['curl', '--token', 's3cr3t', '-v']", f"ran ['curl', '--token', '{MASK}', '-v']"),
    ("ssh: admin:s3cr3t@10.1.2.3 refused", f"ssh: admin:{MASK}@10.1.2.3 refused"),
    ("key\n-----BEGIN RSA PRIVATE KEY-----\nMIIs3cr3t\n-----END RSA PRIVATE KEY-----",
     f"key\n-----BEGIN RSA PRIVATE KEY----- {MASK} -----END RSA PRIVATE KEY-----"),
    # a path holding a secret
    ("/tmp/db;token=s3cr3t/script.py:9", f"/tmp/db;token={MASK}"),
    ("/runs/API_KEY=s3cr3t/script.py", f"/runs/API_KEY={MASK}"),
    # what holds no secret
    ("KeyError: 'missing_column'", "KeyError: 'missing_column'"),
    ("expected token_count: 5, max_tokens=64", "expected token_count: 5, max_tokens=64"),
    ('File "/home/u/run.py", line 3, in <module>', 'File "/home/u/run.py", line 3, in <module>'),
    ("x = jnp.dot(a, b) at kernel.py:12", "x = jnp.dot(a, b) at kernel.py:12"),
    # the user's source a report quotes
    ("  > 6 | key = jax.random.key(0)", "  > 6 | key = jax.random.key(0)"),
    ("def kernel(key: jax.Array, x_ref, o_ref):", "def kernel(key: jax.Array, x_ref, o_ref):"),
    ("sort[dimension=0 is_stable=True num_keys=1]", "sort[dimension=0 is_stable=True num_keys=1]"),
    # prose whose word before a colon names a secret: a docstring an advice diff quotes
    ("the second pass: the partials the grid wrote", "the second pass: the partials the grid wrote"),
    ("# token: a string of digits; key: each row's", "# token: a string of digits; key: each row's"),
    ("pass: s3cr3t", f"pass: {MASK}"),          # a word that is no prose still is one
    # ... unless it holds a string given to a secret's name
    ("API_KEY = 's3cr3t'", f"API_KEY = '{MASK}'"),
    ("password: s3cr3t", f"password: {MASK}"),
    ("rejected: api_key: s3cr3t for admin", f"rejected: api_key: {MASK} for admin"),
    ("def f(key: PRNGKey, keys: list[int], api_key: str):",
     "def f(key: PRNGKey, keys: list[int], api_key: str):"),
])
def test_secrets_in_texts_are_masked(text, recorded):
  assert redact_text(text) == recorded
  assert redact_text(recorded) == recorded           # masking again changes nothing


def test_secret_valued_environment_variables_are_masked_anywhere():
  environ = {"MY_SERVICE_TOKEN": "tok-" + S + "-42", "AWS_SECRET_ACCESS_KEY": "wJalr/" + S,
             "HF_TOKEN_PATH": "/home/u/.hf/token-file", "USE_AUTH": "true", "AUTH_PORT": "8080",
             "HOME": "/home/u", "EDITOR": "vim-" + S + "-no", "PWD": "/home/u/work",
             "OLDPWD": "/home/u/old-work"}
  r = Redactor(environ)
  text = f"failed: header x-thing tok-{S}-42; key wJalr/{S}; in /home/u/work; vim-{S}-no"
  assert r.text(text) == f"failed: header x-thing {MASK}; key {MASK}; in /home/u/work; vim-{S}-no"
  # common values of secret-named variables are not masked wherever they appear
  assert r.text("true 8080") == "true 8080"


def test_a_report_is_masked_in_every_string_it_holds():
  import dataclasses

  @dataclasses.dataclass(frozen=True)
  class Entry:
    path: str
    lines: tuple
    n: int = 3

  entry = Entry(f"/a/token={S}/x.py", ("ok", f"password={S}"))
  tree = {"entries": [entry], f"/b;token={S}": 1, "plain": Entry("x.py", ("ok",))}
  out = Redactor({}).tree(tree)
  assert S not in repr(out)
  assert out["entries"][0] == Entry(f"/a/token={MASK}", ("ok", f"password={MASK}"))
  assert out["plain"] is tree["plain"]          # what holds no secret is the same object


@pytest.mark.parametrize("name, any_word, last_word", [
    ("api-token", True, True), ("DB_PASSWORD", True, True), ("apiKey", True, True),
    ("X-Api-Key", True, True), ("Authorization", True, True), ("PGPASSWORD", True, True),
    ("oauth", True, True), ("credentials-file", True, False), ("KeyError", True, False),
    ("max_tokens", False, False), ("num-keys", False, False), ("tokenizer", False, False),
    ("author", False, False), ("keyboard", False, False), ("seed", False, False),
])
def test_names_that_look_like_a_secret(name, any_word, last_word):
  assert secret_name(name) is any_word
  assert secret_name_last(name) is last_word
