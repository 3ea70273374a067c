"""The diagnosis rules, in the order they run (table.py: RULES)."""
from . import launch, memory, compute, dots  # noqa: F401  (registers the rules)
from .table import RULES, Finding, rule

__all__ = ["RULES", "Finding", "rule"]
