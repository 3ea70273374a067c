"""Secrets kept out of what a run records: the command line and the script's arguments,
as report.json, report.html, both trace files, the span sent to a collector and the
terminal show them.

    redact_argv(argv)   the arguments with each secret's value masked (MASK):
                          --api-token=X, --api-token X, -password X   the value after a
                                                                      name like a secret
                          API_KEY=X                                    an assignment to one
                          http://user:X@host, http://X@host            a URL's credentials
                          http://host/?access_token=X                  a query value named so
    redact_text(text)   the same for one piece of text (an argument, an endpoint)

A name looks like a secret when it holds one of SECRET_WORDS, in any case (api-token,
DB_PASSWORD, x-auth, apikey). What is masked is only what is recorded: the script gets
its arguments as given, and the collector its endpoint. `pallas-prof run --no-redact`
records them unmasked.
"""
from __future__ import annotations

import re

MASK = "***"
SECRET_WORDS = ("token", "key", "secret", "password", "passwd", "credential", "auth")
_WORD = "|".join(SECRET_WORDS)
_NAME = rf"[A-Za-z0-9_.-]*(?:{_WORD})[A-Za-z0-9_.-]*"

# an option naming a secret, alone (its value is the next argument) or with `=value`
_OPTION = re.compile(rf"^(-{{1,2}}{_NAME})(=.*)?$", re.IGNORECASE)
# an assignment like API_KEY=value (an environment variable passed as an argument)
_ASSIGNMENT = re.compile(rf"^({_NAME})=(.+)$", re.IGNORECASE | re.DOTALL)
# a URL's userinfo: scheme://user:password@ or scheme://token@
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<info>[^/?#@\s]+)@")
# a query parameter named like a secret
_QUERY = re.compile(rf"(?P<lead>[?&;]{_NAME}=)[^&#\s]*", re.IGNORECASE)


def _userinfo(match: re.Match) -> str:
  user, colon, _ = match.group("info").partition(":")
  masked = f"{user}:{MASK}" if colon else MASK     # a lone userinfo is often a token
  return f"{match.group('scheme')}{masked}@"


def redact_text(text: str) -> str:
  """`text` with the credentials of any URL in it, and query values named like a
  secret, masked."""
  text = _USERINFO.sub(_userinfo, text)
  return _QUERY.sub(lambda m: m.group("lead") + MASK, text)


def redact_argv(argv) -> list[str]:
  """The arguments with the value of every one named like a secret masked (see the
  module's docstring)."""
  out: list[str] = []
  takes_value = False
  for arg in map(str, argv):
    if takes_value and not arg.startswith("--"):
      out.append(MASK)
      takes_value = False
      continue
    takes_value = False
    option = _OPTION.match(arg)
    if option and option.group(2) is not None:
      out.append(f"{option.group(1)}={MASK}")
    elif option:
      out.append(arg)
      takes_value = True
    elif (assignment := _ASSIGNMENT.match(arg)) and not arg.startswith("-"):
      out.append(f"{assignment.group(1)}={MASK}")
    else:
      out.append(redact_text(arg))
  return out
