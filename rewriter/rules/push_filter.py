"""Rule: push filters down (Vitess's ``pushOrMergeFilter``).

- into a Route: WHERE predicates become the route's own (its routing reads them);
  a HAVING is evaluated by the shards when one shard computes the whole statement;
- through an inner ApplyJoin: a predicate over one side's tables goes to that side,
  one over both becomes a join predicate;
- through a LEFT ApplyJoin: only predicates over the preserved (left) side go down
  (one over the nullable side must see the NULL-padded rows); through a RIGHT one,
  none;
- an outer join whose WHERE rejects the padded rows is an inner join.
"""

from __future__ import annotations

import dataclasses

from sqlglot import exp

from rewriter.operators import ApplyJoin, Filter, Operator, Route
from rewriter.rules.planning import Planning, side_of, tables_of
from rewriter.tables import TableRef


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, Filter) or not op.predicates:
        return op.input if isinstance(op, Filter) else None
    src = op.input
    if isinstance(src, Route):
        if op.clause == "having":
            if not p.one_shard(src):
                return None
            return dataclasses.replace(src, absorbed=src.absorbed | {"having"})
        if "derived" in src.absorbed:  # columns of a derived table: not the route's own
            return dataclasses.replace(src, absorbed=src.absorbed | {"where"})
        return dataclasses.replace(src, predicates=src.predicates + op.predicates,
                                   absorbed=src.absorbed | {"where"})
    if isinstance(src, ApplyJoin) and op.clause == "where":
        left_t, right_t = tables_of(src.left), tables_of(src.right)
        if src.left_join and any(_rejects_null(pred, right_t) for pred in op.predicates) \
                or src.right_join and any(_rejects_null(pred, left_t) for pred in op.predicates):
            # no NULL-padded row passes WHERE: the outer join is an inner join
            # (Vitess's tryConvertToInnerJoin)
            return Filter(dataclasses.replace(src, left_join=False, right_join=False), op.predicates)
        if src.right_join:
            return None  # kept above: the left side's rows may be padded
        to_left, to_right, to_join, kept = [], [], [], []
        for pred in op.predicates:
            side = side_of(pred, left_t, right_t)
            if side == "left":
                to_left.append(pred)
            elif src.left_join:
                kept.append(pred)
            elif side == "right":
                to_right.append(pred)
            else:
                to_join.append(pred)
        if not (to_left or to_right or to_join):
            return None
        join = dataclasses.replace(src, left=Filter(src.left, tuple(to_left)) if to_left else src.left,
                                   right=Filter(src.right, tuple(to_right)) if to_right else src.right,
                                   predicates=src.predicates + tuple(to_join))
        return Filter(join, tuple(kept)) if kept else join
    return None


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.In, exp.Between)


def _rejects_null(pred: exp.Expression, right: list[TableRef]) -> bool:
    """Whether ``pred`` is false or unknown when the columns of ``right`` are NULL: a
    comparison with one of them as an operand (NULL compares unknown)."""
    if not isinstance(pred, _COMPARISONS):
        return False
    aliases = {t.alias for t in right}
    operands = [pred.this, *(v for k, v in pred.args.items() if k != "this" and isinstance(v, exp.Expression))]
    return any(isinstance(o, exp.Column) and o.table in aliases for o in operands)
