"""SQL ``VSTREAM * FROM t [WHERE pos > '<vgtid json>'] [LIMIT n]`` over the CDC stream.

Rows are ``op`` (``+`` insert, ``*`` update after image, ``-`` delete before image),
the table's columns, and (beyond Vitess) ``vgtid``: the position after the row's
transaction, so a SQL client can resume with ``WHERE pos > '<that value>'``.
Without a position the stream starts at ``current`` (Vitess copies the table first).
As in Vitess the default LIMIT is 100 rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from mysql_mimic.types import ColumnType

from proxy.engine.result import UTF8MB4_GENERAL_CI, Field, Result, encode_value
from proxy.errors import ProxyError

if TYPE_CHECKING:
    from proxy.server import Proxy
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


async def vstream(proxy: Proxy, session: ProxySession, sql: str) -> AsyncIterator[Result]:
    from proxy.cdc import VStream, VStreamRowFormatter
    from proxy.cdc.errors import CdcError

    m = _VSTREAM.match(sql.strip())
    if not m:
        raise ProxyError(1064, "syntax error: expected VSTREAM * FROM table [WHERE pos > '<vgtid>'] [LIMIT n]")
    start: str = "current"
    if m.group("where"):
        pm = _POS.match(m.group("where").strip())
        if not pm:
            raise ProxyError(1235, "VT03017: where clause can only be of the type 'pos > <value>'")
        start = pm.group("pos").replace("''", "'").replace("\\'", "'")
    limit = int(m.group("limit")) if m.group("limit") else DEFAULT_LIMIT
    name = m.group("table").replace("`", "")
    ks_hint, _, tname = name.rpartition(".")
    table = proxy.vschema.find_table(tname, ks_hint or session.keyspace)
    keyspace = table.keyspace
    shards = [session.target_shard] if session.target_shard and keyspace == session.keyspace else proxy.shard_names(keyspace)
    endpoints = {(keyspace, s): proxy.endpoints[(keyspace, s)] for s in shards}

    # Fields come from the table itself, so the header is exact.
    probe = await session.vcursor.execute_shard(keyspace, shards[0], f"select * from `{table.name}` where 1 != 1")
    fields = [_vtext_field("op"), *probe.fields, _vtext_field("vgtid")]
    formatter = VStreamRowFormatter(f"{keyspace}.{table.name}")
    snapshot: _Snapshot | None = None
    if start.lower() == "snapshot":
        snapshot = await _Snapshot.take(proxy, keyspace, shards)
        start = snapshot.vgtid_json
    try:
        try:
            stream = VStream(endpoints, tables=[f"{keyspace}.{table.name}"], start=start)
            # Positions are fixed before the header goes out: a client that writes right
            # after its VSTREAM returned sees those writes.
            await stream.open()
        except (CdcError, ValueError) as e:
            raise ProxyError(1105, f"VSTREAM: {e}") from e
        try:
            yield Result(fields=fields)
            sent = 0
            if snapshot is not None:
                async for rows in snapshot.copy(table.name):
                    rows = rows[: limit - sent]
                    sent += len(rows)
                    yield Result(rows=rows)
                    if sent >= limit:
                        return
                await snapshot.release()
            async for group in stream:
                rows = formatter.rows(group)
                if not rows:
                    continue
                rows = rows[: limit - sent]
                sent += len(rows)
                yield Result(rows=[tuple(encode_value(v) for v in row) for row in rows])
                if sent >= limit:
                    return
        except CdcError as e:
            raise ProxyError(1105, f"VSTREAM: {e}") from e
        finally:
            await stream.aclose()
    finally:
        if snapshot is not None:
            await snapshot.release()


class _Snapshot:
    """One consistent-snapshot transaction per shard, and the binlog position it matches."""

    def __init__(self, keyspace: str, conns: list[tuple[str, Any]], vgtid_json: str) -> None:
        self.keyspace = keyspace
        self.conns = conns
        self.vgtid_json = vgtid_json

    @classmethod
    async def take(cls, proxy: Proxy, keyspace: str, shards: list[str]) -> _Snapshot:
        conns: list[tuple[str, Any]] = []
        positions = []
        try:
            for shard in shards:
                sc = await proxy.pools.get(keyspace, shard).acquire()
                conns.append((shard, sc))
                await sc.execute("start transaction with consistent snapshot")
                status = await sc.execute("show status like 'binlog_snapshot_%'")
                st = {bytes(r[0]).decode().lower(): bytes(r[1]).decode() for r in status.rows}
                pos = await sc.execute(
                    f"select binlog_gtid_pos('{st['binlog_snapshot_file']}', {int(st['binlog_snapshot_position'])})"
                )
                gtid = (pos.rows[0][0] or b"").decode()
                positions.append({"keyspace": keyspace, "shard": shard, "gtid": gtid})
        except BaseException:
            await cls(keyspace, conns, "").release()
            raise
        return cls(keyspace, conns, json.dumps(positions, separators=(",", ":")))

    async def copy(self, table: str) -> AsyncIterator[list[tuple[bytes | None, ...]]]:
        last: tuple[bytes | None, ...] | None = None
        for _shard, sc in self.conns:
            async for chunk in sc.stream(f"select * from `{table}`"):
                if not chunk.rows:
                    continue
                # The newest row is held back: the very last one carries the position.
                rows = ([last] if last is not None else []) + [(b"+", *row, None) for row in chunk.rows]
                last = rows.pop()
                if rows:
                    yield rows
        if last is not None:
            yield [(*last[:-1], self.vgtid_json.encode())]

    async def release(self) -> None:
        conns, self.conns = self.conns, []
        for _shard, sc in conns:
            try:
                await sc.execute("commit")
            except ProxyError:
                sc.broken = True
            finally:
                sc.pool.release(sc)
