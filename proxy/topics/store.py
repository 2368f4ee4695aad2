"""Everything the proxy does to a topic's tables on its shard, as SQL over its own connections.

The connections come from pools of the topics service's own (never the sessions'), set once to
READ COMMITTED: the sequencer's scan must see every row committed before it and lock nothing
but the rows it sequences, and the purge must take no gap locks (a gap lock at the low end of
an index would block publishers' inserts). Every connection is returned in a ``finally``.

The mark's two writers, the direct publish (``execute_direct``, its SQL from
``proxy.topics.direct``) and the sequencer pass (``sequence``), are the heart of ordering; see
``proxy.topics.sequencer`` for why their result is one order with no late arrivals.

Whether a row has its id is always tested on ``message_id`` (NULL until the pass, for rows not
published directly), never on ``seq`` or ``publish_time``: those are ``UNSEQUENCED_MS`` (0) and
``UNSEQUENCED_SEQ`` (-1) before the pass in the current layout (the pass's UPDATE then runs in place, ``proxy.topics.schema``)
and NULL in logs created before it; every statement here reads both layouts the same.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.engine.result import Result, decode_value
from proxy.errors import CR_MALFORMED_PACKET, ER_LOCK_WAIT_TIMEOUT, ER_NO_SUCH_TABLE, ProxyError
from proxy.pools import ShardConnection, ShardPool
from proxy.schema_tracker import COLUMNS_QUERY, tables_from_rows
from proxy.topics import direct, ids
from proxy.topics.errors import MessageTooLarge, PointerConflict, TopicExists, TopicNotFound
from proxy.topics.names import META_TABLE, log_table
from proxy.topics.schema import (
    META_DDL,
    NOW_MS,
    capped_read_sql,
    first_id_at_sql,
    log_ddl,
    properties_json,
    sql_string,
    view_ddl,
)
from sqltext.quoting import bytes_literal, quote_identifier

if TYPE_CHECKING:
    from vschema.tracked_schema import TableSchema

logger = logging.getLogger(__name__)

SETTINGS = {"tx_isolation": "'READ-COMMITTED'", "innodb_lock_wait_timeout": "10", "lock_wait_timeout": "10"}
PASS_LIMIT = 5000  # rows per sequencer pass (one UPDATE); a backlog takes several passes
PURGE_BATCH = 1000
CAS_ATTEMPTS = 50
ADMIN_LOCK_WAIT_S = 10


def rows_of(res: Result) -> list[tuple[Any, ...]]:
    return [tuple(decode_value(f, v) for f, v in zip(res.fields, row, strict=True)) for row in res.rows]


@dataclass(frozen=True, slots=True)
class TopicRow:
    """A topic's metadata row."""

    name: str
    generation: int
    ttl_seconds: int
    properties: dict[str, str]
    columns: list[str]
    last_ms: int
    last_seq: int
    messages: int
    bytes: int
    purged: int
    created_ms: int

    @property
    def live(self) -> bool:
        return self.generation > 0

    @property
    def last_id(self) -> str | None:
        return ids.make_id(self.last_ms, self.last_seq) if self.last_seq >= 0 else None


_META_COLS = "name, generation, ttl_seconds, properties, columns, last_ms, last_seq, messages, bytes, purged, created_ms"


def _topic_row(r: tuple[Any, ...]) -> TopicRow:
    return TopicRow(
        name=r[0], generation=int(r[1]), ttl_seconds=int(r[2]), properties=json.loads(r[3] or "{}"),
        columns=json.loads(r[4] or "[]"), last_ms=int(r[5]), last_seq=int(r[6]), messages=int(r[7]),
        bytes=int(r[8]), purged=int(r[9]), created_ms=int(r[10]),
    )  # fmt: skip


