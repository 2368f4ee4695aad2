"""The resolver: finishes distributed transactions whose coordinator is gone.

Every proxy process runs one (at start-up, then every ``twopc.resolver_interval_seconds``);
several at once are safe because every step is idempotent or decided by the database:

1. Read the decision records of every shard, *then* ``XA RECOVER`` on every shard (this
   order matters: a COMMIT record is written only after every participant prepared, so a
   participant missing from a later ``XA RECOVER`` has committed, and the record can go).
2. For each prepared branch of the proxy's (format id ``xid.FORMAT_ID``):
   - a recorded decision is applied (``XA COMMIT`` / ``XA ROLLBACK``);
   - no decision: if the coordinator is alive (it is this process and still committing it,
     or another process holds its liveness lock on the MM shard) it is left alone;
     otherwise ROLLBACK is recorded on the MM (a row-locked, conditional insert: a
     committing MM branch wins, a late one loses) and applied.
   ``XA COMMIT``/``XA ROLLBACK`` answering XAER_NOTA means another resolver finished it,
   or its coordinator's connection still holds it: the next run tells.
3. Records of finished transactions are deleted (COMMIT once no participant holds the
   branch; ROLLBACK tombstones after ``ROLLBACK_RETENTION_S``).

A shard that is down is skipped and picked up again when it is back: its prepared
branches survive the restart (MariaDB keeps prepared XA transactions).

Liveness: each process holds ``GET_LOCK('shardgate_2pc_<process>')`` on every shard,
on the connection the resolver works on; a killed process's connections close and the
locks go with them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from proxy.errors import ER_XAER_NOTA, ProxyError, ShardError
from proxy.pools import ShardConnection
from proxy.sidecar_tables import hex_literal
from proxy.twopc.manager import ROLLBACK_RETENTION_S, TwoPCManager
from proxy.twopc.xid import (
    ShardKey,
    bqual,
    lock_name,
    parse_dtid,
    parse_participants,
    recovered_xid,
    xid_sql,
)

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Record:
    dtid: str
    mm: ShardKey
    state: str
    participants: list[ShardKey]
    time_created: str
    age_s: float


@dataclass(slots=True)
class Scan:
    records: dict[str, Record] = field(default_factory=dict)
    records_ok: set[ShardKey] = field(default_factory=set)  # shards whose records were read
    prepared: dict[str, list[ShardKey]] = field(default_factory=dict)  # dtid -> shards holding a branch
    recover_ok: set[ShardKey] = field(default_factory=set)  # shards whose XA RECOVER answered


async def read_records(m: TwoPCManager, key: ShardKey, sc: ShardConnection, scan: Scan) -> None:
    table = await m.sidecar(key, sc)
    res = await sc.execute(
        "select dtid, state, participants, time_created, "
        f"timestampdiff(microsecond, time_created, utc_timestamp(6)) from {table}"
    )
    for dtid, state, parts, created, age_us in res.rows:
        d = bytes(dtid).decode()  # type: ignore[arg-type]  # NOT NULL column
        scan.records[d] = Record(
            d,
            key,
            bytes(state).decode(),  # type: ignore[arg-type]  # NOT NULL column
            parse_participants(bytes(parts or b"").decode()),
            bytes(created).decode() if created is not None else "",
            int(age_us or 0) / 1e6,
        )
    scan.records_ok.add(key)


async def read_prepared(key: ShardKey, sc: ShardConnection, scan: Scan) -> None:
    res = await sc.execute("xa recover")
    mine = bqual(key)
    for row in res.rows:
        xid = recovered_xid(tuple(row))
        # Two shards on one server both list each other's branches: each takes its own.
        if xid is not None and xid[1] == mine:
            scan.prepared.setdefault(xid[0], []).append(key)
    scan.recover_ok.add(key)


async def scan_shards(m: TwoPCManager, conns: dict[ShardKey, ShardConnection]) -> Scan:
    """Records first, then prepared branches (see the module docstring for why)."""
    scan = Scan()

    async def guarded(key: ShardKey, step: object) -> None:
        try:
            await step  # type: ignore[misc]
        except ProxyError as e:
            logger.debug("twopc scan: shard skipped", extra={"keyspace": key[0], "shard": key[1], "error": e.message})

    await asyncio.gather(*(guarded(k, read_records(m, k, sc, scan)) for k, sc in conns.items()))
    await asyncio.gather(*(guarded(k, read_prepared(k, sc, scan)) for k, sc in conns.items()))
    return scan


async def _resolver_conn(m: TwoPCManager, key: ShardKey) -> ShardConnection | None:
    """The resolver's connection to ``key``, which also holds this process's liveness lock."""
    sc = m.resolver_conns.get(key)
    if sc is not None and not sc.broken:
        return sc
    if sc is not None:
        del m.resolver_conns[key]
        sc.pool.release(sc)
    pool = m.pools.get(*key)
    try:
        sc = await pool.acquire()
    except ProxyError:
        return None
    try:
        await sc.execute(f"select get_lock('{m.lock_name}', 0)")
    except ProxyError:
        sc.broken = True
        pool.release(sc)
        return None
    m.resolver_conns[key] = sc
    return sc


async def _alive(sc: ShardConnection, process: str) -> bool:
    res = await sc.execute(f"select is_used_lock('{lock_name(process)}')")
    return bool(res.rows) and res.rows[0][0] is not None


async def _finish(m: TwoPCManager, sc: ShardConnection, key: ShardKey, dtid: str, state: str) -> bool:
    verb = "commit" if state == "COMMIT" else "rollback"
    try:
        await sc.execute(f"xa {verb} {xid_sql(dtid, key)}")
    except ShardError as e:
        if e.code != ER_XAER_NOTA:
            logger.warning("twopc resolver: finishing a branch failed",
                           extra={"dtid": dtid, "keyspace": key[0], "shard": key[1], "error": e.shard_message})
        return False
    except ProxyError:
        return False
    if verb == "commit":
        m.counters.resolved_commit += 1
    else:
        m.counters.resolved_rollback += 1
    logger.info("twopc resolver finished a branch", extra={"dtid": dtid, "keyspace": key[0], "shard": key[1], "state": state})
    return True


async def resolve_once(m: TwoPCManager) -> None:
    keys = m.shards
    opened = await asyncio.gather(*(_resolver_conn(m, k) for k in keys))
    m.locks_taken.set()
    conns = {k: sc for k, sc in zip(keys, opened, strict=True) if sc is not None}
    scan = await scan_shards(m, conns)
    m.counters.resolver_runs += 1
    in_doubt = 0
    alive: dict[tuple[ShardKey, str], bool] = {}
    for dtid, shards in scan.prepared.items():
        if dtid in m.in_flight:
            continue
        d = parse_dtid(dtid)
        if d is None or d.mm not in m.databases:
            in_doubt += 1
            logger.warning("twopc resolver: prepared branch names no known shard", extra={"dtid": dtid})
            continue
        record = scan.records.get(dtid)
        state = record.state if record is not None else None
        if state is None:
            m.note_prepared(dtid)
            mm_sc = conns.get(d.mm)
            if mm_sc is None or d.mm not in scan.records_ok:
                in_doubt += 1  # the decision lives on a shard that is down: wait for it
                continue
            try:
                if d.process != m.process:
                    if (d.mm, d.process) not in alive:
                        alive[(d.mm, d.process)] = await _alive(mm_sc, d.process)
                    if alive[(d.mm, d.process)]:
                        in_doubt += 1  # its coordinator is still at work
                        continue
                state = await m.decide_on(mm_sc, await m.sidecar(d.mm, mm_sc), dtid, shards)
            except ProxyError as e:
                logger.info("twopc resolver: no decision yet", extra={"dtid": dtid, "error": e.message})
                state = None
            if state is None:
                in_doubt += 1
                continue
        done = True
        for key in shards:
            sc = conns.get(key)
            done = (sc is not None and await _finish(m, sc, key, dtid, state)) and done
        if done:
            m.first_seen.pop(dtid, None)
        else:
            in_doubt += 1
    await _clear_records(m, scan, conns)
    m.counters.in_doubt = in_doubt
    # Only what is still prepared somewhere (others' transactions finish without us).
    m.first_seen = {d: t for d, t in m.first_seen.items() if d in scan.prepared}


async def _clear_records(m: TwoPCManager, scan: Scan, conns: dict[ShardKey, ShardConnection]) -> None:
    by_mm: dict[ShardKey, list[str]] = {}
    for dtid, rec in scan.records.items():
        if dtid in scan.prepared:
            continue
        if rec.state == "COMMIT":
            # Every participant answered XA RECOVER after the record was read, without it.
            if not all(p in scan.recover_ok for p in rec.participants):
                continue
        elif rec.age_s < ROLLBACK_RETENTION_S:
            continue
        by_mm.setdefault(rec.mm, []).append(dtid)
    for mm, dtids in by_mm.items():
        await m.delete_records(mm, dtids, conns.get(mm))


async def run_resolver(m: TwoPCManager) -> None:
    try:
        while True:
            try:
                await resolve_once(m)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: keep resolving, but say so
                logger.exception("twopc resolver run failed")
            await asyncio.sleep(m.interval)
    finally:
        await m.close_connections()  # also when the process shuts down (the task is cancelled)


# -- SHOW UNRESOLVED TRANSACTIONS / SHOW TRANSACTION STATUS --------------------------------

StatusRow = tuple[str, str, str | None, str]  # id, state, record_time, participants


def _seen_time(m: TwoPCManager, dtid: str) -> str | None:
    t = m.first_seen.get(dtid)
    return None if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


async def _scan_with_pool(m: TwoPCManager, keys: list[ShardKey]) -> Scan:
    conns: dict[ShardKey, ShardConnection] = {}
    try:
        for key in keys:
            try:
                conns[key] = await m.pools.get(*key).acquire()
            except ProxyError:
                continue
        return await scan_shards(m, conns)
    finally:
        for sc in conns.values():
            sc.pool.release(sc)


async def unresolved(m: TwoPCManager, keyspace: str | None = None) -> list[StatusRow]:
    """Transactions not finished everywhere: prepared somewhere, or decided COMMIT with a
    participant that has not answered since."""
    scan = await _scan_with_pool(m, m.shards)
    rows: list[StatusRow] = []
    dtids = set(scan.prepared) | {
        d for d, r in scan.records.items() if r.state == "COMMIT" and not all(p in scan.recover_ok for p in r.participants)
    }
    for dtid in sorted(dtids):
        d = parse_dtid(dtid)
        if keyspace is not None and (d is None or d.mm[0] != keyspace):
            continue
        rec = scan.records.get(dtid)
        if rec is not None:
            rows.append((dtid, rec.state, rec.time_created or None, _participants(rec.participants)))
        else:
            rows.append((dtid, "PREPARE", _seen_time(m, dtid), _participants(scan.prepared.get(dtid, []))))
    return rows


async def status(m: TwoPCManager, dtid: str) -> list[StatusRow]:
    d = parse_dtid(dtid)
    if d is None or d.mm not in m.databases:
        return []
    async with m.pools.get(*d.mm).connection() as sc:
        table = await m.sidecar(d.mm, sc)
        res = await sc.execute(
            f"select state, participants, time_created from {table} where dtid = {hex_literal(dtid)}"
        )
    if res.rows:
        state, parts, created = res.rows[0]
        participants = parse_participants(bytes(parts or b"").decode())
        return [(dtid, bytes(state).decode(), bytes(created).decode() if created else None, _participants(participants))]  # type: ignore[arg-type]  # NOT NULL column
    scan = Scan()
    for key in m.shards:
        try:
            async with m.pools.get(*key).connection() as sc:
                await read_prepared(key, sc, scan)
        except ProxyError:
            continue
    if dtid in scan.prepared:
        return [(dtid, "PREPARE", _seen_time(m, dtid), _participants(scan.prepared[dtid]))]
    return []


def _participants(keys: list[ShardKey]) -> str:
    return ",".join(f"{ks}:{shard}" for ks, shard in sorted(keys))
