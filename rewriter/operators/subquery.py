"""SubQuery: a subquery of the WHERE clause (``x [NOT] IN (q)``, ``[NOT] EXISTS (q)``,
``x <op> (q)``) or of the select list, with the query it belongs to (``outer``). Merged into the outer Route
when every row the subquery reads is where the outer rows are (``rules.merge_subquery``);
else run first and its result handed to the outer query as bind variables (Vitess's
``UncorrelatedSubquery``, Variant ``PulloutIn|PulloutExists|PulloutValue``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class SubQuery(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("inner", "outer")

    inner: Operator
    outer: Operator
    # the predicate holding the subquery (an In, Exists or the scalar Subquery)
    predicate: exp.Expression
    # uncorrelated and in WHERE: may run first when not merged (else the route
    # planners decide: Compute)
    pullout: bool = True
