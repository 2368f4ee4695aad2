"""Logical operators (Vitess's ``planbuilder/operators``), one module each.

``rewriter.operator_builder`` turns a statement into an initial tree (a Route per
table, joins, filters, projection, ...); ``rewriter.rules`` rewrites it to a fixpoint
(merging routes, pushing work to the shards); ``rewriter.to_primitives`` emits the
engine primitives of ``rewriter.nodes``.

A statement with a construct that has no operator here is one Route carrying the
whole statement when all of it stays on one route (``operator_builder.whole_statement``),
else it is computed at the proxy (``compute_planner``). Not here yet: SemiJoin/AntiJoin
and Compute as operators (``to_primitives`` emits them from SubQuery and Window).
"""

from rewriter.operators.aggregator import Aggregator
from rewriter.operators.apply_join import ApplyJoin
from rewriter.operators.base import Operator
from rewriter.operators.derived import Derived
from rewriter.operators.distinct import Distinct
from rewriter.operators.filter import Filter
from rewriter.operators.limit import Limit
from rewriter.operators.ordering import Ordering
from rewriter.operators.projection import Projection
from rewriter.operators.route import Route
from rewriter.operators.subquery import SubQuery
from rewriter.operators.union import Union
from rewriter.operators.window import Window

__all__ = [
    "Aggregator", "ApplyJoin", "Derived", "Distinct", "Filter", "Limit", "Operator", "Ordering", "Projection", "Route",
    "SubQuery", "Union", "Window",
]
