"""Secrets in free text: an exception's message, a traceback, a path, a URL, one argument.

Each rule masks the secret's value (MASK) and keeps what says what it was:

    http://user:X@host, grpc://X@host       a URL's credentials (the user stays)
    user:X@host                              credentials without a scheme
    password=X, "api_key": "X", token: X     a value named like a secret (names.py:
    ?access_token=X&sig=X, /a;token=X/b      its last word), after = or :, quoted or not
    Authorization: Bearer X, X-Api-Key: X    a header (its scheme word stays)
    Cookie: X                                a cookie header, to the end of its line
    --password X                             an option named like a secret, in a text
    Bearer X                                 a bearer token alone
    ghp_X, github_pat_X, hf_X, sk-X, xoxb-X, a token whose form says what it is (its
    AKIA..., eyJ..., glpat-X, AIza..., ...   prefix stays)
    -----BEGIN ... PRIVATE KEY----- ...      a private key block
    the value of a secret-named variable     an environment variable whose name looks
                                             like a secret's (GITHUB_TOKEN, DB_PASSWORD),
                                             wherever its value appears

Masking is idempotent: redacting a redacted text changes nothing.
"""
from __future__ import annotations

import os
import re

from .names import SECRET_WORDS, SUFFIX_WORDS, secret_name, secret_name_last, words

MASK = "***"
# an environment variable's value shorter than this, or one of these words, is too common
# to mask wherever it appears (AUTH_MODE=normal would mask every "normal")
MIN_ENV_SECRET = 8
# the shell's working folders: their word "pwd" is no password
NOT_SECRET_VARIABLES = frozenset({"PWD", "OLDPWD"})
_NOT_SECRET_VALUE = re.compile(r"(?i)^(true|false|yes|no|on|off|none|null|enabled|disabled|"
                               r"\d+)$")

_PRIVATE_KEY = re.compile(r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----).*?(-----END [A-Z0-9 ]*"
                          r"PRIVATE KEY-----)", re.DOTALL)
# scheme://userinfo@ : greedy up to the authority's last @ (a password may hold an @)
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/?#\s'\"<>]+)@")
# user:password@host without a scheme (not an image's name:tag@sha256:digest)
_BARE_USERINFO = re.compile(r"(?<![A-Za-z0-9._%+~-])(?P<user>[A-Za-z0-9._%+~-]+):"
                            r"(?P<pw>[^\s@/'\"<>]+)@(?!sha\d+:)(?=[A-Za-z0-9\[])")
_SCHEMES = r"(?:Bearer|Basic|Token|Digest|Bot|Negotiate|token|bearer|basic)\s+"
# NAME=value or NAME: value where NAME ends in a secret's word; the name's words decide
# (secret_name_last, in _named): a name that is no secret's must not swallow a text that
# holds one (https://h/?token=X), so only such names are matched at all
_LAST_WORDS = "|".join(sorted(SECRET_WORDS | set(SUFFIX_WORDS), key=len, reverse=True))
_NAMED = re.compile(
    rf"(?i)(?<![A-Za-z0-9_.\-])(?P<name>[A-Za-z0-9_.\-]*(?:{_LAST_WORDS})s?)(?![A-Za-z0-9])"
    r"(?P<sep>['\"]?[ \t]*[:=][ \t]*)"
    r"(?:(?P<quote>['\"])(?P<quoted>[^'\"\n]*)(?P=quote)"
    rf"|(?P<scheme>{_SCHEMES})?(?P<value>[^\s'\",;&#<>)\]}}]+))")
_COOKIE = re.compile(r"(?i)(?<![A-Za-z0-9-])((?:set-)?cookie['\"]?[ \t]*:[ \t]*['\"]?)"
                     r"[^\r\n'\"]+")
# --name value inside a text (a command line in a message, a list's repr)
_OPTION = re.compile(r"(?<![^\s\[(,'\"])(?P<option>-{1,2}[A-Za-z][A-Za-z0-9_.\-]*)"
                     r"(?P<sep>(?:['\"],)?[ \t]+['\"]?)(?P<value>[^\s'\",\-][^\s'\",]*)")
_BEARER = re.compile(r"(?<![A-Za-z0-9])(Bearer[ \t]+)[A-Za-z0-9._~+/=\-]{8,}")
_QUERY_SIG = re.compile(r"(?i)([?&;]sig=)[^&#\s'\"]+")
# tokens whose form says what they are: (prefix, the rest)
_TOKENS = [re.compile(rf"(?<![A-Za-z0-9_\-])({prefix}){rest}") for prefix, rest in (
    (r"gh[pousr]_", r"[A-Za-z0-9]{20,}"),
    (r"github_pat_", r"[A-Za-z0-9_]{20,}"),
    (r"hf_", r"[A-Za-z0-9]{30,}"),
    (r"sk-", r"[A-Za-z0-9_\-]{20,}"),
    (r"[rs]k_live_", r"[A-Za-z0-9]{20,}"),
    (r"xox[abposr]-", r"[A-Za-z0-9\-]{10,}"),
    (r"glpat-", r"[A-Za-z0-9_\-]{20,}"),
    (r"npm_", r"[A-Za-z0-9]{36}"),
    (r"pypi-", r"[A-Za-z0-9_\-]{50,}"),
    (r"AIza", r"[A-Za-z0-9_\-]{35}"),
    (r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)", r"[A-Z0-9]{16}(?![A-Za-z0-9])"),
    (r"eyJ", r"[A-Za-z0-9_\-]{10,}(?:\.[A-Za-z0-9_\-]*){0,2}"),     # a JWT
)]


