"""SQL ``VSTREAM * FROM t [WHERE pos > '<vgtid json>'] [LIMIT n]`` over the CDC stream.

Rows are ``op`` (``+`` insert, ``*`` update after image, ``-`` delete before image),
the table's columns, and (beyond Vitess) ``vgtid``: the position after the row's
transaction, so a SQL client can resume with ``WHERE pos > '<that value>'``.
Without a position the stream starts at ``current`` (Vitess copies the table first).
As in Vitess the default LIMIT is 100 rows.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from mysql_mimic.types import ColumnType

from proxy.cdc import DdlEvent, VStream, VStreamRowFormatter
from proxy.cdc.errors import CdcError
from proxy.cluster_state import ClusterState
from proxy.engine.result import UTF8MB4_GENERAL_CI, Field, Result, encode_value
from proxy.errors import ER_NOT_SUPPORTED_YET, ER_PARSE_ERROR, ER_UNKNOWN_ERROR, ProxyError
from proxy.observability.cdc_streams import CDC_STREAMS
from proxy.session import ProxySession

DEFAULT_LIMIT = 100

_VSTREAM = re.compile(
    r"^vstream\s+(?:/\*.*?\*/\s*)*(?P<expr>.+?)\s+from\s+(?P<table>[`\w.-]+)"
    r"(?:\s+where\s+(?P<where>.+?))?(?:\s+limit\s+(?P<limit>\d+))?\s*;?$",
    re.I | re.S,
)
_POS = re.compile(r"^pos\s*>\s*'(?P<pos>(?:[^'\\]|\\.|'')*)'$", re.I | re.S)


def _vtext_field(name: str) -> Field:
    return Field(name=name, type=ColumnType.VAR_STRING, charset=UTF8MB4_GENERAL_CI, length=1024)


async def vstream(state: ClusterState, session: ProxySession, sql: str) -> AsyncIterator[Result]:
    m = _VSTREAM.match(sql.strip())
    if not m:
        raise ProxyError(ER_PARSE_ERROR, "syntax error: expected VSTREAM * FROM table [WHERE pos > '<vgtid>'] [LIMIT n]")
    start: str = "current"
    if m.group("where"):
        pm = _POS.match(m.group("where").strip())
        if not pm:
            raise ProxyError(ER_NOT_SUPPORTED_YET, "VT03017: where clause can only be of the type 'pos > <value>'")
        start = pm.group("pos").replace("''", "'").replace("\\'", "'")
        if start.lower() == "snapshot":
            start = "snapshot"
    limit = int(m.group("limit")) if m.group("limit") else DEFAULT_LIMIT
    name = m.group("table").replace("`", "")
    ks_hint, _, tname = name.rpartition(".")
    table = state.vschema.find_table(tname, ks_hint or session.keyspace)
    keyspace = table.keyspace
    target = session.target
    shards = [target[1]] if target is not None and target[0] == keyspace else state.shard_names(keyspace)
    endpoints = {(keyspace, s): state.endpoints[(keyspace, s)] for s in shards}

    # Fields come from the table itself, so the header is exact.
    probe = await session.vcursor.execute_shard(keyspace, shards[0], f"select * from `{table.name}` where 1 != 1")
    fields = [_vtext_field("op"), *probe.fields, _vtext_field("vgtid")]
    formatter = VStreamRowFormatter(f"{keyspace}.{table.name}")
    try:
        # start may be 'snapshot': the stream copies the table first (see proxy.cdc.table_copy).
        # A position naming a reshard's sources (saved before its switch) resumes there, and
        # the stream follows a switch's journal to the new shards: any known shard is found.
        stream = VStream(endpoints, tables=[f"{keyspace}.{table.name}"], start=start,
                         shard_locator=state.locate_shard)
        # Positions are fixed before the header goes out: a client that writes right
        # after its VSTREAM returned sees those writes.
        await stream.open()
    except (CdcError, ValueError) as e:
        raise ProxyError(ER_UNKNOWN_ERROR, f"VSTREAM: {e}") from e
    figures = CDC_STREAMS.open(f"{keyspace}.{table.name}", stream)
    try:
        yield Result(fields=fields)
        sent = 0
        async for group in stream:
            if group.row_count == 0 and any(isinstance(e, DdlEvent) for e in group.events):
                state.ddl_seen(keyspace)  # the schema tracker re-reads the keyspace
            rows = formatter.rows(group)
            if not rows:
                figures.delivered(group.keyspace, group.shard, len(group.events), 0, group.commit_time)
                continue
            rows = rows[: limit - sent]
            sent += len(rows)
            encoded = [tuple(encode_value(v) for v in row) for row in rows]
            figures.delivered(group.keyspace, group.shard, len(group.events),
                              sum(len(v) for row in encoded for v in row if v is not None), group.commit_time)
            yield Result(rows=encoded)
            if sent >= limit:
                return
    except CdcError as e:
        raise ProxyError(ER_UNKNOWN_ERROR, f"VSTREAM: {e}") from e
    finally:
        CDC_STREAMS.close(figures)
        await stream.aclose()
