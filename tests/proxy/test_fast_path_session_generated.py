"""Generated session sequences over ``notes`` (ids 6100-6999), run statement by statement on the
proxy and on the oracle MariaDB of tests/proxy/test_wire_differential.py through the same client,
and compared at every step: the rows (or the error number), the warning count and the status
flags (in a transaction, autocommit). The point selects and writes of a sequence take the fast
path on its second run (the first caches their plans); the statements between them (ROW_COUNT(),
SHOW WARNINGS, BEGIN, SET autocommit...) take the normal path, which must see what the fast path
left in the session.

Two clients: PyMySQL (text protocol) and mysql-connector with ``prepared=True`` for the
statements with parameters (binary protocol).

Sequence ``i`` of a run is the generator's sequence ``i`` of ``SEED``: ``SHARDGATE_SESSION_SEED`` /
``SHARDGATE_SESSION_COUNT`` / ``SHARDGATE_SESSION_STEPS`` override them (many seeds offline; the
committed bound keeps this file under a few seconds).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from typing import Any

import mysql.connector
import pymysql
import pytest

from tests.proxy.test_wire_differential import NOTES_DDL, ORACLE_DB, _direct, wire  # noqa: F401  (the fixture)
from vschema.vindexes.hash import hash_uint64

SEED = int(os.environ.get("SHARDGATE_SESSION_SEED", "20261125"))
COUNT = int(os.environ.get("SHARDGATE_SESSION_COUNT", "6"))
STEPS = int(os.environ.get("SHARDGATE_SESSION_STEPS", "40"))
# With the statements of the divergences still known (the report of the branch fastfuzz lists them:
# ROW_COUNT() / FOUND_ROWS() after the normal path's statements, a SELECT's warning count from the
# normal path, SELECT 1 opening a transaction under autocommit=0, a write to several shards failing
# on one inside a transaction): offline only.
KNOWN = os.environ.get("SHARDGATE_SESSION_KNOWN", "0") == "1"

RESET = "delete from notes where id >= 6100 and id < 7000"
LONG = "this body is far longer than forty characters, so it is cut"

# (sql with %s placeholders, its parameters)
Statement = tuple[str, tuple[Any, ...]]


class Generator:
    """One sequence's statements: a seeded walk over point reads and writes of a few ids on each
    shard, the statements that read what they leave (ROW_COUNT(), FOUND_ROWS(), the warning and
    error counts, SHOW WARNINGS / ERRORS), transactions, autocommit and user variables."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        start = 6100 + rng.randrange(0, 800)
        ids = range(start, start + 100)
        self.low = [i for i in ids if hash_uint64(i)[0] < 0x80][:3]  # on -80
        self.high = [i for i in ids if hash_uint64(i)[0] >= 0x80][:3]  # on 80-
        self.ids = self.low + self.high

    def _id(self) -> int:
        return self.rng.choice(self.ids)

    def _two(self) -> tuple[int, int]:
        r = self.rng.random()
        if r < 0.4 or not KNOWN:  # one shard
            side = self.rng.choice([self.low, self.high])
            a, b = self.rng.sample(side, 2)
        else:  # both shards
            a, b = self.rng.choice(self.low), self.rng.choice(self.high)
            if r < 0.7:
                a, b = b, a
        return a, b

    def _n(self) -> Any:
        return self.rng.choice([1, 2, 7, -3, "abc", "12x", None, 2147483648])

    def _body(self) -> Any:
        return self.rng.choice(["b", "short body", LONG, None])

    def _amount(self) -> Any:
        return self.rng.choice([None, 1, "2.50", "1.005", "abc", 123456789])

    def _row(self, i: int) -> tuple[Any, ...]:
        n = self._n() if self.rng.random() < 0.3 else self.rng.randrange(0, 9)
        body = self._body() if self.rng.random() < 0.5 else f"b{i}"
        amount = self._amount() if self.rng.random() < 0.3 else None
        return (i, f"g{i}", n, amount, body)

    def statement(self) -> Statement:
        rng = self.rng
        kinds: list[tuple[float, Callable[[], Statement]]] = [
            (12, self._select), (10, self._write), (8, self._session_read), (6, self._diagnostics),
            (4, self._transaction), (2, self._user_variable), (1, self._sql_mode),
        ]
        pick = rng.random() * sum(w for w, _ in kinds)
        for weight, make in kinds:
            pick -= weight
            if pick < 0:
                return make()
        return kinds[0][1]()

    def _select(self) -> Statement:
        rng, i = self.rng, self._id()
        return rng.choice([*([] if not KNOWN else [  # named by a parameter: prepared, the normal path's
            ("select id, cast(%s as signed) from notes where id = %s", ("abc", i)),
            ("select id, n + %s from notes where id = %s", ("1x", i)),
        ]),
            ("select id, n, amount, body from notes where id = %s", (i,)),
            ("select id, n from notes where id = %s", (i,)),
            ("select id, cast('abc' as signed) from notes where id = %s", (i,)),
            ("select id, n + '1x' from notes where id = %s", (i,)),
            ("select id\nfrom notes where id = %s", (i,)),
            *([] if not KNOWN else [("select count(*) from notes where id = %s", (i,))]),  # FOUND_ROWS() 0 when none
            ("select id, body from notes where id = %s for update", (i,)),
            ("select id, n from notes where id in (%s, %s) order by id", self._two()),
            ("select 'a', %s from notes where id = %s", ("b", i)),
        ])

    def _write(self) -> Statement:
        rng, i = self.rng, self._id()
        a, b = self._two()
        return rng.choice([
            ("insert into notes (id, owner, n, amount, body) values (%s, %s, %s, %s, %s)", self._row(i)),
            ("insert into notes (id, owner, n, amount, body) values (%s, %s, %s, %s, %s)", self._row(i)),
            ("insert into notes (id, owner, n, amount, body) values (%s, %s, %s, %s, %s), (%s, %s, %s, %s, %s)",
             self._row(a) + self._row(b)),
            ("insert ignore into notes (id, owner, n, amount, body) values (%s, %s, %s, %s, %s)", self._row(i)),
            ("update notes set n = n + 1 where id = %s", (i,)),
            ("update notes set n = %s where id = %s", (self._n(), i)),
            ("update notes set body = %s where id = %s", (self._body(), i)),
            ("update notes set amount = %s where id = %s", (self._amount(), i)),
            ("update notes set n = n + 1 where id in (%s, %s)", (a, b)),
            ("update notes set body = %s where id in (%s, %s)", (self._body(), a, b)),
            ("delete from notes where id = %s", (i,)),
            ("delete from notes where id in (%s, %s)", (a, b)),
        ])

    def _session_read(self) -> Statement:
        return (self.rng.choice([
            "select row_count()", "select found_rows()", "select row_count(), found_rows()", "select 1",
            "select @@warning_count", "select @@error_count", "select @@warning_count, @@error_count",
            "select @@in_transaction", "select @@autocommit, @@in_transaction",
        ]), ())

    def _diagnostics(self) -> Statement:
        return (self.rng.choice([
            "show warnings", "show errors", "show count(*) warnings", "show count(*) errors",
            "show warnings limit 1",
        ]), ())

    def _transaction(self) -> Statement:
        return (self.rng.choice([
            "begin", "start transaction", "commit", "rollback", "set autocommit = 0", "set autocommit = 1",
        ]), ())

    def _user_variable(self) -> Statement:
        rng = self.rng
        return rng.choice([
            ("set @v = %s", (rng.choice([1, 2, "abc"]),)),
            ("select @v", ()),
            ("select @v, id from notes where id = %s", (self._id(),)),
        ])

    def _sql_mode(self) -> Statement:
        return (self.rng.choice(["set sql_mode = ''", "set sql_mode = DEFAULT"]), ())

    def sequence(self, steps: int) -> list[Statement]:
        # "select 1": FOUND_ROWS() of a new MariaDB session is the last one's on its thread (the
        # thread cache keeps it), no value to compare
        body = [(RESET, ()), ("set sql_mode = DEFAULT", ()), ("set autocommit = 1", ()), ("select 1", ())]
        body += [self.statement() for _ in range(steps)]
        return [*body, ("rollback", ()), ("set autocommit = 1", ())]  # no lock held after it


