"""The lowering rules, by family, in one table.

A rule is a small function `rule(ctx, *operands, **eqn.params) -> Value(s)`.
It emits Triton source through `ctx` and returns typed Values. It raises
`Unsupported(reason, hint)` for what it cannot do; the dispatcher adds the
equation and the user's line.
"""
from .table import (ALIASES, RULES, TRANSCENDENTAL, all_rules, primitives_doing,  # noqa: F401
                    register, register_deferred, rule_for, rule_limits,
                    supported_primitive_names)
from . import (control_flow, dot, elementwise, memory, misc, reductions,  # noqa: E402,F401
               shape)
