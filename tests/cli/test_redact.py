"""What a run records of its command line: secrets masked (cli/redact.py)."""
from __future__ import annotations

import pytest

from pallas_prof.cli.redact import MASK, redact_argv, redact_text


@pytest.mark.parametrize("argv, recorded", [
    (["--api-token=s3cr3t"], [f"--api-token={MASK}"]),
    (["--api-token", "s3cr3t", "--n", "4"], ["--api-token", MASK, "--n", "4"]),
    (["--password", "s3cr3t"], ["--password", MASK]),
    (["-passwd", "-s3cr3t"], ["-passwd", MASK]),                # a value may start with -
    (["--DB_PASSWORD", "s3cr3t"], ["--DB_PASSWORD", MASK]),
    (["--apikey=s3cr3t"], [f"--apikey={MASK}"]),
    (["--client-secret", "s3cr3t"], ["--client-secret", MASK]),
    (["--credentials-file", "c.json"], ["--credentials-file", MASK]),
    (["--x-auth=s3cr3t"], [f"--x-auth={MASK}"]),
    (["API_KEY=s3cr3t", "HF_TOKEN=s3cr3t"], [f"API_KEY={MASK}", f"HF_TOKEN={MASK}"]),
    # an option naming a secret right before another option: that option is no value
    (["--token", "--n", "4"], ["--token", "--n", "4"]),
    # what names no secret stays as it is
    (["--n", "4", "--out", "o", "--kernel", "k", "size=3", "--seed", "1"],
     ["--n", "4", "--out", "o", "--kernel", "k", "size=3", "--seed", "1"]),
    (["--otlp-endpoint", "http://user:s3cr3t@127.0.0.1:4318"],
     ["--otlp-endpoint", f"http://user:{MASK}@127.0.0.1:4318"]),
    (["--otlp-endpoint=https://s3cr3t@host/v1"], [f"--otlp-endpoint=https://{MASK}@host/v1"]),
])
def test_secret_values_are_masked(argv, recorded):
  assert redact_argv(argv) == recorded
  assert not any("s3cr3t" in a for a in redact_argv(argv))


@pytest.mark.parametrize("text, recorded", [
    ("http://user:s3cr3t@host:4318/v1/traces", f"http://user:{MASK}@host:4318/v1/traces"),
    ("grpc://s3cr3t@host", f"grpc://{MASK}@host"),
    ("https://h/p?access_token=s3cr3t&n=1", f"https://h/p?access_token={MASK}&n=1"),
    ("https://h/p?n=1&API_KEY=s3cr3t#f", f"https://h/p?n=1&API_KEY={MASK}#f"),
    ("see user@example.com at http://host/a@b", "see user@example.com at http://host/a@b"),
])
def test_credentials_in_urls_are_masked(text, recorded):
  assert redact_text(text) == recorded
