"""SubQuery: an uncorrelated subquery run before its outer query, its result handed
over as bind variables (Vitess's ``UncorrelatedSubquery``; ``kind`` is ``value``,
``in`` or ``exists`` = Variant ``PulloutValue|PulloutIn|PulloutExists``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class SubQuery(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("inner", "outer")

    kind: str  # value | in | exists
    inner: Operator
    outer: Operator
    values_var: str
    has_values_var: str
