"""Secrets kept out of what a run records: the command line, the script's path, its
exceptions and tracebacks, the kernels' source locations, wherever report.json,
report.html, kernel.json, both trace files, the span sent to a collector and the terminal
show them.

    redact_argv(argv)   the arguments with each secret's value masked (argv.py)
    redact_text(text)   the same for one piece of text (text.py: URLs, headers,
                        NAME=value, bare tokens, secret-named environment variables)
    Redactor()          both, with the environment read once; redactor.tree(obj) masks
                        every string in a report's dataclasses, tuples, lists and dicts

What is masked is only what is recorded: the script gets its arguments as given, and the
collector its endpoint. `pallas-prof run --no-redact` records them unmasked. Imports
nothing of pallas-prof: the CLI, the tracer and the error reports all use it.
"""
from __future__ import annotations

import dataclasses

from .argv import redact_argv
from .names import SECRET_WORDS, secret_name
from .text import MASK, TextRedactor, redact_text


class Redactor:
  """One redaction for a whole record: the environment's secrets read once."""

  def __init__(self, environ=None):
    self.text = TextRedactor(environ)

  def argv(self, argv) -> list[str]:
    return redact_argv(argv, self.text)

  def __call__(self, obj):
    return self.tree(obj)

  def tree(self, obj):
    """`obj` with every string in it masked: a str, or dataclasses, tuples (named ones
    too), lists and dicts (keys too) of them, to any depth. What holds no secret comes
    back as the same object."""
    if isinstance(obj, str):
      return self.text(obj)
    if isinstance(obj, (list, tuple)):
      items = [self.tree(x) for x in obj]
      if all(a is b for a, b in zip(items, obj, strict=True)):
        return obj
      if isinstance(obj, list):
        return items
      return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
      pairs = [(k, v, self.tree(k), self.tree(v)) for k, v in obj.items()]
      if all(k is new_k and v is new_v for k, v, new_k, new_v in pairs):
        return obj
      items = {new_k: new_v for _, _, new_k, new_v in pairs}
      return items if type(obj) is dict else type(obj)(items)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
      changed = {}
      for f in dataclasses.fields(obj):
        if f.init:
          value = getattr(obj, f.name)
          new = self.tree(value)
          if new is not value:
            changed[f.name] = new
      return dataclasses.replace(obj, **changed) if changed else obj
    return obj


def redact(obj):
  """Redactor().tree(obj): one record masked with the environment as it is now."""
  return Redactor().tree(obj)


__all__ = ["MASK", "SECRET_WORDS", "Redactor", "TextRedactor", "redact", "redact_argv",
           "redact_text", "secret_name"]
