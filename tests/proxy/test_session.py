"""Session statements: targets, workload, SHOW, system variables."""

from __future__ import annotations

import pymysql
import pytest


def _one(conn, sql):
    with conn.cursor() as c:
        c.execute(sql)
        return c.fetchall()


def test_use_keyspace_then_select_database(proxy) -> None:
    conn = proxy.connect()
    try:
        assert _one(conn, "select database()") == ((None,),)
        _one(conn, "use lookup")
        assert _one(conn, "select database()") == (("lookup",),)
    finally:
        conn.close()


def test_use_unknown_keyspace_is_1049(proxy) -> None:
    conn = proxy.connect()
    try:
        with pytest.raises(pymysql.err.OperationalError) as e:
            _one(conn, "use nosuchks")
        assert e.value.args[0] == 1049
        assert "nosuchks" in e.value.args[1]
    finally:
        conn.close()


def test_connect_with_unknown_database_is_refused_with_1049(proxy) -> None:
    with pytest.raises(pymysql.err.OperationalError) as e:
        proxy.connect("nosuchks")
    assert e.value.args[0] == 1049


def test_use_keyspace_shard_targets_that_shard_verbatim(proxy, local_cluster) -> None:
    conn = proxy.connect()
    try:
        _one(conn, "use `commerce:-80`")
        port = local_cluster.endpoint("commerce", "-80").port
        assert _one(conn, "select @@port") == ((port,),)
        _one(conn, "use `commerce:80-`")
        port = local_cluster.endpoint("commerce", "80-").port
        assert _one(conn, "select @@port") == ((port,),)
    finally:
        conn.close()


def test_use_keyspace_at_primary_is_accepted(proxy) -> None:
    conn = proxy.connect()
    try:
        _one(conn, "use `lookup@primary`")
        assert _one(conn, "select database()") == (("lookup",),)
    finally:
        conn.close()


def test_use_at_replica_is_refused_not_silently_dropped(proxy) -> None:
    conn = proxy.connect()
    try:
        with pytest.raises(pymysql.err.MySQLError) as e:
            _one(conn, "use `lookup@replica`")
        assert e.value.args[0] == 1235
    finally:
        conn.close()


def test_set_workload_olap_both_spellings(proxy) -> None:
    conn = proxy.connect()
    try:
        _one(conn, "SET WORKLOAD = OLAP")
        assert _one(conn, "select @@workload") == (("OLAP",),)
        _one(conn, "set workload='oltp'")
        assert _one(conn, "select @@workload") == (("OLTP",),)
    finally:
        conn.close()


def test_version_is_mysql_8_compatible(proxy) -> None:
    conn = proxy.connect()
    try:
        (v,) = _one(conn, "select @@version")[0]
        assert v.startswith("8.0.")
        assert conn.get_server_info().startswith("8.0.")
    finally:
        conn.close()


def test_jdbc_probe_of_system_variables(proxy) -> None:
    conn = proxy.connect()
    try:
        with conn.cursor() as c:
            c.execute("set autocommit=1, sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')")
            c.execute("SELECT @@max_allowed_packet,@@system_time_zone,@@time_zone,@@auto_increment_increment")
            row = c.fetchone()
            assert [d[0] for d in c.description] == [
                "@@max_allowed_packet", "@@system_time_zone", "@@time_zone", "@@auto_increment_increment",
            ]
        assert row[0] > 0 and row[3] == 1
    finally:
        conn.close()


