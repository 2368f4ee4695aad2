"""SHOW statements: the proxy answers those about topology itself (keyspaces,
VITESS_SHARDS, VITESS_TABLETS, ...) and sends table-level ones to a shard of the
table's keyspace, where the keyspace's database holds the real definition."""

from __future__ import annotations

import dataclasses
import re

from proxy.diagnostics import DIAGNOSTICS_READ, empty_list_query, zero_counts
from proxy.engine.result import Result, local_result
from proxy.errors import ER_BAD_DB_ERROR, ER_NO_DB_ERROR, ProxyError
from proxy.resharding.topology import sort_shards
from proxy.session import Outcome, ProxySession
from proxy.twopc import manager_for
from proxy.twopc.resolver import status, unresolved
from proxy.vschema_statements import show_vschema

_SHOW = re.compile(r"^show\s+(?:(?P<full>full|extended)\s+)?(?P<what>[\w]+)(?P<rest>.*?)\s*;?$", re.I | re.S)
_FROM_KS = re.compile(r"\b(?:from|in)\s+`?(?P<ks>[\w-]+)`?", re.I)
_LIKE = re.compile(r"\blike\s+'(?P<pat>[^']*)'", re.I)
# Vitess's statements about distributed (twopc) transactions.
_UNRESOLVED = re.compile(r"^\s+transactions(?:\s+(?:for|from|in)\s+`?(?P<ks>[\w-]+)`?)?$", re.I)
_TX_STATUS = re.compile(r"^\s+status\s+for\s+(?P<q>['\"])(?P<dtid>[^'\"]*)(?P=q)$", re.I)
_TWOPC_FIELDS = ["id", "state", "record_time", "participants"]
_TABLE_TARGET = re.compile(
    r"^(?P<head>\s*(?:create\s+table|columns|fields|index|indexes|keys)\s+(?:from\s+|in\s+)?)"
    r"(?:`?(?P<ks>[\w-]+)`?\.)?`?(?P<table>[\w$]+)`?(?P<tail>.*)$",
    re.I | re.S,
)


async def _show_twopc(session: ProxySession, m: re.Match[str]) -> Result:
    """SHOW UNRESOLVED TRANSACTIONS [FOR ks] / SHOW TRANSACTION STATUS FOR 'dtid' (Vitess's
    columns: id, state, record_time, participants)."""
    manager = manager_for(session.state)
    manager.start()
    if "dtid" in m.groupdict():
        rows = await status(manager, m.group("dtid"))
    else:
        ks = m.group("ks")
        if ks is not None and ks not in session.state.vschema.keyspaces:
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{ks}' in vschema")
        rows = await unresolved(manager, ks)
    return local_result(_TWOPC_FIELDS, rows)


def _like(pattern: str) -> re.Pattern[str]:
    """A LIKE pattern as a regex (``\\`` escapes the next character, as MySQL's default ESCAPE)."""
    parts: list[str] = []
    escaped = False
    for c in pattern:
        if escaped:
            parts.append(re.escape(c))
            escaped = False
        elif c == "\\":
            escaped = True
        else:
            parts.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
    if escaped:
        parts.append(re.escape("\\"))
    return re.compile(f"^{''.join(parts)}$", re.I | re.S)