def sequences(seed: int, count: int, steps: int) -> Iterator[tuple[int, list[Statement]]]:
    for k in range(count):
        yield k, Generator(random.Random(f"{seed}:{k}")).sequence(steps)


# -- the clients --------------------------------------------------------------------------------

Outcome = tuple[Any, ...]


class PyMySQLSide:
    def __init__(self, conn: pymysql.connections.Connection) -> None:
        self.conn: Any = conn  # its _result and server_status: no typed attributes

    def run(self, sql: str, params: tuple[Any, ...]) -> Outcome:
        conn = self.conn
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params or None)
                rows = cur.fetchall() if cur.description else cur.rowcount
                return rows, conn._result.warning_count, conn.server_status & 0x03
        except pymysql.err.MySQLError as e:
            return "error", e.args[0], conn.server_status & 0x03

    def close(self) -> None:
        self.conn.close()


class ConnectorSide:
    """mysql-connector (pure): statements with parameters prepared (COM_STMT_EXECUTE)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.status = 0
        handle = conn._handle_server_status

        def seen(flags: int) -> None:  # the connector keeps only the in-transaction flag
            self.status = flags & 0x03
            handle(flags)

        conn._handle_server_status = seen

    def run(self, sql: str, params: tuple[Any, ...]) -> Outcome:
        prepared = bool(params)
        try:
            cur = self.conn.cursor(prepared=prepared)
            try:
                cur.execute(sql.replace("%s", "?") if prepared else sql, params or None)
                rows = [tuple(r) for r in cur.fetchall()] if cur.description else cur.rowcount
                return rows, cur.warning_count, self.status
            finally:
                cur.close()
        except mysql.connector.Error as e:
            return "error", e.errno, self.status

    def close(self) -> None:
        self.conn.close()


def _pymysql(host: str, port: int, user: str, password: str, db: str) -> PyMySQLSide:
    return PyMySQLSide(pymysql.connect(host=host, port=port, user=user, password=password, database=db,
                                       autocommit=True, charset="utf8mb4"))


def _connector(host: str, port: int, user: str, password: str, db: str) -> ConnectorSide:
    return ConnectorSide(mysql.connector.connect(host=host, port=port, user=user, password=password, database=db,
                                                 autocommit=True, use_pure=True, charset="utf8mb4",
                                                 collation="utf8mb4_general_ci"))


CLIENTS = {"pymysql": _pymysql, "connector": _connector}


def _as_commerce(value: Any) -> Any:
    """The oracle's outcome with its database named as the proxy's keyspace (in messages)."""
    if isinstance(value, str):
        return value.replace("`wire_oracle`.", "`commerce`.")
    if isinstance(value, tuple | list):
        return type(value)(_as_commerce(v) for v in value)
    return value


def _render(steps: list[Statement]) -> str:
    return "\n".join(f"  {sql!r} {params!r}" for sql, params in steps)


def divergence(wire: Any, client: str, steps: list[Statement]) -> str | None:  # noqa: F811
    """The first step whose outcome on the proxy is not the oracle's, with the sequence up to it."""
    make = CLIENTS[client]
    ep = wire.lookup_ep

    def both() -> tuple[Any, Any]:
        return (make(wire.proxy.host, wire.proxy.port, "root", "", "commerce"),
                make(ep.host, ep.port, ep.user, ep.password, ORACLE_DB))

    proxy, oracle = both()
    try:
        for sql, params in steps:  # plans cached, the same rows before on both sides
            proxy.run(sql, params)
            oracle.run(sql, params)
    finally:
        proxy.close()
        oracle.close()
    proxy, oracle = both()
    try:
        for k, (sql, params) in enumerate(steps):
            ours, theirs = proxy.run(sql, params), _as_commerce(oracle.run(sql, params))
            if ours != theirs and sql != RESET:  # its count: rows an earlier divergence left
                return (f"{client} step {k}: {sql!r} {params!r}\n  proxy  {ours}\n  oracle {theirs}\n"
                        f"sequence:\n{_render(steps[:k + 1])}")
    finally:
        proxy.close()
        oracle.close()
    return None


@pytest.fixture(scope="module")
def notes_on_the_oracle(wire) -> None:  # noqa: F811
    with _direct(wire.lookup_ep, ORACLE_DB) as oc, oc.cursor() as cur:
        cur.execute(NOTES_DDL)


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_generated_sessions_leave_what_mariadb_leaves_at_every_statement(wire, notes_on_the_oracle,  # noqa: F811
                                                                         client: str) -> None:
    failures = [f"seed {SEED} sequence {k}: {found}" for k, steps in sequences(SEED, COUNT, STEPS)
                if (found := divergence(wire, client, steps)) is not None]
    report = os.environ.get("SHARDGATE_SESSION_REPORT")
    if report:  # offline runs: every divergence in full
        with open(f"{report}.{client}", "w") as f:
            f.write("\n\n".join(failures))
    assert not failures, "\n\n".join(failures)
