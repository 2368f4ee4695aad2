"""Vitess's vschema statements through the proxy: ``ALTER VSCHEMA ...`` (parsed and applied by
``vschema.ddl``, stored and distributed by ``proxy.live_vschema``) and ``SHOW VSCHEMA TABLES`` /
``SHOW VSCHEMA VINDEXES [ON [ks.]t]``, with Vitess's columns and error texts."""

from __future__ import annotations

import re
from typing import Any

from proxy.cluster_state import ClusterState
from proxy.engine.result import Result, local_result
from proxy.errors import (
    ER_BAD_DB_ERROR,
    ER_INTERNAL_ERROR,
    ER_NO_DB_ERROR,
    ER_NO_SUCH_TABLE,
    ER_PARSE_ERROR,
    ProxyError,
)
from proxy.session import ProxySession
from vschema.ddl import VSchemaDDLError, VSchemaDDLSyntaxError, apply_vschema_ddl, parse_vschema_ddl

_SHOW_VSCHEMA = re.compile(
    r"^\s*(?P<what>tables|vindexes)(?:\s+(?:on|from|in)\s+(?:`?(?P<ks>[\w-]+)`?\.)?`?(?P<table>[\w$]+)`?)?\s*;?\s*$",
    re.I,
)
VINDEX_COLUMNS = ["Keyspace", "Name", "Type", "Params", "Owner"]
TABLE_VINDEX_COLUMNS = ["Columns", "Name", "Type", "Params", "Owner"]


def _unknown_keyspace(keyspace: str) -> ProxyError:
    return ProxyError(ER_BAD_DB_ERROR, f"VT05003: unknown database '{keyspace}' in vschema")


async def alter_vschema(state: ClusterState, session: ProxySession, sql: str) -> Result:
    """Apply one ``ALTER VSCHEMA`` statement to the cluster's vschema. The keyspace is the
    statement's qualifier, else the session's; the change is validated (the whole vschema is
    built) before it is stored, so a refused statement changes nothing anywhere."""
    try:
        ddl = parse_vschema_ddl(sql)
    except VSchemaDDLSyntaxError as e:
        raise ProxyError(ER_PARSE_ERROR, str(e)) from e
    keyspace = ddl.keyspace or session.keyspace
    if not keyspace:
        raise ProxyError(ER_NO_DB_ERROR, "No database selected")
    if keyspace not in state.config.keyspaces:
        raise _unknown_keyspace(keyspace)

    def apply(doc: dict[str, Any]) -> dict[str, Any]:
        try:
            return apply_vschema_ddl(keyspace, doc, ddl)
        except VSchemaDDLError as e:
            raise ProxyError(ER_INTERNAL_ERROR, str(e)) from e

    await state.live_vschema.change(keyspace, apply, sql)
    return Result()


def show_vschema(session: ProxySession, rest: str) -> Result | None:
    """``SHOW VSCHEMA TABLES`` (the session's keyspace) and ``SHOW VSCHEMA VINDEXES [ON [ks.]t]``;
    None when ``rest`` (what follows ``SHOW VSCHEMA``) is neither."""
    m = _SHOW_VSCHEMA.match(rest)
    if m is None:
        return None
    state = session.state
    if m.group("what").lower() == "tables":
        if m.group("table") is not None:
            return None
        if session.keyspace is None:
            raise ProxyError(ER_NO_DB_ERROR, "No database selected")
        ks = state.vschema.keyspaces.get(session.keyspace)
        if ks is None:
            raise _unknown_keyspace(session.keyspace)
        return local_result(["Tables"], [(name,) for name in sorted(ks.tables)])
    docs = state.live_vschema.docs
    if m.group("table") is None:
        rows = []
        for ks_name in sorted(docs):
            vindexes = docs[ks_name].get("vindexes") or {}
            for vname in sorted(vindexes):
                v = vindexes[vname]
                rows.append((ks_name, vname, v.get("type", ""), _params(v), v.get("owner") or ""))
        return local_result(VINDEX_COLUMNS, rows)
    named: str | None = m.group("ks") or session.keyspace
    if named is None:
        raise ProxyError(ER_NO_DB_ERROR, "No database selected")
    ks_name = named
    if ks_name not in docs:
        raise _unknown_keyspace(ks_name)
    doc = docs[ks_name]
    table_name = m.group("table")
    if not state.vschema.keyspaces[ks_name].sharded:
        return local_result(TABLE_VINDEX_COLUMNS, [])  # Vitess: no vindexes in an unsharded keyspace
    table = (doc.get("tables") or {}).get(table_name)
    if table is None:
        raise ProxyError(ER_NO_SUCH_TABLE, f"table '{table_name}' does not exist in keyspace '{ks_name}'")
    vindexes = doc.get("vindexes") or {}
    rows = []
    for cv in table.get("column_vindexes") or []:
        columns = cv.get("columns") or ([cv["column"]] if cv.get("column") else [])
        v = vindexes.get(cv.get("name", ""))
        if v is None:
            raise ProxyError(ER_INTERNAL_ERROR, f"vindex {cv.get('name')} not found in keyspace {ks_name}")
        rows.append((", ".join(columns), cv.get("name", ""), v.get("type", ""), _params(v), v.get("owner") or ""))
    return local_result(TABLE_VINDEX_COLUMNS, rows)


def _params(vindex: dict[str, Any]) -> str:
    params = vindex.get("params") or {}
    return "; ".join(f"{k}={params[k]}" for k in sorted(params))


__all__ = ["alter_vschema", "show_vschema", "VINDEX_COLUMNS", "TABLE_VINDEX_COLUMNS"]
