"""Logical operators (Vitess's ``planbuilder/operators``), one module each.

``rewriter.operator_builder`` turns a statement into an initial tree (a Route per
table, joins, filters, projection, ...); ``rewriter.rules`` rewrites it to a fixpoint
(merging routes, pushing work to the shards); ``rewriter.to_primitives`` emits the
engine primitives of ``rewriter.nodes``.
"""

from rewriter.operators.aggregator import Aggregator
from rewriter.operators.apply_join import ApplyJoin
from rewriter.operators.base import Operator
from rewriter.operators.compute import Compute
from rewriter.operators.derived import Derived
from rewriter.operators.distinct import Distinct
from rewriter.operators.filter import Filter
from rewriter.operators.limit import Limit
from rewriter.operators.ordering import Ordering
from rewriter.operators.projection import Projection
from rewriter.operators.route import Route
from rewriter.operators.semi_join import SemiJoin
from rewriter.operators.subquery import SubQuery
from rewriter.operators.union import Union
from rewriter.operators.window import Window

__all__ = [
    "Aggregator", "ApplyJoin", "Compute", "Derived", "Distinct", "Filter", "Limit", "Operator",
    "Ordering", "Projection", "Route", "SemiJoin", "SubQuery", "Union", "Window",
]
