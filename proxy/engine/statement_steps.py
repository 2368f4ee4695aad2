"""Whether a DML plan reaches all its shards in one step, or in several one after another.

An implicit ``twopc`` transaction (one autocommit DML statement, ``proxy.transaction``)
runs a shard in plain autocommit when the statement reaches that shard alone, counting on
the statement to send all its shard statements at once. A plan that works in steps
breaks that: its first step (a lookup vindex's row, the rows an UPDATE will change, the
SELECT of an INSERT ... SELECT) would commit on its own before the next step reached
another shard, and a failure there would leave it applied. Such statements get a branch
on every shard, so the whole statement commits atomically.

One step: an INSERT or UPDATE/DELETE without owned lookup vindexes to maintain (a
lookup-routed UPDATE/DELETE only reads the lookup table first, and the read needs no
commit), a reference-table write, a statement sent to one shard. Everything else (owned
lookup rows, INSERT ... SELECT, DMLWithInput) works in steps.
"""

from __future__ import annotations

from rewriter import nodes as P


def reaches_shards_at_once(plan: P.Plan) -> bool:
    if isinstance(plan, P.Insert):
        return not any(vv.owned for vv in plan.vindex_values)
    if isinstance(plan, P.ModifyRows):
        return not plan.owned_lookups
    return isinstance(plan, P.Send | P.Route)
