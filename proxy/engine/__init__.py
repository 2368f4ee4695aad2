"""The engine: executes plan trees built by ``rewriter`` (Vitess's ``engine`` package).

Entry points (stable; the proxy calls exactly these):

``await proxy.engine.execute(plan, vcursor, bindvars) -> Result``
    Run the plan to completion (DML, or SELECTs the caller wants whole).
``proxy.engine.stream(plan, vcursor, bindvars) -> AsyncIterator[Result]``
    Run a SELECT as a stream: the first chunk carries ``fields``, later chunks rows
    only. Memory stays bounded for scatter queries (ordered merge with a heap; a
    ``Limit`` closes the shard streams once it has its rows). Close the iterator
    (``aclose``) to stop early.

``plan``/``bindvars`` come from ``rewriter.plan_query(sql, vschema, keyspace)``;
``vcursor`` implements ``proxy.engine.vcursor.VCursor``. Errors reach the caller as
``proxy.errors.ProxyError`` (shard errors as ``ShardError`` from the VCursor).
DML plans stream one chunk (affected rows / insert id, no fields).

One module per primitive: route, limit, memory_sort, ordered_aggregate (Scalar and
Ordered aggregates), distinct, filter, projection (SimpleProjection, Truncate,
ProjectNames), projection_compute (expressions over aggregates), join, concatenate,
pullout (uncorrelated subqueries), semi_join (correlated [NOT] EXISTS/IN), vindex_lookup, insert, insert_select, dml
(update/delete), send, sequence (also the id-block ``SequenceAllocator`` the VCursor
uses), vexplain, vexplain_run (VEXPLAIN QUERIES/ALL through a ``query_log``), window (window functions over a scatter's rows). ``dispatch`` maps plan node types to them; helpers: destinations
(shard targeting), compare (collation-aware keys), lookup (lookup vindex SQL),
stream_util.
"""

from __future__ import annotations

from proxy.engine import (
    batched_join,
    compute,
    concatenate,
    distinct,
    dml,
    dml_with_input,
    filter,
    hash_join,
    insert,
    insert_select,
    join,
    limit,
    memory_sort,
    ordered_aggregate,
    projection,
    projection_compute,
    pullout,
    route,
    semi_join,
    send,
    sequence,
    vexplain,
    vexplain_run,
    vindex_lookup,
    window,
)
from proxy.engine.dispatch import execute, register, stream
from rewriter import nodes as P

register({
    P.Route: route,
    P.VindexLookup: vindex_lookup,
    P.Limit: limit,
    P.MemorySort: memory_sort,
    P.Window: window,
    P.Aggregate: ordered_aggregate,
    P.Distinct: distinct,
    P.Filter: filter,
    P.SimpleProjection: projection,
    P.Truncate: projection,
    P.ProjectNames: projection,
    P.Projection: projection_compute,
    P.Join: join,
    P.HashJoin: hash_join,
    P.BatchedJoin: batched_join,
    P.Concatenate: concatenate,
    P.PulloutSubquery: pullout,
    P.SemiJoin: semi_join,
    P.Send: send,
    P.SequenceNext: sequence,
    P.Insert: insert,
    P.InsertSelect: insert_select,
    P.Update: dml,
    P.Delete: dml,
    P.ReferenceWrite: dml,
    P.VExplain: vexplain,
    P.VExplainRun: vexplain_run,
    P.Compute: compute,
    P.DMLWithInput: dml_with_input,
})

__all__ = ["execute", "stream"]