async def execute_direct(
    sc: ShardConnection, script: str, quoted_log: str, publishers: int = 1, fed: bool = False
) -> tuple[list[Result], bool, Result | None]:
    """Run a direct publish's multi-statement (``proxy.topics.direct``) of ``publishers`` INSERTs
    into ``quoted_log`` on ``sc``, a connection outside any transaction: each INSERT's own result,
    whether their rows took their ids (else they wait for a pass, with the log's defaults:
    ``direct.defaults_statements``), and (``fed``: the script ends with ``direct.feed_rows_sql``)
    that SELECT's answer, None when it failed (the publish stands: it ran after the COMMIT);
    or its error (any statement's before that) with nothing written: the transaction the
    script began is rolled back (the connection closed if even that fails, which makes
    MariaDB roll it back)."""
    expected = direct.results(publishers)
    rows: Result | None = None
    try:
        if fed:
            results, rows = await sc.execute_oks_then_rows(script, expected)
        else:
            results = await sc.execute_oks(script)
    except ProxyError:
        await sc.rollback_or_break()
        raise
    if len(results) != expected:
        sc.broken = True
        raise ProxyError(CR_MALFORMED_PACKET, f"Malformed packet: {len(results)} answers to a topic publish of"
                         f" {expected} statements", "HY000")
    answers = [results[direct.answer_at(j)] for j in range(publishers)]
    marked = results[direct.marked_at(publishers)].affected_rows > 0
    if not marked:
        # The rows wait for a pass: the log's defaults (direct.defaults_statements), before the answer.
        keys = [(r.insert_id, r.insert_id + r.affected_rows - 1) for r in answers if r.affected_rows > 0]
        if keys:
            try:
                for statement in direct.defaults_statements(quoted_log, keys):
                    await sc.execute(statement)
            except ProxyError as e:
                # Committed already: the rows keep NULLs, which every reader and the pass read as
                # "no id" too (the pass's UPDATE then just does not run in place).
                sc.broken = True
                logger.warning("topic publish: waiting rows kept NULL ids", extra={"log": quoted_log, "error": e.message})
    return answers, marked, rows if marked else None


