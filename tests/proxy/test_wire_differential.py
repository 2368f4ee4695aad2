"""Wire-level differential testing: generated statements (tests/engine/test_differential.py's
generator) sent through a running proxy process with real clients -- PyMySQL and
mysqlclient (text protocol), mysql-connector with ``prepared=True`` (binary protocol) --
and, with the same client, to the oracle (one plain MariaDB database holding the same
rows). Compared: the rows as the client converts them (so a DECIMAL column announced as
a DOUBLE shows), the column names exactly as MySQL spells them, the column types and
decimals the client exposes, and for statements MySQL rejects, the error number.

The data is loaded through the proxy (INSERTs with a VARCHAR vindex, an xxhash vindex and
an owned consistent_lookup, reference-table writes). The proxy runs over the session's
shards with a cluster file of its own that adds the test tables to the vschema.

Case ``i`` is the generator's case ``i`` of ``SEED``; ``SHARDGATE_WIRE_SEED`` /
``SHARDGATE_WIRE_COUNT`` override them (the count is per client).
"""

from __future__ import annotations

import datetime
import json
import math
import os
import random
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import mysql.connector
import MySQLdb
import pymysql
import pymysql.constants
import pytest

from rewriter.collation import general_ci_key
from tests.engine.conftest import ITEMS_DDL
from tests.engine.dataset import generated_rows
from tests.engine.test_differential import LABELS, generate, oracle_sql
from tests.engine.wide_dataset import (
    ACCOUNTS_DDL,
    CODE_IDX_DDL,
    ENTRIES_DDL,
    REGION_ROWS,
    REGIONS_DDL,
    account_rows,
    add_to_vschema,
    entry_rows,
)
from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy

