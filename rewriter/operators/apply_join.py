"""ApplyJoin: a join evaluated at the proxy (Vitess's ``operators.ApplyJoin``).

For each left row the right side runs with the left columns it needs as bind
variables (nested loop, batched into IN lists, or a hash join: ``join_planner`` picks
with ``join_strategy``'s cost model when it emits the primitives). ``predicates`` are
the ON conditions (USING and NATURAL written out as equalities of the named columns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class ApplyJoin(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("left", "right")

    left: Operator
    right: Operator
    predicates: tuple[exp.Expression, ...]
    left_join: bool = False
    # RIGHT JOIN: the right side is preserved (its rows padded with NULLs on the left)
    right_join: bool = False

    @property
    def outer(self) -> bool:
        return self.left_join or self.right_join