def payload_statements(name: str, payloads: Sequence[bytes], columns: str, rest: str) -> list[str]:
    """``INSERT INTO <log> (columns) VALUES (<payload><rest>), ...`` of ``payloads`` in order, as
    few statements as fit one packet each (``direct.MAX_SCRIPT_BYTES``: the shard's
    max_allowed_packet, 16 MiB by default, which the hex literals, two characters a byte, reach
    from ~8 MiB of payloads). A payload whose row alone does not fit is refused
    (``MessageTooLarge``) before anything is sent."""
    head = f"INSERT INTO {quote_identifier(log_table(name))} ({columns}) VALUES "
    room = direct.MAX_SCRIPT_BYTES - len(head)
    statements: list[str] = []
    rows: list[str] = []
    size = 0
    for p in payloads:
        row = f"({bytes_literal(p)}{rest})"  # ASCII: characters are bytes
        if len(row) > room:
            raise MessageTooLarge(len(p), (room - len(rest) - 4) // 2)  # ( X' hex ' rest )
        if rows and size + 1 + len(row) > room:
            statements.append(head + ",".join(rows))
            rows, size = [], 0
        size += len(row) + (1 if rows else 0)
        rows.append(row)
    statements.append(head + ",".join(rows))
    return statements


@dataclass(frozen=True, slots=True)
class PassResult:
    count: int
    last_id: str | None
    gone: bool = False


@dataclass(frozen=True, slots=True)
class Probe:
    last_id: str | None
    unsequenced: bool
    gone: bool


class ShardTopicStore:
    """The topic tables of one shard."""

    def __init__(self, pool: ShardPool) -> None:
        self.pool = pool
        self.keyspace = pool.address.keyspace
        self.shard = pool.address.shard
        self._meta_ready = False
        # Each topic's (generation, last_ms, last_seq) as this store last read or wrote it
        # (``sequence``: the compare-and-set checks it).
        self._marks: dict[str, tuple[int, int, int]] = {}

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[ShardConnection]:
        async with self.pool.connection() as sc:
            await sc.apply_settings(SETTINGS)
            yield sc

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[ShardConnection]:
        async with self.connection() as sc, sc.transaction():
            yield sc

    async def query(self, sql: str) -> list[tuple[Any, ...]]:
        async with self.connection() as sc:
            return rows_of(await sc.execute(sql))

    # -- metadata -----------------------------------------------------------------------------
    async def ensure_meta(self) -> None:
        if not self._meta_ready:
            async with self.connection() as sc:
                await sc.execute(META_DDL)
            self._meta_ready = True

    async def topics(self) -> list[TopicRow]:
        """Every topic row of this shard, dropped ones too (none if the table is missing)."""
        try:
            rows = await self.query(f"SELECT {_META_COLS} FROM {META_TABLE} ORDER BY name")
        except ProxyError as e:
            if e.code == ER_NO_SUCH_TABLE:
                return []
            raise
        return [_topic_row(r) for r in rows]

    async def topic(self, name: str) -> TopicRow | None:
        try:
            rows = await self.query(f"SELECT {_META_COLS} FROM {META_TABLE} WHERE name = {sql_string(name)}")
        except ProxyError as e:
            if e.code == ER_NO_SUCH_TABLE:
                return None
            raise
        return _topic_row(rows[0]) if rows else None

    @asynccontextmanager
    async def admin_lock(self, name: str) -> AsyncIterator[ShardConnection]:
        """Serialises admin operations on one topic across proxies (a MariaDB named lock,
        released with the connection if this process dies)."""
        lock = sql_string(f"shardgate_topic:{self.keyspace}:{name}")
        async with self.connection() as sc:
            got = rows_of(await sc.execute(f"SELECT GET_LOCK({lock}, {ADMIN_LOCK_WAIT_S})"))
            if not got or got[0][0] != 1:
                raise ProxyError(ER_LOCK_WAIT_TIMEOUT, f"Lock wait timeout exceeded on topic {name} (another admin operation)", "HY000")
            try:
                yield sc
            finally:
                try:
                    await sc.execute(f"SELECT RELEASE_LOCK({lock})")
                except ProxyError:
                    sc.broken = True

    async def create(
        self, name: str, ttl_seconds: int, properties: dict[str, str], user_definitions: Sequence[str],
        user_columns: Sequence[str], if_not_exists: bool = False,
    ) -> TopicRow | None:
        """Create the topic (a new generation if it existed before); None if it exists and
        ``if_not_exists``. Ids continue after the previous generation's last one."""
        await self.ensure_meta()
        now = int(time.time() * 1000)
        async with self.admin_lock(name) as sc:
            old = rows_of(await sc.execute(
                f"SELECT generation FROM {META_TABLE} WHERE name = {sql_string(name)}"))
            if old and int(old[0][0]) > 0:
                if if_not_exists:
                    return None
                raise TopicExists(self.keyspace, name)
            generation = -int(old[0][0]) + 1 if old else 1
            table, view = quote_identifier(log_table(name)), quote_identifier(name)
            # A crash half-way through an earlier create/drop may have left the view behind: it
            # reads the log table. A table or a view of the user's with that name stays: 1050.
            if await self._name_taken(sc, name):
                raise TopicExists(self.keyspace, name)
            await sc.execute(f"DROP VIEW IF EXISTS {view}")
            await sc.execute(f"DROP TABLE IF EXISTS {table}")
            await sc.execute(log_ddl(name, user_definitions))
            try:
                await sc.execute(view_ddl(name, user_columns, ttl_seconds))
                props, cols = sql_string(properties_json(properties)), sql_string(json.dumps(list(user_columns)))
                await sc.execute(
                    f"INSERT INTO {META_TABLE} (name, generation, ttl_seconds, properties, columns, created_ms,"
                    f" updated_ms) VALUES ({sql_string(name)}, {generation}, {ttl_seconds}, {props}, {cols}, {now},"
                    f" {now}) ON DUPLICATE KEY UPDATE generation = VALUES(generation), ttl_seconds ="
                    f" VALUES(ttl_seconds), properties = VALUES(properties), columns = VALUES(columns), messages = 0,"
                    f" bytes = 0, purged = 0, created_ms = VALUES(created_ms), updated_ms = VALUES(updated_ms)"
                )
            except BaseException:
                await sc.execute(f"DROP VIEW IF EXISTS {view}")
                await sc.execute(f"DROP TABLE IF EXISTS {table}")
                raise
        logger.info("topic created", extra={"keyspace": self.keyspace, "shard": self.shard, "topic": name,
                                            "generation": generation, "ttl_seconds": ttl_seconds})
        return await self.topic(name)

    @staticmethod
    async def _name_taken(sc: ShardConnection, name: str) -> bool:
        """Whether the shard's database has a table or a view named ``name`` that is not a
        topic's view (one over its log table, ``_tms_<name>``)."""
        rows = rows_of(await sc.execute(
            "SELECT t.TABLE_TYPE, v.VIEW_DEFINITION FROM information_schema.TABLES t LEFT JOIN information_schema.VIEWS v"
            " ON v.TABLE_SCHEMA = t.TABLE_SCHEMA AND v.TABLE_NAME = t.TABLE_NAME"
            f" WHERE t.TABLE_SCHEMA = DATABASE() AND t.TABLE_NAME = {sql_string(name)}"
            f" AND BINARY t.TABLE_NAME = {sql_string(name)}"))
        log = quote_identifier(log_table(name))
        return any(r[0] != "VIEW" or log not in str(r[1] or "") for r in rows)

    async def drop(self, name: str, if_exists: bool = False) -> bool:
        """Drop the topic: its generation is negated (CDAP), its tables dropped."""
        await self.ensure_meta()
        async with self.admin_lock(name) as sc:
            row = rows_of(await sc.execute(f"SELECT generation FROM {META_TABLE} WHERE name = {sql_string(name)}"))
            if not row or int(row[0][0]) <= 0:
                if if_exists:
                    return False
                raise TopicNotFound(self.keyspace, name)
            await sc.execute(
                f"UPDATE {META_TABLE} SET generation = -generation, messages = 0, bytes = 0,"
                f" updated_ms = {int(time.time() * 1000)} WHERE name = {sql_string(name)}"
            )
            await sc.execute(f"DROP VIEW IF EXISTS {quote_identifier(name)}")
            await sc.execute(f"DROP TABLE IF EXISTS {quote_identifier(log_table(name))}")
        logger.info("topic dropped", extra={"keyspace": self.keyspace, "shard": self.shard, "topic": name})
        return True

    async def set_properties(self, name: str, ttl_seconds: int, properties: dict[str, str]) -> TopicRow:
        """New TTL and properties (the view is replaced: the new TTL applies at once)."""
        async with self.admin_lock(name) as sc:
            rows = rows_of(await sc.execute(
                f"SELECT generation, columns FROM {META_TABLE} WHERE name = {sql_string(name)}"))
            if not rows or int(rows[0][0]) <= 0:
                raise TopicNotFound(self.keyspace, name)
            columns = json.loads(rows[0][1] or "[]")
            await sc.execute(
                f"UPDATE {META_TABLE} SET ttl_seconds = {int(ttl_seconds)},"
                f" properties = {sql_string(properties_json(properties))}, updated_ms = {int(time.time() * 1000)}"
                f" WHERE name = {sql_string(name)}"
            )
            await sc.execute(view_ddl(name, columns, ttl_seconds))
        row = await self.topic(name)
        assert row is not None
        return row

    # -- sequencing ---------------------------------------------------------------------------
    async def sequence(self, name: str) -> PassResult:
        """One sequencer pass: give the committed, unsequenced rows (in insert order) the next
        ids after the topic's high-water mark, atomically with the mark's update.

        (1) One consistent read (READ COMMITTED: it neither waits for nor locks an open
        transaction's rows) of the rows committed without id, and the shard's clock. (2) One
        UPDATE that sets their ids *and* moves the mark, on the condition that the mark (and the
        topic's generation) is still the one this store last read or wrote (compare-and-set): it
        locks the metadata row, so passes and direct publishes (``proxy.topics.direct``, which
        hold that lock from their first statement to their commit) of every proxy take ids one
        at a time, each strictly after the mark the previous one left. Keeping the mark between
        passes saves a round trip while this store is the only one moving it: reading it in the
        same SELECT as the waiting rows, through a join grouped by the mark's row, cost the shard
        ~150-200 µs more per pass and the proxy ~80 µs (measured alternately on this machine,
        4-row passes). (3) When that compare-and-set lost (another proxy's pass, a direct
        publish) or no mark is remembered (a direct publish through this process forgot it), the
        pass reads the mark under its row lock (``begin; SELECT ... FOR UPDATE``) and updates
        in that transaction, reading the waiting rows again under the lock: it cannot lose, so
        passes never starve however often direct publishes move the mark. Rows are reached by primary key only (FORCE INDEX): a scan
        would lock, and wait for, the rows of open transactions."""
        table = quote_identifier(log_table(name))
        for _ in range(CAS_ATTEMPTS):
            async with self.connection() as sc:
                waiting = await self._waiting(sc, table)
                if waiting is None:
                    # Nothing waits: answer the mark as the shard has it (another proxy's pass or
                    # a direct publish may have moved it: this process's followers wake for it).
                    fresh = await self._read_mark(sc, name)
                    if fresh is None:
                        return PassResult(0, None, gone=True)
                    return PassResult(0, ids.make_id(fresh[1], fresh[2]) if fresh[2] >= 0 else None)
                mark = self._marks.get(name)
                if mark is not None:
                    done = await self._give_ids(sc, name, table, mark, *waiting)
                    if done is not None:
                        return done
                    self._marks.pop(name, None)  # another pass, a direct publish or a drop moved it
                sc.defer_begin("begin", lambda: None)  # sent with the locking read
                try:
                    locked = await self._read_mark(sc, name, lock=True)
                    if locked is not None:
                        # Read again under the lock: no other writer gives ids now, so these are
                        # exactly the rows waiting (those read before may have got ids meanwhile).
                        waiting = await self._waiting(sc, table)
                        if waiting is None:
                            done = PassResult(0, ids.make_id(locked[1], locked[2]) if locked[2] >= 0 else None)
                        else:
                            done = await self._give_ids(sc, name, table, locked, *waiting)
                except BaseException:
                    await sc.rollback_or_break()
                    raise
                await sc.execute("commit")
                if locked is None:
                    return PassResult(0, None, gone=True)
                if done is not None:
                    return done
        raise ProxyError(ER_LOCK_WAIT_TIMEOUT, f"topic {name}: sequencer pass lost {CAS_ATTEMPTS} races in a row", "HY000")

    @staticmethod
    async def _waiting(sc: ShardConnection, table: str) -> tuple[int, list[int], int] | None:
        """The shard's clock, and the committed rows waiting for ids (their keys in insert order,
        their payload bytes), in one consistent read; None: none waits. One row comes back: the
        keys as one string (decoding thousands of rows in Python would cost more than the pass)."""
        rows = rows_of(await sc.execute(
            f"SELECT {NOW_MS}, GROUP_CONCAT(_pk ORDER BY _pk SEPARATOR ','), SUM(payload_bytes) FROM"
            f" (SELECT _pk, payload_bytes FROM {table} FORCE INDEX (message_id) WHERE message_id IS NULL"
            f" AND pending = 0 ORDER BY _pk LIMIT {PASS_LIMIT}) t"))
        if not rows[0][1]:
            return None
        return int(rows[0][0]), [int(pk) for pk in rows[0][1].split(",")], int(rows[0][2] or 0)

    async def _give_ids(
        self, sc: ShardConnection, name: str, table: str, mark: tuple[int, int, int], now_ms: int, pks: list[int],
        added: int,
    ) -> PassResult | None:
        """The pass's UPDATE: ids after ``mark`` for the rows ``pks``, if the mark is still that
        (None: it is not, nothing changed)."""
        generation, last_ms, last_seq = mark
        assigned = ids.assign(last_ms, last_seq, now_ms, len(pks))
        doc = "[" + ",".join(f"[{pk},{ms},{seq}]" for pk, (ms, seq) in zip(pks, assigned, strict=True)) + "]"
        new_ms, new_seq = assigned[-1]
        res = await sc.execute(
            f"UPDATE {META_TABLE} m STRAIGHT_JOIN JSON_TABLE('{doc}', '$[*]' COLUMNS (pk BIGINT UNSIGNED"
            f" PATH '$[0]', ms BIGINT PATH '$[1]', sq INT PATH '$[2]')) j STRAIGHT_JOIN {table} b"
            f" FORCE INDEX (PRIMARY) ON b._pk = j.pk"
            f" SET b.publish_time = j.ms, b.seq = j.sq, m.last_ms = {new_ms}, m.last_seq = {new_seq},"
            f" m.messages = m.messages + {len(pks)}, m.bytes = m.bytes + {added}"
            f" WHERE m.name = {sql_string(name)} AND m.generation = {generation} AND m.last_ms = {last_ms}"
            f" AND m.last_seq = {last_seq} AND b.message_id IS NULL"
        )
        if res.affected_rows == 0:
            return None
        self._marks[name] = (generation, new_ms, new_seq)
        return PassResult(len(pks), ids.make_id(new_ms, new_seq))

    def forget_mark(self, name: str) -> None:
        """A direct publish through this process moved the topic's mark: the next pass reads it
        under its lock instead of trying the remembered one first (a compare-and-set it would lose)."""
        self._marks.pop(name, None)

    async def _read_mark(self, sc: ShardConnection, name: str, lock: bool = False) -> tuple[int, int, int] | None:
        """(generation, last_ms, last_seq) of a live topic, remembered for the next pass; None:
        gone. ``lock``: a locking read (inside the caller's transaction)."""
        rows = rows_of(await sc.execute(
            f"SELECT generation, last_ms, last_seq FROM {META_TABLE} WHERE name = {sql_string(name)}"
            + (" FOR UPDATE" if lock else "")))
        if not rows or int(rows[0][0]) <= 0:
            self._marks.pop(name, None)
            return None
        mark = (int(rows[0][0]), int(rows[0][1]), int(rows[0][2]))
        self._marks[name] = mark
        return mark

    async def probe(self, name: str) -> Probe:
        """The high-water mark and whether committed rows wait for a pass (one round trip)."""
        try:
            rows = await self.query(
                f"SELECT m.generation, m.last_ms, m.last_seq, EXISTS(SELECT 1 FROM {quote_identifier(log_table(name))}"
                f" FORCE INDEX (message_id) WHERE message_id IS NULL AND pending = 0) FROM {META_TABLE} m WHERE m.name = {sql_string(name)}"
            )
        except ProxyError as e:
            if e.code == ER_NO_SUCH_TABLE:
                return Probe(None, False, gone=True)
            raise
        if not rows or int(rows[0][0]) <= 0:
            return Probe(None, False, gone=True)
        _, last_ms, last_seq, waiting = rows[0]
        last = ids.make_id(int(last_ms), int(last_seq)) if int(last_seq) >= 0 else None
        return Probe(last, bool(int(waiting)), gone=False)

    # -- publishing (REST, client) ------------------------------------------------------------
    async def insert(
        self, name: str, payloads: Sequence[bytes], pointer: int | None = None, pending: bool = False,
    ) -> int:
        """REST publishes with no ids (a pass gives them): committed now, or stored under
        ``pointer`` for its commit marker. Payloads beyond one packet's statement go as several
        INSERTs in one transaction: all stored or none, in order (``payload_statements``)."""
        if not payloads:
            return 0
        if pointer is None:
            statements = payload_statements(name, payloads, "payload", "")
        else:
            flag = 1 if pending else 0
            statements = payload_statements(name, payloads, "payload, tx_pointer, pending, stored_ms",
                                            f", {int(pointer)}, {flag}, {NOW_MS}")
        async with self.connection() as sc:
            if len(statements) == 1:
                return (await sc.execute(statements[0])).affected_rows
            async with sc.transaction():
                return sum([(await sc.execute(sql)).affected_rows for sql in statements])

    @staticmethod
    def direct_insert(name: str, payloads: Sequence[bytes]) -> direct.DirectInsert | None:
        """A REST publish as a direct publish's INSERT (``proxy.topics.direct``, sent by
        ``proxy.topics.batch``), read as an SQL publish's is (``direct.read_direct``); None when its
        script would not go as one packet, or has more than ``direct.MAX_ROWS`` messages: ``insert``
        then stores it, in as many statements as it takes."""
        head = f"INSERT INTO {quote_identifier(log_table(name))}"
        values = ",".join(f"({bytes_literal(p)})" for p in payloads)
        return direct.read_direct(f"{head} (payload) VALUES {values}", len("INSERT INTO "), len(head), name)

    async def commit_pointer(self, name: str, pointer: int, payloads: Sequence[bytes]) -> int:
        """CDAP's commit marker: ``payloads`` and everything stored under ``pointer`` become
        sequencable at once, atomically (one transaction), in the order they were stored."""
        table = quote_identifier(log_table(name))
        async with self.transaction() as sc:
            if payloads:
                for sql in payload_statements(name, payloads, "payload, tx_pointer, pending, stored_ms",
                                              f", {int(pointer)}, 1, {NOW_MS}"):
                    await sc.execute(sql)
            res = await sc.execute(f"UPDATE {table} SET pending = 0 WHERE tx_pointer = {int(pointer)} AND pending = 1")
        return res.affected_rows

    async def rollback_pointer(self, name: str, pointer: int) -> int:
        table = quote_identifier(log_table(name))
        async with self.transaction() as sc:
            res = await sc.execute(f"DELETE FROM {table} WHERE tx_pointer = {int(pointer)} AND pending = 1")
            if res.affected_rows == 0:
                done = rows_of(await sc.execute(
                    f"SELECT COUNT(*) FROM {table} WHERE tx_pointer = {int(pointer)} AND pending = 0"))
                if done and int(done[0][0]) > 0:
                    raise PointerConflict(pointer)
        return res.affected_rows

    # -- reading ------------------------------------------------------------------------------
    async def read(self, name: str, condition: str, limit: int, max_bytes: int, columns: str = "*") -> Result:
        """Sequenced, unexpired messages (the view) matching ``condition``, in id order: at most
        ``limit`` messages and ``max_bytes`` of payload, at least one (``capped_read_sql``)."""
        async with self.connection() as sc:
            return await sc.execute(capped_read_sql(name, columns, condition, limit, max_bytes))

    async def view_columns(self, names: Sequence[str]) -> dict[str, TableSchema]:
        """The columns of these topics' views, as schema tracking describes tables (by lower-cased
        name; a view missing here is missing from the answer)."""
        if not names:
            return {}
        # COLUMNS_QUERY's schema condition, narrowed to these views.
        where = "DATABASE() AND c.TABLE_NAME IN (" + ", ".join(sql_string(n) for n in names) + ")"
        async with self.connection() as sc:
            res = await sc.execute(COLUMNS_QUERY.format(db=where))
        return tables_from_rows(res.rows)

    # -- TTL ----------------------------------------------------------------------------------
    async def purge(self, name: str, ttl_seconds: int, pending_max_age_s: int) -> int:
        """Delete expired messages (topic TTL or their own), in batches, under a named lock so
        only one proxy purges a topic at a time; returns how many. Stored-but-never-published
        rows older than ``pending_max_age_s`` go too (a REST transaction past its lifetime)."""
        table = quote_identifier(log_table(name))
        lock = sql_string(f"shardgate_topic_purge:{self.keyspace}:{name}")
        total = 0
        async with self.connection() as sc:
            got = rows_of(await sc.execute(f"SELECT GET_LOCK({lock}, 0)"))
            if not got or got[0][0] != 1:
                return 0
            try:
                while True:
                    async with sc.transaction():
                        rows = rows_of(await sc.execute(
                            # Older than the TTL: ids below the first one at the cut-off (rows
                            # waiting for a pass have none, whatever their publish_time).
                            f"(SELECT _pk, payload_bytes FROM {table} FORCE INDEX (message_id) WHERE message_id"
                            f" < {first_id_at_sql(f'{NOW_MS} - {int(ttl_seconds) * 1000}')}"
                            f" ORDER BY message_id LIMIT {PURGE_BATCH})"
                            f" UNION (SELECT _pk, payload_bytes FROM {table} FORCE INDEX (expire_ms) WHERE expire_ms <= {NOW_MS}"
                            f" ORDER BY expire_ms LIMIT {PURGE_BATCH})"))
                        if rows:
                            pks = ",".join(str(int(r[0])) for r in rows)
                            await sc.execute(f"DELETE FROM {table} WHERE _pk IN ({pks})")
                            freed = sum(int(r[1] or 0) for r in rows)
                            await sc.execute(
                                f"UPDATE {META_TABLE} SET messages = GREATEST(messages - {len(rows)}, 0),"
                                f" bytes = GREATEST(bytes - {freed}, 0), purged = purged + {len(rows)}"
                                f" WHERE name = {sql_string(name)}")
                    total += len(rows)
                    if len(rows) < PURGE_BATCH:
                        break
                # Found by a consistent read, deleted by key: a locking scan would wait for
                # every open transaction's fresh rows.
                stale = rows_of(await sc.execute(
                    f"SELECT _pk FROM {table} FORCE INDEX (tx_pointer) WHERE tx_pointer IS NOT NULL AND pending = 1"
                    f" AND stored_ms < {NOW_MS} -"
                    f" {int(pending_max_age_s) * 1000} LIMIT {PURGE_BATCH}"))
                if stale:
                    await sc.execute(f"DELETE FROM {table} WHERE _pk IN ({','.join(str(int(r[0])) for r in stale)})"
                                     " AND pending = 1")
            finally:
                try:
                    await sc.execute(f"SELECT RELEASE_LOCK({lock})")
                except ProxyError:
                    sc.broken = True
        return total

    async def recent_stats(self, name: str) -> tuple[int | None, int | None, int]:
        """(oldest, newest publish time of visible messages, messages sequenced in the last 60 s)."""
        view, log = quote_identifier(name), quote_identifier(log_table(name))
        # Through the id index (ids sort by publish time first): the same read for logs of both layouts.
        rows = await self.query(
            f"SELECT (SELECT publish_time FROM {view} ORDER BY message_id LIMIT 1),"
            f" (SELECT publish_time FROM {view} ORDER BY message_id DESC LIMIT 1),"
            f" (SELECT COUNT(*) FROM {log} FORCE INDEX (message_id) WHERE message_id >= {first_id_at_sql(f'{NOW_MS} - 60000')})"
        )
        oldest, newest, recent = rows[0]
        return (None if oldest is None else int(oldest)), (None if newest is None else int(newest)), int(recent)
