"""Secrets among a command line's arguments, which text.py cannot see alone: a value is
the argument after its option.

    --api-token=X, --api-token X, -password X   the value of an option named like a
    --pass X, --pwd X                            secret (names.py: any word of it)
    API_KEY=X                                    an assignment to such a name
    -p X, -pX                                    the short option that means a password
                                                 (mysql, sshpass, ...), unless its value
                                                 is a number: `-p 8`, `-p 8080:80` are a
                                                 port or a count and stay; `-pX` also
                                                 stays where X is lower-case letters
                                                 alone: a one-dash option (`-path`,
                                                 `-pretrained`) or bundled flags (`-pv`)
    -u user:X, --user user:X                     curl's credentials (the user stays; a
                                                 number pair such as `-u 1000:1000` stays)
    anything else                                text.py's rules (a URL, a header such as
                                                 `-H "Authorization: Bearer X"`, a bare
                                                 token, user:X@host)
"""
from __future__ import annotations

import re

from .names import secret_name
from .text import MASK, TextRedactor

# an option named like a secret, alone (its value is the next argument) or with `=value`
_OPTION = re.compile(r"^(-{1,2}[A-Za-z0-9_.-]+)(=.*)?$", re.DOTALL)
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=(.+)$", re.DOTALL)
PASSWORD_SHORT = ("-p",)
USER_OPTIONS = ("-u", "--user", "-U", "--proxy-user")
# a port, a count, a uid:gid pair, a version: no password
_NUMBER_LIKE = re.compile(r"^[0-9][0-9.:,\-]*$")
_OPTION_LIKE = re.compile(r"^[a-z][a-z\-]*$")


def _masked_user(value: str) -> str:
  user, colon, _ = value.partition(":")
  return value if not colon or _NUMBER_LIKE.match(value) else f"{user}:{MASK}"


def _value(kind: str, arg: str) -> str:
  if kind == "user":
    return _masked_user(arg)
  if kind == "short" and _NUMBER_LIKE.match(arg):
    return arg
  return MASK


def redact_argv(argv, text: TextRedactor | None = None) -> list[str]:
  """The arguments with each secret's value masked (see the module's docstring)."""
  text = text or TextRedactor()
  out: list[str] = []
  pending = None       # what the previous argument said this one is: "option", "short", "user"
  for arg in map(str, argv):
    # a value may start with one dash (a password), but not after `-p` alone (mysql's
    # prompt: `-p -h db`), and never with two (the next option)
    if pending is not None and not arg.startswith("--") and \
        not (pending == "short" and arg.startswith("-")):
      out.append(_value(pending, arg))
      pending = None
      continue
    pending = None
    option = _OPTION.match(arg)
    name = option.group(1) if option else ""
    if name in USER_OPTIONS:
      if option.group(2) is None:
        out.append(arg)
        pending = "user"
      else:
        out.append(f"{name}={_masked_user(option.group(2)[1:])}")
    elif option and secret_name(name.lstrip("-")):
      if option.group(2) is None:
        out.append(arg)
        pending = "option"
      else:
        out.append(f"{name}={MASK}")
    elif arg in PASSWORD_SHORT:
      out.append(arg)
      pending = "short"
    elif arg[:2] in PASSWORD_SHORT and not arg.startswith("--"):
      value = arg[3:] if arg[2:3] == "=" else arg[2:]
      kept = _NUMBER_LIKE.match(value) or (_OPTION_LIKE.match(value) and arg[2:3] != "=")
      out.append(arg if kept else arg[:len(arg) - len(value)] + MASK)
    elif arg[:2] == "-u" and len(arg) > 2 and not arg.startswith("--"):
      out.append("-u" + _masked_user(arg[2:]))
    elif (assignment := _ASSIGNMENT.match(arg)) and secret_name(assignment.group(1)):
      out.append(f"{assignment.group(1)}={MASK}")
    else:
      out.append(text(arg))
  return out
