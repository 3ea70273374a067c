"""Every tuning format pallas-prof writes (the user's tuning file, the params and blocks
caches, `pallas-prof tune`'s results) is a serial.Saved record written as serial.to_json
writes it: a module of tune/ or advice/ that hands json.dumps of a dict of its own to a
writer is a second writer of that format, which can write what the reader refuses.

Read from the source with `ast` (nothing is imported), as tests/test_structure.py does.
"""
from __future__ import annotations

import ast

from tests.test_structure import MODULES

WRITING_ROOMS = ("pallas_prof.tune", "pallas_prof.advice")
_WRITERS = {"write_atomic", "write", "store"}     # safe_files', cache_files', choice.store


def _is_json_dump(node) -> bool:
  return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
      node.func.attr in ("dump", "dumps") and isinstance(node.func.value, ast.Name) and \
      node.func.value.id == "json"


def hand_written_json(source: str) -> list[int]:
  """Lines that write JSON made by hand: json.dump(x, file), or a writer given json.dumps."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if _is_json_dump(node) and node.func.attr == "dump":
      found.append(node.lineno)
    elif isinstance(node, ast.Call):
      name = node.func.attr if isinstance(node.func, ast.Attribute) else \
          node.func.id if isinstance(node.func, ast.Name) else None
      if name in _WRITERS and any(_is_json_dump(sub) for arg in node.args
                                  for sub in ast.walk(arg)):
        found.append(node.lineno)
  return sorted(found)


def test_tuning_formats_are_written_through_serial_alone():
  found = [f"{m}:{line}" for m, p in MODULES.items() if m.startswith(WRITING_ROOMS)
           for line in hand_written_json(p.read_text())]
  assert not found, ("tuning files written as JSON made by hand (make the format a "
                     "serial.Saved record and write serial.to_json(record)):\n" + "\n".join(found))


def test_the_tuning_write_check_finds_planted_writes():
  planted = ("import json, hashlib\n"
             "def a(path, data):\n  safe_files.write_atomic(path, json.dumps(data))\n"
             "def b(path, data):\n  with open(path, 'w') as f:\n    json.dump(data, f)\n"
             "def c(path, data):\n  return store(path, {'x': json.dumps(data)})\n"
             "def fine(identity):\n"
             "  return hashlib.sha256(json.dumps(identity, sort_keys=True).encode())\n")
  assert hand_written_json(planted) == [3, 6, 8]