async def handle_show(session: ProxySession, sql: str) -> Outcome | None:
    m = _SHOW.match(sql)
    if not m:
        return None
    what = m.group("what").lower()
    rest = m.group("rest") or ""
    state = session.state
    like = _LIKE.search(rest)
    keep = _like(like.group("pat")).match if like else (lambda _s: True)

    if what in ("databases", "schemas", "keyspaces"):
        col = "Database"
        rows = [(ks,) for ks in sorted(state.vschema.keyspaces) if keep(ks)]
        if what == "databases" and keep("information_schema"):
            rows.insert(0, ("information_schema",))
        return local_result([col], rows)
    if what == "vitess_shards":
        rows = [(f"{ks}/{s}",) for ks in sorted(state.vschema.keyspaces) for s in state.shard_names(ks)]
        return local_result(["Shards"], [r for r in rows if keep(r[0])])
    if what == "vitess_tablets":
        # Every shard the serving topology knows: a reshard's targets before the switch and its
        # sources after it (until complete) are NOT_SERVING, as Vitess shows them. After a
        # reads-only switch the targets serve reads: SERVING (the primary stands for the
        # replicas Vitess would show serving).
        tablets = []
        for ks in sorted(state.topology):
            topology = state.topology[ks]
            for shard in sort_shards(list(topology.shards)):
                e = topology.endpoint(shard)
                serving = "SERVING" if shard in topology.routed else "NOT_SERVING"
                tablets.append(("local", ks, shard, "PRIMARY", serving, f"{ks}-{shard}", f"{e.host}:{e.port}", ""))
        return local_result(
            ["Cell", "Keyspace", "Shard", "TabletType", "State", "Alias", "Hostname", "PrimaryTermStartTime"], tablets
        )
    if what == "vitess_keyspaces":
        return local_result(["Keyspaces"], [(ks,) for ks in sorted(state.vschema.keyspaces) if keep(ks)])
    if what == "vitess_messages":
        return state.messaging.show_rows()
    if what in ("unresolved", "transaction"):
        tm = (_UNRESOLVED if what == "unresolved" else _TX_STATUS).match(rest)
        if tm:
            return await _show_twopc(session, tm)
    if what == "processlist" and not rest.strip():
        return await state.processlist.show(full=(m.group("full") or "").lower() == "full")
    if what == "topics":
        return await state.topics.show(session, sql)
    if what == "vschema":
        answered = show_vschema(session, rest)
        if answered is not None:
            return answered
    if what == "tables":
        fm = _FROM_KS.search(rest)
        named: str | None = fm.group("ks") if fm else session.keyspace
        if named is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        if named not in state.vschema.keyspaces:
            raise ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{named}' in vschema")
        ks, shard = state.default_shard(named, session.target)
        full = "full " if (m.group("full") or "").lower() == "full" else ""
        q = f"show {full}tables" + (f" like '{like.group('pat')}'" if like else "")
        res = await session.vcursor.execute_shard(ks, shard, q)
        shard_db = state.database_of(ks, shard)
        res.fields = [dataclasses.replace(f, name=f.name.replace(f"Tables_in_{shard_db}", f"Tables_in_{ks}")) for f in res.fields]
        if session.target is None:  # a shard-targeted session sees its shard as it is
            res = await state.topics.table_listing(ks, res, keep)
        return res
    if what in ("create", "columns", "fields", "index", "indexes", "keys"):
        tm = _TABLE_TARGET.match(sql[len("show") :].lstrip() if not m.group("full") else m.group("what") + rest)
        if tm:
            ks = tm.group("ks")
            table = tm.group("table")
            fm = _FROM_KS.search(tm.group("tail") or "")
            if ks is None and fm:
                ks = fm.group("ks")
            # A topic's definition is its view, on the topic's shard only (SQLAlchemy reflects
            # a table with SHOW CREATE TABLE, then DESCRIBE for a view).
            topic = None if session.target is not None else await state.topics.view_shard(ks or session.keyspace, table)
            ks, shard = topic or state.table_shard(table, ks or session.keyspace, session.target)
            full = (m.group("full") + " ") if m.group("full") else ""
            tail = tm.group("tail") or ""
            if fm:  # the keyspace is this proxy's name; the shard's database is its own
                tail = tail[:fm.start()] + tail[fm.end():]
            # LIKE / WHERE go along (SHOW COLUMNS FROM t LIKE 'n%', DESCRIBE t col)
            q = f"show {full}{tm.group('head').strip()} `{table}`{tail}"
            return await session.vcursor.execute_shard(ks, shard, q)
    # Everything else (VARIABLES, STATUS, WARNINGS, ENGINES, ...) is answered by a shard.
    ks, shard = state.default_shard(session.keyspace, session.target)
    if session.diagnostics_clean and DIAGNOSTICS_READ.fullmatch(sql):
        # None to show: the shard connection's may be another statement's (proxy.diagnostics)
        listing = empty_list_query(sql)
        if listing is not None:
            return await session.vcursor.execute_shard(ks, shard, listing)
        return zero_counts(await session.vcursor.execute_shard(ks, shard, sql))
    res = await session.vcursor.execute_shard(ks, shard, sql)
    return res if res.fields else Result()
