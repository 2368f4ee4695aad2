"""Rule: merge the two Routes of a join into one (Vitess's ``mergeJoinInputs``) when
every pair of rows the join can match lives on the same shard:

- both in one unsharded keyspace (system tables too: they exist on every server);
- one side reads only reference tables of the other's keyspace (not as the preserved
  side of an outer join: each shard would pad its unmatched rows again);
- both sharded, a join predicate equates a vindexed table's primary vindex column on
  one side with one on the other, of the same vindex (equal values, same shard).

The merged Route's predicates are both sides' plus an inner join's ON conditions
(which restrict rows as WHERE does); an outer join's ON does not (it only pads).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.operators import ApplyJoin, Operator, Route
from rewriter.routing import column_table, vindex_identity
from rewriter.rules.planning import Planning


def apply(op: Operator, p: Planning) -> Operator | None:
    if not isinstance(op, ApplyJoin) or not isinstance(op.left, Route) or not isinstance(op.right, Route):
        return None
    preserved = op.left if op.left_join else op.right if op.right_join else None
    if preserved is not None and not preserved.vindexed_tables() and (op.left.vindexed_tables()
                                                                     or op.right.vindexed_tables()):
        # every shard holds the preserved reference rows: each would pad the rows
        # without a match on that shard, once per shard
        return None
    where = _merged_keyspace(op.left, op.right, op.predicates)
    if where is None:
        return None
    keyspace, sharded = where
    own = () if op.outer else op.predicates
    return Route(keyspace, sharded, op.left.tables + op.right.tables,
                 op.left.predicates + op.right.predicates + own, op.left.absorbed | op.right.absorbed)


def _merged_keyspace(left: Route, right: Route, preds: tuple[exp.Expression, ...]) -> tuple[str, bool] | None:
    if left.system_only and right.system_only:
        return left.keyspace, left.sharded
    if left.system_only or right.system_only:
        user = right if left.system_only else left
        return (user.keyspace, False) if not user.sharded else None
    if left.keyspace != right.keyspace:
        return None
    if not left.sharded or _vindex_tied(left, right, preds):
        return left.keyspace, left.sharded
    return None


def _vindex_tied(left: Route, right: Route, preds: tuple[exp.Expression, ...]) -> bool:
    lt, rt = left.vindexed_tables(), right.vindexed_tables()
    if not lt or not rt:
        return True
    if any(t.pinned is not None for t in lt + rt):
        return False  # a pinned table's shard is not where its join partners' values go
    both = lt + rt
    for pred in preds:
        if not isinstance(pred, exp.EQ):
            continue
        a, b = pred.this, pred.expression
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        ra, rb = column_table(a, both), column_table(b, both)
        if ra is None or rb is None or (ra in lt) == (rb in lt):
            continue
        va, vb = ra.primary_vindex(), rb.primary_vindex()
        if va is None or vb is None or len(va.columns) != 1 or len(vb.columns) != 1:
            continue
        if va.columns[0].lower() == a.name.lower() and vb.columns[0].lower() == b.name.lower() \
                and vindex_identity(va) == vindex_identity(vb):
            return True
    return False
