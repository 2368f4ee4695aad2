"""The tables behind topics (``_tms_<topic>``, ``_tms_topics``) are the proxy's: a keyspace-level
session sees neither in ``SHOW TABLES`` nor in ``information_schema`` (tables, columns, views,
statistics; counts and joins included), through PyMySQL and SQLAlchemy's inspector; a session
targeting the shard (``USE commerce:-80``) sees the shard's database as it is."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from tests.topics.conftest import TopicProxy, blocking_connect

SCHEMA_READS = {
    "tables": "SELECT table_name FROM information_schema.tables WHERE table_schema = 'commerce'",
    "columns": "SELECT DISTINCT c.table_name FROM information_schema.columns c WHERE c.table_schema = 'commerce'",
    "views": "SELECT table_name FROM information_schema.views WHERE table_schema = 'commerce'",
    "statistics": "SELECT DISTINCT TABLE_NAME FROM INFORMATION_SCHEMA.STATISTICS WHERE TABLE_SCHEMA = 'commerce'",
    "joined": "SELECT DISTINCT t.table_name FROM information_schema.tables t JOIN information_schema.columns c"
              " ON c.table_schema = t.table_schema AND c.table_name = t.table_name WHERE t.table_schema = 'commerce'",
    "left joined": "SELECT t.table_name FROM information_schema.tables t LEFT JOIN information_schema.statistics s"
                   " ON s.table_schema = t.table_schema AND s.table_name = t.table_name AND s.seq_in_index = 1"
                   " AND s.index_name = 'PRIMARY' WHERE t.table_schema = 'commerce'",
}


def _names(p: TopicProxy, database: str, sql: str) -> list[str]:
    conn = blocking_connect(p, database)
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return [str(r[0]) for r in cur.fetchall()]
    finally:
        conn.close()


def _reads(p: TopicProxy, database: str) -> dict[str, set[str]]:
    return {what: set(_names(p, database, sql)) for what, sql in SCHEMA_READS.items()}


async def test_topic_tables_are_hidden_from_keyspace_sessions_and_shown_to_shard_sessions(topic_proxy, topics):
    name = await topics.create("commerce")
    p = topic_proxy
    shard = await asyncio.to_thread(_shard_of, p, name)
    targeted = await asyncio.to_thread(_reads, p, f"commerce:{shard}")
    # The shard holds them, and a session targeting it reads them as MariaDB lists them.
    for what in ("tables", "columns", "statistics", "joined", "left joined"):
        assert {f"_tms_{name}", "_tms_topics"} <= targeted[what], (what, shard)
    assert name in targeted["views"]

    seen = await asyncio.to_thread(_reads, p, "commerce")
    for what, names in seen.items():
        assert names, what
        assert not [n for n in names if n.lower().startswith("_tms_")], (what, names)
    assert "customer" in seen["tables"] and "customer" in seen["columns"]
    # A count is of what the rows show (the condition is in the query the shard runs).
    (count,) = await asyncio.to_thread(
        _names, p, "commerce", "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'commerce'")
    assert int(count) == len(seen["tables"])
    listed = await asyncio.to_thread(_names, p, "commerce", "SHOW TABLES")
    assert {name, "customer"} <= set(listed) and not [n for n in listed if n.startswith("_tms_")]

    def inspected() -> tuple[list[str], list[str]]:
        engine = sa.create_engine(f"mysql+pymysql://root:@127.0.0.1:{p.port}/commerce")
        try:
            inspector = sa.inspect(engine)
            return inspector.get_table_names(), inspector.get_view_names()
        finally:
            engine.dispose()

    tables, views = await asyncio.to_thread(inspected)
    assert "customer" in tables and not [t for t in tables if t.startswith("_tms_")]
    assert name in views and not [v for v in views if v.startswith("_tms_")]


def _shard_of(p: TopicProxy, name: str) -> str:
    return str(_row(p, f"SHOW TOPICS FROM commerce LIKE '{name}'")[2])


def _row(p: TopicProxy, sql: str) -> tuple:
    conn = blocking_connect(p, "commerce")
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            row = cur.fetchone()
            assert row is not None
            return tuple(row)
    finally:
        conn.close()