def test_set_session_transaction_isolation_is_accepted(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        _one(conn, "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
        _one(conn, "begin")
        assert _one(conn, "select @@tx_isolation") == (("READ-UNCOMMITTED",),)
        _one(conn, "commit")
    finally:
        conn.close()


def test_show_databases_lists_keyspaces(proxy) -> None:
    conn = proxy.connect()
    try:
        names = {r[0] for r in _one(conn, "show databases")}
        assert {"commerce", "lookup"} <= names
        assert {r[0] for r in _one(conn, "show keyspaces")} == {"commerce", "lookup"}
    finally:
        conn.close()


def test_show_vitess_shards(proxy) -> None:
    conn = proxy.connect()
    try:
        assert {r[0] for r in _one(conn, "show vitess_shards")} == {"commerce/-80", "commerce/80-", "lookup/0"}
    finally:
        conn.close()


def test_show_vitess_tablets_one_row_per_shard_with_host_port(proxy, local_cluster) -> None:
    conn = proxy.connect()
    try:
        rows = _one(conn, "show vitess_tablets")
        got = {(r[1], r[2]): r[6] for r in rows}
        want = {k: f"{e.host}:{e.port}" for k, e in local_cluster.endpoints.items()}
        assert got == want
    finally:
        conn.close()


def test_show_tables_of_a_keyspace(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        rows = _one(conn, "show tables")
        with conn.cursor() as c:
            c.execute("show tables")
            assert c.description[0][0] == "Tables_in_lookup"
        assert "product" in {r[0] for r in rows}
    finally:
        conn.close()


def test_show_columns_and_create_table(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        cols = [r[0] for r in _one(conn, "show columns from product")]
        assert cols[:2] == ["sku", "description"]
        (name, ddl) = _one(conn, "show create table product")[0]
        assert name == "product" and "CREATE TABLE" in ddl
    finally:
        conn.close()


def test_information_schema_describes_keyspace_tables(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        rows = _one(
            conn,
            "select column_name from information_schema.columns "
            "where table_schema = 'lookup' and table_name = 'product' order by ordinal_position",
        )
        assert [r[0] for r in rows][:2] == ["sku", "description"]
    finally:
        conn.close()


def test_syntax_error_is_1064(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        with pytest.raises(pymysql.err.ProgrammingError) as e:
            _one(conn, "selec 1 frm")
        assert e.value.args[0] == 1064
    finally:
        conn.close()


def test_unknown_table_is_1146_naming_the_table(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        with pytest.raises(pymysql.err.ProgrammingError) as e:
            _one(conn, "select * from no_such_table")
        assert e.value.args[0] == 1146
        assert "no_such_table" in e.value.args[1]
    finally:
        conn.close()


def test_an_error_does_not_end_the_session(proxy) -> None:
    conn = proxy.connect("lookup")
    try:
        with pytest.raises(pymysql.err.MySQLError):
            _one(conn, "select * from no_such_table")
        assert _one(conn, "select 1") == ((1,),)
    finally:
        conn.close()


def test_version_function_is_the_proxys_not_the_shards(proxy) -> None:
    conn = proxy.connect("commerce")
    try:
        (v,) = _one(conn, "select version()")[0]
        assert v.startswith("8.0.") and "MariaDB" not in v
    finally:
        conn.close()


def test_session_time_zone_applies_to_statements_on_shards(proxy) -> None:
    conn = proxy.connect("lookup", autocommit=True)
    try:
        _one(conn, "set time_zone = '+05:00'")
        for _ in range(3):  # whichever pooled connection serves it, the shard sees the setting
            assert _one(conn, "select @@session.time_zone from product limit 1") == (("+05:00",),)
        assert _one(conn, "select @@time_zone") == (("+05:00",),)
        _one(conn, "set time_zone = default")
        assert _one(conn, "select @@session.time_zone from product limit 1") != (("+05:00",),)
    finally:
        conn.close()


def test_session_settings_do_not_leak_to_other_sessions(proxy) -> None:
    a = proxy.connect("lookup", autocommit=True)
    b = proxy.connect("lookup", autocommit=True)
    try:
        _one(a, "set time_zone = '+07:00'")
        _one(a, "select 1 from product limit 1")  # a shard connection now carries +07:00
        for _ in range(5):
            assert _one(b, "select @@session.time_zone from product limit 1")[0][0] != "+07:00"
    finally:
        a.close()
        b.close()


def test_set_with_an_expression_reads_back_evaluated(proxy) -> None:
    conn = proxy.connect("commerce", autocommit=True)
    try:
        _one(conn, "set sql_mode = concat(@@sql_mode, ',NO_ENGINE_SUBSTITUTION')")
        (mode,) = _one(conn, "select @@sql_mode")[0]
        assert "NO_ENGINE_SUBSTITUTION" in mode and "concat" not in mode.lower()
    finally:
        conn.close()


def test_select_database_names_its_column_as_typed(proxy) -> None:
    conn = proxy.connect("commerce")
    try:
        with conn.cursor() as c:
            c.execute("SELECT DATABASE(), version() as v")
            assert [d[0] for d in c.description] == ["DATABASE()", "v"]
            assert c.fetchone()[0] == "commerce"
    finally:
        conn.close()


def test_literals_the_planner_would_misread_under_the_session_sql_mode_are_refused(proxy) -> None:
    backslashes = proxy.connect("commerce", autocommit=True, sql_mode="NO_BACKSLASH_ESCAPES")
    quotes = proxy.connect("commerce", autocommit=True, sql_mode="ANSI_QUOTES")
    unsharded = proxy.connect("lookup", autocommit=True, sql_mode="ANSI_QUOTES")
    try:
        for conn, sql in (
            (backslashes, "select customer_id from customer where customer_id = 1 and email = 'a\\b'"),
            (backslashes, "select 'it''s' from customer where customer_id = 1"),
            (quotes, 'select "customer_id" from customer where customer_id = 1'),
        ):
            with pytest.raises(pymysql.err.NotSupportedError) as refused:
                _one(conn, sql)
            assert refused.value.args[0] == 1235 and "sql_mode" in refused.value.args[1], refused.value.args
        assert _one(backslashes, "select customer_id from customer where customer_id = -1") == ()
        # Sent as written, so read by the shard's own rules: "sku" is the column.
        assert _one(unsharded, "select \"sku\" from product where sku = 'SKU-1001'") == ((b"SKU-1001",),)
    finally:
        for c in (backslashes, quotes, unsharded):
            c.close()