# cheap tests that let most texts (a path, an equation) skip the rules that cannot apply
_ANY_WORD = re.compile(r"(?i)token|key|secret|pass|pwd|cred|auth|cookie|signature|jwt")
_ANY_TOKEN = re.compile(r"gh[pousr]_|github_pat_|hf_|sk-|[rs]k_live_|xox|glpat-|npm_|pypi-|"
                        r"AIza|A[KS]IA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA|eyJ")


def _userinfo(match: re.Match) -> str:
  user, colon, _ = match.group("info").partition(":")
  masked = f"{user}:{MASK}" if colon else MASK     # a lone userinfo is often a token
  return f"{match.group('scheme')}{masked}@"


# what follows `key:` in Python source: a type (jax.Array, str, PRNGKey, list[int]), never
# a value with a digit in its name's first part, as a key's value mostly has
# ("api_key: s3cr3t" in an exception's text was kept as if it were an annotation)
_ANNOTATION = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)+[A-Za-z_][A-Za-z0-9_]*(?:\[.*)?"
                         r"|(?:str|int|float|bytes|bool|object|Any|None|list|dict|tuple)"
                         r"(?:\[.*)?|[A-Z][A-Za-z]*(?:\[.*)?")


def _is_code(match: re.Match) -> bool:
  """Whether a match reads as Python source a report quotes (`key = jax.random.key(0)`,
  `def f(key: jax.Array)`) rather than a value given: an assignment with spaces around
  its `=` and no string after it, or `key:` unquoted and no header's name."""
  sep, name = match.group("sep"), match.group("name")
  quoted = match.group("quote") is not None or sep[:1] in "'\""
  if quoted:
    return False
  if "=" in sep:
    return sep.strip() != sep
  return "-" not in name and words(name)[-1] in ("key", "keys") and \
      _ANNOTATION.fullmatch(match.group("value") or "") is not None


# an unquoted value that is a word of English prose is text, not a secret ("the second
# pass: the partials", "token: a string"): no secret is one of these
_PROSE_WORDS = frozenset({
    "a", "an", "the", "is", "are", "was", "be", "to", "of", "and", "or", "for", "in", "on",
    "at", "by", "with", "it", "its", "this", "that", "these", "each", "all", "no", "not",
    "if", "as", "from", "then", "one", "which", "what", "see"})


def _named(match: re.Match) -> str:
  if not secret_name_last(match.group("name")) or _is_code(match):
    return match.group(0)
  if match.group("quote") is None and (match.group("value") or "").lower() in _PROSE_WORDS:
    return match.group(0)
  head = match.group("name") + match.group("sep")
  if match.group("quote") is not None:
    return f"{head}{match.group('quote')}{MASK}{match.group('quote')}"
  return f"{head}{match.group('scheme') or ''}{MASK}"


def _option(match: re.Match) -> str:
  if not secret_name(match.group("option").lstrip("-")):
    return match.group(0)
  return match.group("option") + match.group("sep") + MASK


def env_secrets(environ=None) -> list[str]:
  """The values of the environment's variables whose names look like a secret's, long
  enough to mask wherever they appear, longest first."""
  environ = os.environ if environ is None else environ
  values = {v for k, v in environ.items() if secret_name(k) and k not in NOT_SECRET_VARIABLES
            and len(v) >= MIN_ENV_SECRET
            and not _NOT_SECRET_VALUE.match(v) and MASK not in v}
  return sorted(values, key=len, reverse=True)


class TextRedactor:
  """redact_text's rules with the environment's secrets read once (env_secrets)."""

  def __init__(self, environ=None):
    values = env_secrets(environ)
    self._env = re.compile("|".join(map(re.escape, values))) if values else None

  def __call__(self, text: str) -> str:
    if self._env is not None:
      text = self._env.sub(MASK, text)
    if "@" in text:
      text = _USERINFO.sub(_userinfo, text)
      text = _BARE_USERINFO.sub(lambda m: f"{m.group('user')}:{MASK}@", text)
    if _ANY_WORD.search(text):
      text = _PRIVATE_KEY.sub(rf"\1 {MASK} \2", text)
      text = _COOKIE.sub(lambda m: m.group(1) + MASK, text)
      text = _NAMED.sub(_named, text)
      text = _OPTION.sub(_option, text)
    if "Bearer" in text:
      text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    if "sig=" in text.lower():
      text = _QUERY_SIG.sub(lambda m: m.group(1) + MASK, text)
    if _ANY_TOKEN.search(text):
      for token in _TOKENS:
        text = token.sub(lambda m: m.group(1) + MASK, text)
    return text


def redact_text(text: str) -> str:
  """`text` with every secret the module's docstring lists masked."""
  return TextRedactor()(text)
