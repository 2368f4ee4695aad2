"""Which statements the fast path answers, and the one shard query each becomes.

A statement qualifies when the normal path would do nothing for it but send one
query to one shard and relay the answer unchanged:

- the session: autocommit, no transaction (or the transaction the caller runs it in), no
  statement timeout, OLTP, a keyspace selected. Its shard session variables (SET sql_mode,
  time_zone...) go with it: the statement runs on a shard link carrying exactly those
  (``FastRoute.settings``);
- the text: one SELECT, INSERT, UPDATE or DELETE (no ``;``), no
  ``@@`` variable (no ``@`` once the session has set a user variable), no proxy function the
  session answers itself, no ``/*vt+`` hint, no topic named but as an INSERT's target;
- a shard-targeted session (``USE ks:-80``) or an unsharded keyspace: the statement as
  written, to that one shard (an INSERT's table read as the normal path reads it, for
  messaging);
- else the plan: already in the plan cache (a miss takes the normal path, which plans and
  caches it), and either a ``Route`` that reaches exactly one shard with no hidden
  columns, or an ``Insert`` into a sharded table whose rows all go to one shard, without
  owned lookup vindexes and with its auto-increment values given (no sequence to call), or an
  ``Update`` / ``Delete`` reaching one shard without owned lookup rows to maintain (of a message
  table too: ``FastRoute.written_table`` names it, and an ack is told to messaging as the normal
  path tells it). Writes of a session in ``twopc`` mode take the normal path;
- or, autocommit outside a transaction in ``multi`` mode, such an ``Insert`` whose rows go to
  several shards (split per shard as ``proxy.engine.insert`` splits them), or such an
  ``Update`` / ``Delete`` whose WHERE is an IN-list on the primary vindex reaching several
  shards (``FastRoute.several``: one query per shard, run in the statement's implicit
  transaction by ``proxy.fast_path.several``);
- or an ``INSERT INTO topic ... VALUES`` (a publish, ``proxy.topics.routing.route_publish``:
  no parse, no plan), sent to the topic's shard; its sequencer is woken once it succeeded, or,
  outside a transaction and from ``topics.direct_min_rows`` messages, a direct publish
  (``proxy.topics.direct``: its ids taken in the write), run in a task by its topic's batcher
  (``proxy.topics.batch``: concurrent ones share one script; the client gets its INSERT's OK).

Everything is decided from the session's state and the cached plan, synchronously:
what does not qualify costs a normalisation (~10 µs) before the normal path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.engine.destinations import map_values, targets
from proxy.engine.insert import render_rows
from proxy.engine.route import route_targets
from proxy.errors import ProxyError
from proxy.fast_path.shard_link import NO_SETTINGS, Settings, settings_key
from proxy.messaging.dml import inserted_table
from proxy.observability.metrics import plan_label
from proxy.twopc import MULTI, TWOPC
from rewriter import cached_plan
from rewriter.nodes import Delete, DMLOpcode, Insert, Opcode, Route, Update
from sqltext.lexer import first_keyword, reads_tables

if TYPE_CHECKING:
    from proxy.session import ProxySession
    from proxy.topics.direct import DirectInsert


# UPDATE and DELETE: only planned ones (never sent as written: see _verbatim).
_MODIFY = ("update", "delete")


@dataclass(slots=True)
class FastRoute:
    """Where a qualifying statement goes."""

    keyword: str
    keyspace: str
    shard: str
    query: bytes  # the shard's statement, UTF-8
    plan: str  # its plan label, for the metrics
    # An INSERT's table (the plan's keyspace): messaging hears of it once it succeeded.
    inserted_table: str | None
    # The session variables its shard link must carry (the session's SETs).
    settings: Settings
    # A planned INSERT of several rows: its OK packet goes without the shard's info text
    # ("Records: 2  Duplicates: 0  Warnings: 0"), as the normal path's answer (proxy.engine.insert
    # sums its shards' counts, not their texts).
    without_info: bool = False
    # A publish: the topic (keyspace, name) whose sequencer hears of it once it succeeded.
    topic: tuple[str, str] | None = None
    # A direct publish (``proxy.topics.direct``): its INSERT, for its topic's batcher
    # (``proxy.topics.batch``); ``query`` is then unused.
    publish: DirectInsert | None = None
    # A planned UPDATE of a message table (the plan's keyspace): perhaps an ack, which
    # messaging hears of once it succeeded (Executor._message_write reads its ids).
    acks_table: str | None = None
    # An autocommit write reaching several shards: each shard's statement, in the order the
    # normal path sends them (its first error is the one reported); ``shard`` / ``query`` are
    # then unused.
    several: list[tuple[str, str]] | None = None


def fast_route(session: ProxySession, sql: str, in_transaction: bool = False) -> FastRoute | None:
    """The shard query for ``sql`` if the fast path can answer it, else None. ``in_transaction``:
    the caller runs it in the session's transaction (``proxy.fast_path.protocol`` checked the
    transaction may take it), else only an autocommit session outside one qualifies."""
    if (
        (not in_transaction and (session.tx is not None or not session.autocommit))
        or session.max_execution_time
        or session.workload != "oltp"
    ):
        return None
    keyspace = session.keyspace
    if keyspace is None:
        return None
    if ";" in sql or "@@" in sql or "/*vt+" in sql:
        return None
    if session.user_vars and "@" in sql:
        return None  # the normal path writes the session's user variables into it (proxy/user_variables.py)
    kw = first_keyword(sql)
    if kw == "select":
        if "(" in sql and not reads_tables(sql):
            return None  # perhaps DATABASE(), VERSION(), CONNECTION_ID(): the session answers those
    elif kw not in _MODIFY and kw != "insert":
        return None
    if kw != "select" and session.transaction_mode == TWOPC:
        return None
    proxy = session.state
    settings = session.settings
    if proxy.topics.names_topic(sql):
        if kw != "insert" or session.target_shard is not None or (settings and "sql_mode" in settings and ('"' in sql or "\\" in sql or "''" in sql)):
            return None
        return _publish_target(session, sql, settings_key(settings) if settings else NO_SETTINGS, in_transaction)
    if session.target_shard is not None or not proxy.is_sharded(keyspace):
        return _verbatim(session, keyspace, sql, kw, settings_key(settings) if settings else NO_SETTINGS)
    if settings and "sql_mode" in settings and ('"' in sql or "\\" in sql or "''" in sql):
        # The planner reads and renders literals by the default sql_mode: under ANSI_QUOTES or
        # NO_BACKSLASH_ESCAPES the normal path refuses these (system_variables.literal_mode_refusal).
        return None
    # Set before routing: a SELECT routes by the read shards (ProxySession.routing_vschema),
    # through the vcursor too.
    session.only_reads = kw == "select"
    vschema = session.routing_vschema()
    found = cached_plan(sql, vschema, keyspace, proxy.schema)
    if found is None:
        return None
    plan, bindvars = found
    # An autocommit write may reach several shards: Executor._atomic_statement's implicit
    # transaction, taken here in multi mode only (single: the normal path's own rules).
    several = not in_transaction and session.transaction_mode == MULTI
    try:
        if type(plan) is Route:
            target = _route_target(plan, session, bindvars)
            targets_ = None if target is None else [target]
        elif type(plan) is Insert and kw == "insert":
            targets_ = _insert_targets(plan, vschema, bindvars, several)
        elif (type(plan) is Update or type(plan) is Delete) and kw in _MODIFY:
            targets_ = _modify_targets(plan, session, vschema, bindvars, several)
        else:
            return None
    except ProxyError:
        return None  # the normal path reports it
    if not targets_:
        return None
    table = plan.table if type(plan) is Insert else None
    acks_table = None
    if type(plan) is Update and proxy.messaging.is_message_table(plan.keyspace, plan.table):
        acks_table = plan.table
    key = settings_key(settings) if settings else NO_SETTINGS
    if len(targets_) > 1:
        return FastRoute(kw, plan.keyspace, "", b"", plan_label(plan), table, key, acks_table=acks_table,
                         several=targets_)
    shard, query = targets_[0]
    return FastRoute(
        kw, plan.keyspace, shard, query.encode("utf-8"), plan_label(plan), table, key,
        type(plan) is Insert and len(plan.row_templates) > 1, acks_table=acks_table,
    )


def _verbatim(session: ProxySession, keyspace: str, sql: str, kw: str, settings: Settings) -> FastRoute | None:
    """A statement of a shard-targeted session (``USE ks:-80``) or of an unsharded keyspace:
    sent as written to that one shard, as ``Executor._route`` sends it."""
    target = session.target
    table = None
    if kw in _MODIFY:
        return None  # an UPDATE may ack messages, read from its text by the normal path
    if kw == "insert":
        written = inserted_table(sql)
        if written is None or written.keyspace is not None:
            return None  # a table the regex does not read, or another keyspace's: the normal path says
        table = written.table
    ks, shard = session.state.default_shard(keyspace, target)
    return FastRoute(
        kw, ks, shard, sql.encode("utf-8"), "Targeted" if target is not None else "Unsharded", table, settings
    )


def _publish_target(session: ProxySession, sql: str, settings: Settings, in_transaction: bool) -> FastRoute | None:
    """An INSERT into a topic: routed by the topics service from the text alone
    (no parse, no plan), to the topic's shard; outside a transaction, a direct publish
    (its ids assigned in the write) when it can be rewritten so."""
    topics = session.state.topics
    routed = topics.fast_publish(session, sql)
    if routed is None or routed.insert_into is None:
        return None
    topic = routed.insert_into
    insert = topics.direct_insert(session, routed, in_transaction)
    query = b"" if insert is not None else routed.sql.encode("utf-8")  # a direct publish's: made when sent
    return FastRoute("insert", routed.keyspace, routed.shard, query, "Topic", None,
                     settings, topic=(topic.keyspace, topic.name), publish=insert)


def _route_target(route: Route, session: ProxySession, bindvars: dict[str, Any]) -> tuple[str, str] | None:
    if route.truncate:
        return None
    if route.opcode is Opcode.EqualUnique and len(route.values) == 1:
        # The point select: one value, one keyspace id (what destinations.targets does for
        # it, without its general cases: ~4 µs less per statement).
        value = route.values[0].resolve(bindvars)
        if not isinstance(value, list | tuple):
            ksid = map_values(route.vindex, [value])[0]
            if ksid is None:
                return None
            return session.routing_vschema().shard_for(route.keyspace, ksid), route.query.render(bindvars)
    targets = route_targets(route, session.vcursor, bindvars)
    if len(targets) != 1:
        return None
    shard, bv = targets[0]
    return shard, route.query.render(bv)


def _modify_targets(
    node: Update | Delete, session: ProxySession, vschema: Any, bindvars: dict[str, Any], several: bool
) -> list[tuple[str, str]] | None:
    """An UPDATE / DELETE that ``proxy.engine.dml`` sends as it is: no owned lookup rows to
    maintain, routed without a lookup; to one shard, or (``several``) an IN-list on the primary
    vindex split per shard, each shard's statement rendered as ``proxy.engine.dml`` renders it."""
    if node.owned_lookups or getattr(node.vindex, "needs_lookup", False):
        return None
    tg = targets(vschema, node.opcode, node.keyspace, node.vindex, node.values, node.in_var, bindvars,
                 node.target_ksid, node.target_shard)
    if len(tg) != 1 and not (several and len(tg) > 1 and node.opcode is DMLOpcode.IN):
        return None
    return [(shard, node.query.render(bv)) for shard, bv in tg]


