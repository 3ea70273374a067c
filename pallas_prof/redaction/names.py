"""Which names look like they hold a secret: an option (`--api-token`), a variable
(`DB_PASSWORD`), a header (`X-Api-Key`), a query parameter (`access_token`).

A name is cut into words at `-`, `_`, `.` and where a lower-case letter meets a capital
(`apiKey` -> api, key). A word is a secret's when it is one of SECRET_WORDS, its plural
(`tokens`, `keys`), or one of them glued to a prefix (`apikey`, `authtoken`, `pgpassword`,
`oauth`). A word right after a count word (`max_tokens`, `num-keys`, `n_tokens`) counts
something and is not a secret's: `--max-tokens 128` keeps its value.

    secret_name(name)        any word of it is a secret's: an option or a variable, whose
                             value is all it holds (`--credentials-file`, `HF_TOKEN_PATH`)
    secret_name_last(name)   its last word is: a name inside free text (`password=`,
                             `Authorization:`), where `KeyError:` or `token_count=` is no
                             secret's
"""
from __future__ import annotations

import functools
import re

SECRET_WORDS = frozenset({
    "token", "key", "secret", "password", "passwd", "pass", "pwd", "passphrase",
    "credential", "credentials", "creds", "auth", "authorization", "cookie", "signature",
    "apikey", "jwt"})
# words that, glued after a prefix, still name a secret (apikey, authtoken, pgpassword, oauth)
SUFFIX_WORDS = ("token", "key", "secret", "password", "passwd", "auth")
COUNT_WORDS = frozenset({"max", "min", "num", "n", "number", "total", "count"})

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATOR = re.compile(r"[^A-Za-z0-9]+")


def words(name: str) -> list[str]:
  """`name`'s words, lower case: "X-Api-Key" -> [x, api, key], "apiKey" -> [api, key]."""
  return [w.lower() for part in _SEPARATOR.split(name) for w in _CAMEL.split(part) if w]


def _secret_word(word: str) -> bool:
  if word in SECRET_WORDS or (word.endswith("s") and word[:-1] in SECRET_WORDS):
    return True
  singular = word[:-1] if word.endswith("s") else word
  return any(singular.endswith(s) and len(singular) > len(s) for s in SUFFIX_WORDS)


def _secret_words(name: str) -> list[bool]:
  ws = words(name)
  return [_secret_word(w) and not (i > 0 and ws[i - 1] in COUNT_WORDS)
          for i, w in enumerate(ws)]


@functools.lru_cache(maxsize=4096)
def secret_name(name: str) -> bool:
  """Whether any word of `name` is a secret's (see the module's docstring)."""
  return any(_secret_words(name))


@functools.lru_cache(maxsize=4096)
def secret_name_last(name: str) -> bool:
  """Whether the last word of `name` is a secret's."""
  flags = _secret_words(name)
  return bool(flags) and flags[-1]
