"""The logical operator base (Vitess's ``operators.Operator``): plain data, a tree.

An operator names its inputs by field; ``inputs()`` and ``with_inputs()`` let the
rewrite driver (``rewriter.rules``) walk and rebuild any tree without knowing each
operator's shape. Operators are never mutated by rules: a rule returns a new node.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar


@dataclasses.dataclass(frozen=True, slots=True)
class Operator:
    """One node of the logical plan. ``INPUTS`` lists the fields holding inputs (a
    field may hold one operator or a tuple of them)."""

    INPUTS: ClassVar[tuple[str, ...]] = ()

    def inputs(self) -> tuple[Operator, ...]:
        out: list[Operator] = []
        for name in self.INPUTS:
            value = getattr(self, name)
            out.extend(value if isinstance(value, tuple) else (value,))
        return tuple(out)

    def with_inputs(self, inputs: tuple[Operator, ...]) -> Operator:
        """A copy with ``inputs`` (in ``inputs()`` order) in place of the current ones."""
        changes: dict[str, object] = {}
        at = 0
        for name in self.INPUTS:
            value = getattr(self, name)
            if isinstance(value, tuple):
                changes[name] = tuple(inputs[at:at + len(value)])
                at += len(value)
            else:
                changes[name] = inputs[at]
                at += 1
        return dataclasses.replace(self, **changes)