def _insert_targets(
    node: Insert, vschema: Any, bindvars: dict[str, Any], several: bool
) -> list[tuple[str, str]] | None:
    """Each shard's INSERT of its rows, as ``proxy.engine.insert`` splits and renders them: all
    the rows to one shard, or (``several``) the rows of several shards."""
    if node.opcode is not DMLOpcode.Sharded:
        return None
    if len(node.vindex_values) > 1 and any(vv.owned for vv in node.vindex_values[1:]):
        return None  # lookup rows go in first: the normal path's work
    bv = bindvars
    auto = node.auto_increment
    if auto is not None:
        bv = dict(bindvars)
        for name, given in zip(auto.row_vars, auto.given, strict=True):
            value = given.resolve(bindvars) if given is not None else None
            if value is None:
                return None  # the sequence gives it: the normal path
            bv[name] = value
    rows = len(node.row_templates)
    if node.target_ksid is not None:
        shard = vschema.shard_for(node.keyspace, node.target_ksid)
    else:
        primary = node.vindex_values[0]
        if getattr(primary.vindex, "needs_lookup", False):
            return None
        ksids = map_values(primary.vindex, [row[0].resolve(bv) for row in primary.rows])
        if None in ksids:
            return None
        if rows == 1:
            shard = vschema.shard_for(node.keyspace, ksids[0])
        else:
            # Split as proxy.engine.insert splits them: shards in the order of their first row.
            per_shard = vschema.keyspace(node.keyspace).shard_map.rows_by_shard(ksids)
            if len(per_shard) > 1:
                if not several:
                    return None  # rows for several shards: the normal path splits them
                return [(s, render_rows(node, idx, bv)) for s, idx in per_shard.items()]
            (shard,) = per_shard
    return [(shard, render_rows(node, range(rows), bv))]