SEED = int(os.environ.get("SHARDGATE_WIRE_SEED", "20261124"))
COUNT = int(os.environ.get("SHARDGATE_WIRE_COUNT", "60"))
ORACLE_DB = "wire_oracle"
QTY_LABELS_DDL = "CREATE TABLE IF NOT EXISTS qty_labels (qty INT PRIMARY KEY, label VARCHAR(20))"
GRP_LABELS_DDL = "CREATE TABLE IF NOT EXISTS grp_labels (grp VARCHAR(20) PRIMARY KEY, label VARCHAR(20))"
NOTES_DDL = """CREATE TABLE IF NOT EXISTS notes (
  id BIGINT NOT NULL PRIMARY KEY, owner VARCHAR(20), n INT NOT NULL DEFAULT 0, amount DECIMAL(8,2),
  body VARCHAR(40), UNIQUE KEY notes_owner_body (owner, body)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""
COMMERCE_TABLES = {"items": ITEMS_DDL, "grp_labels": GRP_LABELS_DDL, "accounts": ACCOUNTS_DDL,
                   "entries": ENTRIES_DDL, "regions": REGIONS_DDL, "notes": NOTES_DDL}


def _vschema_files(config_path: Path, into: Path) -> Path:
    """A copy of the session cluster's files whose vschemas name the test tables."""
    shutil.copytree(config_path.parent, into)
    docs = {}
    for ks in ("commerce", "lookup"):
        f = into / f"{ks}_vschema.json"
        docs[ks] = json.loads(f.read_text())
    docs["commerce"]["tables"]["items"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
    docs["commerce"]["tables"]["grp_labels"] = {"type": "reference"}
    docs["commerce"]["tables"]["notes"] = {"column_vindexes": [{"column": "id", "name": "hash"}]}
    docs["lookup"]["tables"]["qty_labels"] = {}
    add_to_vschema(docs)
    for ks, doc in docs.items():
        (into / f"{ks}_vschema.json").write_text(json.dumps(doc, indent=1))
    # The live vschema (proxy/live_vschema.py) is kept in the cluster and wins over the
    # files once seeded: this proxy keeps its own on another shard, so that the session's
    # other proxies never see these tables, nor this one theirs.
    cluster_file = into / config_path.name
    cluster_file.write_text(cluster_file.read_text() + '\nvschema_store: {keyspace: lookup, shard: "0"}\n')
    return cluster_file


def _direct(ep: Any, database: str | None = None) -> pymysql.connections.Connection:
    return pymysql.connect(host=ep.host, port=ep.port, user=ep.user, password=ep.password,
                           database=database if database is not None else ep.database, autocommit=True,
                           charset="utf8mb4")


@dataclass
class Wire:
    proxy: ProxyProcess
    lookup_ep: Any


@pytest.fixture(scope="module")
def wire(local_cluster, tmp_path_factory) -> Iterator[Wire]:
    eps = local_cluster.endpoints
    commerce = [ep for (ks, _s), ep in eps.items() if ks == "commerce"]
    lookup_ep = next(ep for (ks, _s), ep in eps.items() if ks == "lookup")
    # empty tables on the shards first: the proxy's schema tracker reads them at start
    for ep in commerce:
        with _direct(ep) as c, c.cursor() as cur:
            for name, ddl in COMMERCE_TABLES.items():
                cur.execute(ddl)
                cur.execute(f"DELETE FROM {name}")
    with _direct(lookup_ep) as c, c.cursor() as cur:
        for ddl, name in ((QTY_LABELS_DDL, "qty_labels"), (CODE_IDX_DDL, "entries_code_idx")):
            cur.execute(ddl)
            cur.execute(f"DELETE FROM {name}")
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {ORACLE_DB}")
    work = tmp_path_factory.mktemp("wire")
    cfg = _vschema_files(local_cluster.config.path, work / "files")
    proxy = start_proxy(cfg, eps, work / "proxy.log")
    try:
        statements = ["insert into items (id, customer_id, grp, name, qty, price, score) values "
                      + ", ".join(generated_rows()[i:i + 250]) for i in range(0, 3000, 250)]
        statements.append(f"insert into {LABELS} values "
                          + ", ".join(f"({q}, 'q{q % 4}')" for q in range(0, 25, 2)))
        statements.append("insert into grp_labels values ('a', 'label 0'), ('c', 'label 1'), "
                          "('no items here', 'label 2')")
        statements.append("insert into regions (region, zone, tax) values " + ", ".join(
            "(" + ", ".join("NULL" if v is None else f"'{v}'" for v in r) + ")" for r in REGION_ROWS))
        for table, cols, rows in (
            ("accounts", "code, customer_id, region, balance, rate, opened, last_seen", account_rows()),
            ("entries", "id, customer_id, account_code, amount, kind, booked", entry_rows()),
        ):
            statements += [f"insert into {table} ({cols}) values " + ", ".join(rows[i:i + 200])
                           for i in range(0, len(rows), 200)]
        with proxy.connect("commerce", autocommit=True) as pc, pc.cursor() as pcur, \
                _direct(lookup_ep, ORACLE_DB) as oc, oc.cursor() as ocur:
            for name, ddl in [*COMMERCE_TABLES.items(), ("qty_labels", QTY_LABELS_DDL)]:
                ocur.execute(ddl)
                ocur.execute(f"DELETE FROM {name}")
            for sql in statements:
                pcur.execute(sql)
                ocur.execute(oracle_sql(sql))
        yield Wire(proxy, lookup_ep)
    finally:
        stop_proxy(proxy)


# -- the clients ----------------------------------------------------------------------------


@dataclass
class Answer:
    names: list[str]
    types: list[tuple[int, int | None]]  # (type code, decimals) as the client exposes them
    rows: list[tuple]


@dataclass
class Failure:
    code: int


Client = Callable[[str], Answer | Failure]


def _pymysql_client(host: str, port: int, user: str, password: str, db: str) -> tuple[Client, Callable[[], None]]:
    conn = pymysql.connect(host=host, port=port, user=user, password=password, database=db, autocommit=True,
                           charset="utf8mb4")

    def run(sql: str) -> Answer | Failure:
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                desc = cur.description or ()
                rows = [tuple(r) for r in cur.fetchall()]
        except pymysql.err.MySQLError as e:
            return Failure(e.args[0] if e.args and isinstance(e.args[0], int) else -1)
        return Answer([d[0] for d in desc], [(d[1], d[5]) for d in desc], rows)

    return run, conn.close


def _mysqldb_client(host: str, port: int, user: str, password: str, db: str) -> tuple[Client, Callable[[], None]]:
    conn = MySQLdb.connect(host=host, port=port, user=user, passwd=password, db=db, charset="utf8mb4",
                           autocommit=True)

    def run(sql: str) -> Answer | Failure:
        try:
            cur = conn.cursor()
            cur.execute(sql)
            desc = cur.description or ()
            rows = [tuple(r) for r in cur.fetchall()]
            cur.close()
        except MySQLdb.MySQLError as e:
            return Failure(e.args[0] if e.args and isinstance(e.args[0], int) else -1)
        return Answer([d[0] for d in desc], [(d[1], d[5]) for d in desc], rows)

    return run, conn.close


def _connector_prepared_client(host: str, port: int, user: str, password: str,
                               db: str) -> tuple[Client, Callable[[], None]]:
    conn = mysql.connector.connect(host=host, port=port, user=user, password=password, database=db,
                                   autocommit=True, use_pure=True, charset="utf8mb4",
                                   collation="utf8mb4_general_ci")

    def run(sql: str) -> Answer | Failure:
        cur = conn.cursor(prepared=True)
        try:
            cur.execute(sql)
            desc = cur.description or ()
            rows = [tuple(r) for r in cur.fetchall()] if desc else []
        except mysql.connector.Error as e:
            return Failure(e.errno if isinstance(e.errno, int) else -1)
        finally:
            cur.close()
        return Answer([d[0] for d in desc], [(d[1], None) for d in desc], rows)

    return run, conn.close


CLIENTS = {"pymysql": _pymysql_client, "mysqlclient": _mysqldb_client, "connector-prepared": _connector_prepared_client}


@pytest.fixture(scope="module", params=sorted(CLIENTS))
def clients(request, wire) -> Iterator[tuple[str, Client, Client]]:
    make = CLIENTS[request.param]
    proxy_run, close_p = make(wire.proxy.host, wire.proxy.port, "root", "", "commerce")
    ep = wire.lookup_ep
    oracle_run, close_o = make(ep.host, ep.port, ep.user, ep.password, ORACLE_DB)
    try:
        yield request.param, proxy_run, lambda sql: oracle_run(oracle_sql(sql))
    finally:
        close_p()
        close_o()


# -- comparing ------------------------------------------------------------------------------


def _norm(v: Any) -> Any:
    if isinstance(v, bytearray):
        v = bytes(v)
    if isinstance(v, bytes):
        try:
            v = v.decode()
        except UnicodeDecodeError:
            return v
    if isinstance(v, str):
        return general_ci_key(v)
    if isinstance(v, float):
        return float(f"{v:.9g}")
    return v


def _key(row: tuple) -> tuple:
    return tuple((v is None, type(v).__name__, v if v is not None else 0) for v in row)


def _places(v: float) -> int:
    text = repr(v)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 17


def _close(a: Any, b: Any) -> bool:
    """Equal, or doubles equal but for their last bits -- or for the digits the text
    protocol drops: the shards answer the proxy in text, where a DOUBLE of fixed decimals
    (STD(), AVG() of a double, computed in Compute) has only those digits, which the proxy
    encodes for a prepared statement's binary row as they are (MariaDB sends every bit)."""
    if a == b:
        return True
    if not (isinstance(a, float) and isinstance(b, float)):
        return False
    if math.isclose(a, b, rel_tol=1e-7):
        return True
    places = min(_places(a), _places(b))
    return places < 17 and round(a, places) == round(b, places)


def _rows_equal(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(len(x) == len(y) and all(_close(p, q) for p, q in zip(x, y, strict=True))
                                    for x, y in zip(a, b, strict=True))


# (MySQL's number the proxy answers, MariaDB's) for one error
SAME_ERRORS = {(1056, 1111)}  # grouping on an aggregate
NUMERIC_TYPES = {0, 4, 5, 246}  # DECIMAL, FLOAT, DOUBLE, NEWDECIMAL


def _types(a: Answer) -> list[tuple[int, int | None]]:
    """Type codes, and decimals where they mean something: MariaDB sends 39 (not fixed)
    for some computed strings where a table's column has 0, which no client reads."""
    return [(t, d if t in NUMERIC_TYPES else None) for t, d in a.types]


def differs(ours: Answer | Failure, theirs: Answer | Failure, ordered: bool) -> str | None:
    if isinstance(ours, Failure) or isinstance(theirs, Failure):
        if isinstance(ours, Failure) and isinstance(theirs, Failure) and (
                ours.code == theirs.code or (ours.code, theirs.code) in SAME_ERRORS):
            return None
        if isinstance(ours, Failure) and ours.code == 1235:
            return None  # a refusal naming the construct: counted by the caller
        return f"proxy {ours} / oracle {theirs}"
    if ours.names != theirs.names:
        return f"column names {ours.names} / {theirs.names}"
    if _types(ours) != _types(theirs):
        return f"column types {ours.types} / {theirs.types}"
    a = [tuple(_norm(v) for v in r) for r in ours.rows]
    b = [tuple(_norm(v) for v in r) for r in theirs.rows]
    if not ordered:
        a, b = sorted(a, key=_key), sorted(b, key=_key)
    if not _rows_equal(a, b):
        ca, cb = Counter(a), Counter(b)
        return (f"rows: only the proxy's {list((ca - cb).elements())[:6]}, "
                f"only the oracle's {list((cb - ca).elements())[:6]}")
    return None


# -- the tests ------------------------------------------------------------------------------

# statements MySQL answers with an error (the proxy must give the same number) or with a
# value where one might expect an error
EDGE_STATEMENTS = [
    ("select nosuch from items where id = 1", False),  # 1054
    ("select nosuch from items", False),  # 1054, scatter
    ("select i.qty from items i join items j on j.id = i.id where i.id = 3 order by nosuch", False),
    ("select qty from items a join items b on b.id = a.id where a.id = 1", False),  # 1052 ambiguous
    ("select customer_id from items i join accounts a on a.customer_id = i.customer_id limit 1", False),  # 1052
    ("select * from no_such_table", False),  # 1146
    ("select * from items wher id = 1", False),  # 1064
    ("select qty / 0, qty div 0, qty % 0 from items where id = 5", True),  # NULLs, no error
    ("select 1 / 0, cast('12abc' as signed), '3' + 4", True),
    ("select sum(qty) / 0 from items", True),
    ("select code, balance / 0 from accounts where code = 'ACC1'", True),
    ("select id, amount from entries where account_code = 'nope'", True),  # a lookup finding nothing
    ("select id, amount from entries where account_code in ('nope', 'ACC10') order by id", True),
    ("select id from entries where customer_id = 5 order by kind, id limit 3 offset 1", True),
    ("select count(*) from accounts where opened between '2020-01-01' and '2020-12-31'", True),
    ("select date_add(opened, interval 1 month), last_seen + interval 1 day from accounts "
     "where code = 'acc7' ", True),
    ("select region, count(*), sum(balance), avg(rate) from accounts group by region order by 1", True),
    ("select distinct upper(region) from accounts order by 1", True),
    ("select a.code, g.zone from accounts a left join regions g on g.region = a.region "
     "where g.region is null order by a.code", True),
    ("select e.id from entries e left join accounts a on a.code = e.account_code where a.code is null "
     "order by e.id", True),
    ("select (customer_id, kind) in ((5, 'debit'), (6, 'credit')) as t, count(*) from entries group by 1 "
     "order by 1", True),
    ("select count(distinct customer_id, kind) from entries", True),
    ("select kind, sum(amount) as s from entries group by kind having max(booked) > '2024-01-01' order by s", True),
    ("select code from accounts order by (select count(*) from entries e where e.account_code = accounts.code) "
     "desc, code limit 5", True),
    ("select d.k, d.n from (select kind as k, count(*) as n from (select kind from entries where amount < 0) x "
     "group by kind) d order by d.n desc, d.k", True),
    ("select distinct kind from entries order by booked", False),
    # a query expression in parentheses (was 1065 "Query was empty": its first word was not found)
    ("(select id, qty from items where id < 40 order by qty, id limit 3) union "
     "(select id, qty from items where id > 2990 order by id desc limit 2)", False),
    ("((select code from accounts where code = 'acc3'))", False),
    # errors MySQL names by number
    ("select id from items where nosuch = 1", False),  # 1054 in WHERE
    ("select i.id from items i join no_such_table t on t.id = i.id", False),  # 1146
    ("select id from items where id = (select id from items where customer_id = 3)", False),  # 1242
    ("select id from items union select id, qty from items", False),  # 1222
    ("select id from items where count(*) > 1", False),  # 1111
    ("select sum(qty) from items group by sum(qty)", False),  # MySQL 1056, MariaDB 1111
    ("select * from items where id = 3 union all select id from items where id = 4", False),  # 1222
    ("select 9223372036854775807 + id from items where id = 2", False),  # 1690
    ("select id from items order by 9", False),  # 1054 unknown column '9' in order clause
    ("select id, count(*) from items group by 5", False),  # 1054 in group statement
    # answers with metadata to match
    ("select * from items where id in (7, 8, 2999) order by id", True),
    ("select a.*, g.* from accounts a join regions g on g.region = a.region where a.code in ('acc1', 'ACC2', 'acc8')",
     False),
    ("select count(*), count(distinct grp), sum(price), avg(price), min(name), max(score) from items", True),
    ("select customer_id, sum(amount), avg(amount), min(booked), max(booked) from entries group by customer_id "
     "order by customer_id limit 5", True),
    ("select e.id, a.balance * 2, e.amount + a.balance, a.rate * e.amount from entries e "
     "join accounts a on a.code = e.account_code where e.customer_id = 7 order by e.id", True),
    ("select concat(code, '/', region), ifnull(opened, 'never'), if(rate > 0, 'up', 'down') from accounts "
     "where customer_id < 5 order by code", True),
]


def _run_cases(clients: tuple[str, Client, Client], cases: list[tuple[str, bool]]) -> tuple[list[str], int]:
    name, proxy, oracle = clients
    failures, refused = [], 0
    for i, (sql, ordered) in enumerate(cases):
        ours, theirs = proxy(sql), oracle(sql)
        if isinstance(ours, Failure) and ours.code == 1235:
            refused += 1
        diff = differs(ours, theirs, ordered)
        if diff is not None:
            failures.append(f"[{name} #{i}] {sql}\n  {diff}")
    return failures, refused


@pytest.mark.filterwarnings("ignore::Warning")
def test_edge_statements_answer_through_every_client_as_mariadb(clients):
    failures, _refused = _run_cases(clients, EDGE_STATEMENTS)
    assert not failures, "\n\n".join(failures)


@pytest.mark.filterwarnings("ignore::Warning")
def test_generated_statements_answer_through_every_client_as_mariadb(clients):
    offset = sorted(CLIENTS).index(clients[0]) * COUNT  # each client its own cases
    cases = [generate(SEED, offset + i) for i in range(COUNT)]
    failures, refused = _run_cases(clients, [(c.sql, c.ordered) for c in cases])
    assert not failures, f"{len(failures)} differences (seed {SEED}):\n\n" + "\n\n".join(failures)
    assert refused <= 0.1 * COUNT


def mutant(sql: str, rnd: random.Random) -> str | None:
    """``sql`` made invalid one way MySQL names by number: an unknown column (1054), an
    unknown table (1146), a syntax error (1064); None when it has nothing to change."""
    kind = rnd.choice(["column", "table", "syntax"])
    if kind == "column":
        cols = [m for m in re.finditer(r"\b(qty|grp|price|amount|balance|kind|region)\b", sql)]
        if cols:
            m = rnd.choice(cols)
            return sql[:m.start()] + m.group(1) + "_x" + sql[m.end():]
    if kind == "table":
        tabs = [m for m in re.finditer(r"\b(from|join) (items|accounts|entries|regions)\b", sql)]
        if tabs:
            m = rnd.choice(tabs)
            return sql[:m.start(2)] + m.group(2) + "_x" + sql[m.end(2):]
    words = [m for m in re.finditer(r" (where|from|order by|group by) ", sql)]
    if words:
        m = rnd.choice(words)
        return sql[:m.start()] + " " + m.group(1) + " " + m.group(1) + sql[m.end() - 1:]
    return None


@pytest.mark.filterwarnings("ignore::Warning")
def test_generated_statements_made_invalid_fail_with_mysqls_error_number(clients):
    rnd = random.Random(SEED)
    offset = sorted(CLIENTS).index(clients[0]) * COUNT
    cases = [m for i in range(COUNT // 2) if (m := mutant(generate(SEED + 1, offset + i).sql, rnd)) is not None]
    failures, _refused = _run_cases(clients, [(sql, False) for sql in cases])
    assert not failures, f"{len(failures)} differences (seed {SEED}):\n\n" + "\n\n".join(failures)


def test_values_normalise_as_the_collation_compares():
    assert _norm("Éva") == _norm("eva ") and _norm(b"B ") == _norm("b")
    assert _norm(Decimal("1.50")) == Decimal("1.5") and _norm(datetime.date(2020, 1, 1)) == datetime.date(2020, 1, 1)


PARAMETERISED = [
    ("select id, qty, price from items where id = ?", (17,)),
    ("select id, qty from items where id in (?, ?, ?) order by id", (3, 2999, 77777)),
    ("select code, balance from accounts where code = ?", ("ACC5",)),
    ("select id, amount from entries where account_code = ? order by id", ("acc10",)),
    ("select id, amount from entries where customer_id = ? and amount > ? order by id", (7, Decimal("-10.5"))),
    ("select count(*) from accounts where opened > ?", (datetime.date(2021, 6, 1),)),
    ("select count(*) from accounts where last_seen < ?", (datetime.datetime(2023, 9, 1, 12, 30),)),
    ("select id from items where grp = ? order by id limit ?", ("b", 5)),
    ("select id from items where name <=> ? order by id limit 3", (None,)),
    ("select ? + qty as a, concat(?, grp) as b from items where id = ?", (1.5, "x", 9)),
    # unaliased: MySQL names the column by the prepared text ('? + qty'; was '1.5 + qty')
    ("select ? + qty, concat(?, grp), qty from items where id = ?", (1.5, "x", 9)),
    ("select customer_id, count(*) from items where qty between ? and ? group by customer_id order by 2 desc, 1 "
     "limit 4", (3, 5)),
    ("select e.id, a.region from entries e join accounts a on a.code = e.account_code where e.customer_id = ? "
     "order by e.id", (12,)),
]


@pytest.mark.filterwarnings("ignore::Warning")
def test_prepared_statements_with_parameters_answer_as_mariadb(wire):
    ep = wire.lookup_ep
    conns = [mysql.connector.connect(host=h, port=p, user=u, password=pw, database=db, autocommit=True,
                                     use_pure=True, charset="utf8mb4", collation="utf8mb4_general_ci")
             for h, p, u, pw, db in ((wire.proxy.host, wire.proxy.port, "root", "", "commerce"),
                                     (ep.host, ep.port, ep.user, ep.password, ORACLE_DB))]
    failures = []
    try:
        for sql, params in PARAMETERISED:
            answers: list[Answer | Failure] = []
            for conn in conns:
                cur = conn.cursor(prepared=True)
                try:
                    cur.execute(sql, params)
                    desc = cur.description or ()
                    answers.append(Answer([d[0] for d in desc], [(d[1], None) for d in desc],
                                          [tuple(r) for r in cur.fetchall()]))
                except mysql.connector.Error as e:
                    answers.append(Failure(e.errno))
                finally:
                    cur.close()
            diff = differs(answers[0], answers[1], " order by " in sql)
            if diff is not None:
                failures.append(f"{sql} {params}\n  {diff}")
    finally:
        for c in conns:
            c.close()
    assert not failures, "\n\n".join(failures)


# each statement runs through the proxy and on the oracle; the affected-row counts and
# then the whole table must be equal (``notes`` starts empty, sharded by id)
DML_STATEMENTS = [
    "insert into notes (id, owner, n, amount, body) values (1, 'ann', 1, 10.5, 'a'), (2, 'bob', 2, -3, 'b'), "
    "(3, 'Ann', 3, null, 'c'), (40, 'cy', 0, 7.25, 'd'), (41, null, 5, 1, null)",
    "insert into notes (id, owner, body) values (5, 'dee', 'e')",
    "insert ignore into notes (id, owner, body) values (5, 'x', 'dup'), (6, 'eve', 'f')",
    "insert into notes (id, owner, n, body) values (2, 'bob', 9, 'b') on duplicate key update n = n + 10",
    "insert into notes (id, owner, n, body) values (7, 'fay', 1, 'g'), (1, 'ann', 1, 'a') "
    "on duplicate key update n = values(n) + 100, amount = amount * 2",
    "replace into notes (id, owner, n, body) values (3, 'ANN', 33, 'c2'), (8, 'gus', 8, 'h')",
    "update notes set n = n + 1 where owner = 'ann'",
    "update notes set amount = coalesce(amount, 0) + 0.5, body = concat(body, '!') where n > 4",
    "update notes set n = 0 where id = 999",
    "update notes set n = n where id = 1",
    "update notes set owner = upper(owner) where id in (1, 2, 40)",
    "delete from notes where amount is null",
    "update notes set n = n + 1000 where id in (select customer_id from items where qty = 24 and id < 200)",
    "insert into notes (id, owner, n, body) select id + 100, grp, qty, name from items where id between 10 and 30",
    "delete from notes where id > 100 and n is not null and n % 2 = 0",
    "update notes set amount = 1 order by id limit 2",
    "delete from notes where owner = 'GUS' or body = 'e'",
    "delete from notes order by id desc limit 3",
    "insert into notes (id, owner, n, body) values (60, 'hal', 1, 'x'), (61, 'ivy', 2, 'y'), (62, 'jo', 3, 'z'), "
    "(63, 'kim', 4, 'w')",
    "update notes t join items i on i.id = t.id set t.amount = i.price where t.id > 50",
    "delete t from notes t join items i on i.id = t.id where i.qty > 10",
    "update notes set n = n * 2 where id in (select id from items where grp = 'a')",
    "insert into notes (id, owner, n, body) values (60, 'dup', 1, 'x')",  # 1062
    "insert into notes (id, owner, n, body) values (70, 'nul', null, 'x')",  # 1048
    "insert into notes (id, owner, n) values (71, 'few')",
    "insert into notes (id, owner) values (72)",  # 1136
    "update notes set nosuch = 1 where id = 1",  # 1054
    "insert into notes values (73, 'all', 7, 7.7, 'cols')",
    "update notes set body = 'ten' where body <=> null",
    "delete from notes where owner in ('HAL', 'ivy ', 'Kim')",
]


def test_dml_changes_the_same_rows_and_counts_them_as_mariadb(wire):
    ep = wire.lookup_ep
    failures = []
    with wire.proxy.connect("commerce", autocommit=True) as pc, pc.cursor() as pcur, \
            _direct(ep, ORACLE_DB) as oc, oc.cursor() as ocur:
        ocur.execute(NOTES_DDL)
        for cur in (pcur, ocur):
            cur.execute("delete from notes")
        for sql in DML_STATEMENTS:
            counts = []
            for cur in (pcur, ocur):
                try:
                    counts.append(cur.execute(sql))
                except pymysql.err.MySQLError as e:
                    counts.append(f"error {e.args[0]}")
            tables = []
            for cur in (pcur, ocur):
                cur.execute("select id, owner, n, amount, body from notes order by id")
                tables.append(list(cur.fetchall()))
            refused = counts[0] == "error 1235"  # naming the construct (multi-shard UPDATE ... LIMIT)
            if counts[0] != counts[1] and not refused:
                failures.append(f"{sql}\n  affected rows: proxy {counts[0]}, oracle {counts[1]}")
            if tables[0] != tables[1]:
                if not refused:
                    failures.append(f"{sql}\n  table differs (affected {counts}): proxy {tables[0]}\n"
                                    f"  oracle {tables[1]}")
                for cur, table in ((pcur, tables[1]), (ocur, tables[1])):  # realign for the next statement
                    cur.execute("delete from notes")
                    for row in table:
                        cur.execute("insert into notes (id, owner, n, amount, body) values (%s, %s, %s, %s, %s)", row)
    assert not failures, "\n\n".join(failures)


# One-shard UPDATE / DELETE (and INSERT), each run twice: the first plans it (the normal path),
# the second is answered by the fast path, which relays the shard's OK; all of the OK
# (affected rows, the "Rows matched" info text, warnings, status flags) must be the oracle's.
ONE_SHARD_DML = [
    "insert into notes (id, owner, n, amount, body) values (80, 'ok', 1, 1.5, 'p')",  # then 1062
    "update notes set n = n + 1 where id = 80",
    "update notes set n = n where id = 80",
    "update notes set n = 3 where id = 89",  # no such row
    "update notes set amount = 'x' where id = 80",
    "update notes set body = repeat('z', 50) where id = 80",
    "update notes set n = null where id = 80",
    "update notes set amount = amount * 2 where id in (80) and n > 1",
    "update notes set nosuch = 1 where id = 80",  # 1054
    "delete from notes where id = 80 and n > 1000",
    "delete from notes where id = 80",
]


def _ok_answer(conn: pymysql.connections.Connection, sql: str) -> tuple:
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            result = conn._result
            return (cur.rowcount, cur.lastrowid, result.warning_count, result.message, conn.server_status)
    except pymysql.err.MySQLError as e:
        return ("error", e.args[0])


def test_one_shard_updates_and_deletes_answer_with_mariadbs_ok_packet(wire):
    failures = []
    with wire.proxy.connect("commerce", autocommit=True) as pc, _direct(wire.lookup_ep, ORACLE_DB) as oc:
        for conn in (pc, oc):
            with conn.cursor() as cur:
                cur.execute(NOTES_DDL)
                cur.execute("delete from notes where id between 80 and 89")
        for sql in ONE_SHARD_DML:
            for attempt in range(2):
                ours, theirs = _ok_answer(pc, sql), _ok_answer(oc, sql)
                if ours != theirs:
                    failures.append(f"{sql} (run {attempt + 1})\n  proxy  {ours}\n  oracle {theirs}")
    assert not failures, "\n\n".join(failures)


def test_several_statements_in_one_query_answer_each_result_as_mariadb(wire):
    # CLIENT_MULTI_STATEMENTS: each result set in turn, the column names of each
    sql = ("select id, qty from items where id in (4, 5) order by id; "
           "select code, region from accounts where code = 'acc7'; "
           "(select id from entries where customer_id = 3 order by id limit 2) union all (select 0); "
           "select count(*) as n from regions")
    ep = wire.lookup_ep
    answers = []
    for host, port, user, password, db in ((wire.proxy.host, wire.proxy.port, "root", "", "commerce"),
                                           (ep.host, ep.port, ep.user, ep.password, ORACLE_DB)):
        conn = pymysql.connect(host=host, port=port, user=user, password=password, database=db, autocommit=True,
                               client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                sets = [([d[0] for d in cur.description], cur.fetchall())]
                while cur.nextset():
                    sets.append(([d[0] for d in cur.description], cur.fetchall()))
            answers.append(sets)
        finally:
            conn.close()
    assert answers[0] == answers[1]


TRANSACTION_STEPS = [
    "delete from notes where id >= 500",
    "begin",
    "insert into notes (id, owner, n, body) values (500, 'tx', 1, 'a'), (501, 'tx', 2, 'b'), (502, 'tx', 3, 'c')",
    "select id, n from notes where owner = 'tx' order by id",  # the transaction's own rows, on both shards
    "update notes set n = n * 10 where owner = 'tx'",
    "select sum(n), count(*) from notes where owner = 'tx'",
    "rollback",
    "select count(*) from notes where owner = 'tx'",
    "start transaction",
    "insert into notes (id, owner, n, body) values (503, 'tx', 4, 'd'), (504, 'tx', 5, 'e')",
    "savepoint s1",
    "delete from notes where id = 503",
    "rollback to savepoint s1",
    "select id from notes where owner = 'tx' order by id for update",
    "commit",
    "select id, n from notes where owner = 'tx' order by id",
    "set autocommit = 0",
    "update notes set n = 0 where id = 504",
    "rollback",
    "select n from notes where id = 504",
    "set autocommit = 1",
    # savepoints: shards joining after one get it too (ROLLBACK TO undoes their rows)
    "savepoint outside",  # autocommit, no transaction: succeeds, gone at once
    "rollback to savepoint outside",  # 1305
    "begin",
    "savepoint a",
    "insert into notes (id, owner, n, body) values (510, 'sp', 1, 'a')",
    "savepoint `b c`",
    "insert into notes (id, owner, n, body) values (511, 'sp', 2, 'b'), (512, 'sp', 3, 'c'), (513, 'sp', 4, 'd')",
    "rollback to `b c`",
    "select id from notes where owner = 'sp' order by id",
    "release savepoint a",
    "rollback to savepoint `b c`",  # 1305: released with a
    "insert into notes (id, owner, n, body) values (514, 'sp', 5, 'e')",
    "commit",
    "select id from notes where owner = 'sp' order by id",
]


def test_transactions_see_and_undo_their_writes_as_mariadb(wire):
    ep = wire.lookup_ep
    failures = []
    with wire.proxy.connect("commerce", autocommit=True) as pc, pc.cursor() as pcur, \
            _direct(ep, ORACLE_DB) as oc, oc.cursor() as ocur:
        ocur.execute(NOTES_DDL)
        for sql in TRANSACTION_STEPS:
            got = []
            for cur in (pcur, ocur):
                try:
                    cur.execute(sql)
                    got.append(cur.fetchall() if cur.description else None)
                except pymysql.err.MySQLError as e:
                    got.append(f"error {e.args[0]}")
            if got[0] != got[1]:
                failures.append(f"{sql}: proxy {got[0]} / oracle {got[1]}")
    assert not failures, "\n".join(failures)
