"""The planner's cross-shard constructs through a real proxy process and real clients:
CTEs, windows, correlated subqueries, ROLLUP, DML with subqueries, each answered with
MySQL's column names, and the same answers as computed from the rows themselves."""

from __future__ import annotations

import json
import subprocess
import uuid

import pymysql
import pytest


@pytest.fixture(scope="module")
def conn(proxy):
    c = pymysql.connect(host=proxy.host, port=proxy.port, user="root", password="", database="commerce",
                        autocommit=True)
    tag = uuid.uuid4().int % 10_000_000
    base = 900_000_000 + tag * 10
    with c.cursor() as cur:
        cur.execute("delete from corder where price between 70000 and 70010")
        cur.execute("delete from customer where tenant_id = 777")
        for i in range(10):
            cur.execute("insert into customer (customer_id, email, tenant_id) values (%s, %s, 777)",
                        (base + i, f"u{i}@x"))
        for i in range(10):
            for j in range(i % 4):
                cur.execute("insert into corder (customer_id, sku, price) values (%s, %s, %s)",
                            (base + i, f"s{j}", 70000 + j))
    yield c, base
    with c.cursor() as cur:
        cur.execute("delete from corder where price between 70000 and 70010")
        cur.execute("delete from customer where tenant_id = 777")
    c.close()


def rows(c, sql, args=None):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return [d[0] for d in cur.description], list(cur.fetchall())


def test_cte_window_and_rollup_answer_with_mysqls_column_names(conn):
    c, base = conn
    names, got = rows(c, "with o as (select customer_id, count(*) n from corder where price >= 70000 group by customer_id) "
                         "select n, count(*) from o group by n with rollup")
    assert names == ["n", "count(*)"]
    assert sorted(got, key=lambda r: (r[0] is None, r[0])) == [(1, 3), (2, 2), (3, 2), (None, 7)]
    names, got = rows(c, "select customer_id, rank() over (order by customer_id desc) from customer "
                         "where tenant_id = 777 order by customer_id limit 2")
    assert names == ["customer_id", "rank() over (order by customer_id desc)"]
    assert got == [(base, 10), (base + 1, 9)]


def test_subquery_on_another_vindex_and_exists_across_shards(conn):
    c, base = conn
    _n, got = rows(c, "select count(*) from customer c where tenant_id = 777 and not exists "
                      "(select 1 from corder o where o.price = 70000 + c.customer_id - %s)", (base,))
    # prices 70000..70002 exist: customers base+0..base+2 have a match
    assert got == [(7,)]
    _n, got = rows(c, "select c.customer_id, (select count(*) from corder o where o.customer_id = c.customer_id) n "
                      "from customer c where c.tenant_id = 777 order by n desc, c.customer_id limit 3")
    assert got == [(base + 3, 3), (base + 7, 3), (base + 2, 2)]


def test_update_and_delete_through_a_cross_shard_subquery(conn):
    c, base = conn
    with c.cursor() as cur:
        n = cur.execute("update customer set email = 'has-orders' where tenant_id = 777 and customer_id in "
                        "(select customer_id from corder where price = 70002)")
    assert n == 2  # base+3, base+7
    _n, got = rows(c, "select customer_id from customer where email = 'has-orders' order by 1")
    assert got == [(base + 3,), (base + 7,)]


def test_the_mariadb_cli_streams_a_computed_result(proxy, conn):
    out = subprocess.run(
        ["mariadb", "--quick", "-h", proxy.host, "-P", str(proxy.port), "-u", "root", "commerce", "-N", "-e",
         "with t as (select customer_id from customer where tenant_id = 777) select count(*) from t"],
        capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "10"


def test_vexplain_queries_lists_each_query_sent_with_its_keyspace_and_shard(conn):
    c, base = conn
    names, got = rows(c, f"vexplain queries select email from customer where customer_id = {base}")
    assert names == ["#", "keyspace", "shard", "query"]
    assert len(got) == 1 and got[0][0] == 0 and got[0][1] == "commerce" and got[0][2] in ("-80", "80-")
    assert "from customer where customer_id = " in got[0][3]
    _n, got = rows(c, "vexplain queries select count(*) from customer where tenant_id = 777")
    assert sorted((g, ks, s) for g, ks, s, _q in got) == [(0, "commerce", "-80"), (0, "commerce", "80-")]
    # a lookup-vindex read: the lookup query first (its own group), then the table's
    _n, got = rows(c, "vexplain queries select price from corder where order_id = 1")
    assert [(g, ks) for g, ks, _s, _q in got] == [(0, "lookup"), (1, "commerce")]
    assert "corder_order_id_idx" in got[0][3]


def test_vexplain_in_a_shard_targeted_session_shows_the_targeted_shard(proxy):
    """USE ks:-80 sends every statement to that shard verbatim; VEXPLAIN says so (it used to
    plan as if the session were not targeted)."""
    c = proxy.connect("commerce:-80", autocommit=True)
    try:
        sql = "select count(*) from customer where customer_id = 1"
        _n, got = rows(c, f"vexplain queries {sql}")
        assert [(g, ks, s, q) for g, ks, s, q in got] == [(0, "commerce", "-80", sql)]
        _n, got = rows(c, f"vexplain plan {sql}")
        plan = json.loads(got[0][0])
        assert plan["OperatorType"] == "Send"
        assert plan["Keyspace"]["Name"] == "commerce"
        assert plan["TargetDestination"] == "Shard(-80)"
    finally:
        c.close()


def test_vexplain_all_annotates_each_route_with_the_shards_mysql_explain(conn):
    c, base = conn
    _n, got = rows(c, "vexplain all select count(*) from customer where tenant_id = 777")
    plan = json.loads(got[0][0])

    def routes(d):
        if d.get("OperatorType") == "Route":
            yield d
        for i in d.get("Inputs", ()):
            yield from routes(i)

    (route,) = list(routes(plan))
    assert sorted(route["mysql_explain_json"]) == ["-80", "80-"]
    assert "customer" in json.dumps(route["mysql_explain_json"]["-80"]["query_block"])


def test_vexplain_queries_runs_dml_only_when_told_to(conn):
    c, base = conn
    with pytest.raises(pymysql.err.OperationalError) as e:
        rows(c, f"vexplain queries update customer set email = 'x' where customer_id = {base}")
    assert e.value.args == (1105, "VT09008: vexplain queries/all will actually run queries")
    _n, got = rows(c, f"vexplain /*vt+ EXECUTE_DML_QUERIES */ queries update customer set email = 'vq' "
                      f"where customer_id = {base}")
    assert len(got) == 1 and got[0][3].startswith("update customer set email = 'vq'")
    assert rows(c, "select email from customer where customer_id = %s", (base,))[1] == [(b"vq",)]  # email is VARBINARY


def test_window_partitioned_by_the_vindex_column_is_computed_on_the_shards(conn):
    c, base = conn
    sql = ("select customer_id, count(*) over (partition by customer_id), "
           "row_number() over (partition by customer_id order by price desc) rn from corder "
           "where price >= 70000 and customer_id >= %s order by customer_id, rn limit 4")
    _n, plan = rows(c, "vexplain plan " + sql % base)
    assert '"OperatorType": "Compute"' not in plan[0][0] and '"Variant": "Scatter"' in plan[0][0]
    names, got = rows(c, sql, (base,))
    assert names == ["customer_id", "count(*) over (partition by customer_id)", "rn"]
    # customers base+1 (1 order), base+2 (2), base+3 (3): ordered by customer, then rank
    assert got == [(base + 1, 1, 1), (base + 2, 2, 1), (base + 2, 2, 2), (base + 3, 3, 1)]


def test_columns_of_a_pulled_out_subquery_plan_are_named_as_written(conn):
    c, base = conn
    names, got = rows(c, "select count(*), Max(customer_id) from customer where tenant_id = 777 and customer_id in "
                         "(select customer_id from corder where price >= 70000)")
    assert names == ["count(*)", "Max(customer_id)"]
    assert got == [(7, base + 9)]  # customers i % 4 != 0 have orders


def test_ctes_without_sharded_tables_are_sent_whole(conn):
    c, _base = conn
    assert rows(c, "with recursive r(n) as (select 1 union all select n + 1 from r where n < 5) "
                   "select sum(n) from r")[1] == [(15,)]
    sql = ("with recursive r(n) as (select 1 union all select n + 1 from r where n < 3), "
           "i as (select order_id from lookup.corder_order_id_idx) select count(*) >= 0, max(n) from i, r")
    _n, plan = rows(c, "vexplain plan " + sql)
    assert '"Variant": "Unsharded"' in plan[0][0] and "Compute" not in plan[0][0]
    assert rows(c, sql)[1] == [(1, 3)]


def test_dml_by_a_lookup_vindex_goes_only_to_the_shard_its_lookup_row_names(conn):
    c, base = conn
    (order_id, customer_id), = rows(c, "select order_id, customer_id from corder where customer_id = %s "
                                       "and sku = 's1'", (base + 2,))[1]
    _n, sent = rows(c, f"vexplain /*vt+ EXECUTE_DML_QUERIES */ queries update corder set sku = 's1x' "
                       f"where order_id = {order_id}")
    assert [(ks, q.split()[0].lower()) for _g, ks, _s, q in sent] == [("lookup", "select"), ("commerce", "update")]
    assert rows(c, "select sku from corder where customer_id = %s and order_id = %s",
                (customer_id, order_id))[1] == [(b"s1x",)]  # sku is VARBINARY
    with c.cursor() as cur:
        assert cur.execute(f"update corder set sku = 's1' where order_id = {order_id}") == 1


def test_correlated_not_exists_on_a_non_vindex_column_is_a_semi_join_named_as_written(conn):
    c, base = conn
    sql = ("select c.email, c.Customer_ID from customer c where c.tenant_id = 777 and not exists "
           "(select 1 from corder o where o.sku = c.email and o.price >= 70000)")
    plan = rows(c, "vexplain plan " + sql)[1]
    assert '"OperatorType": "SemiJoin"' in plan[0][0] and '"Anti": true' in plan[0][0]
    names, got = rows(c, sql)
    assert names == ["email", "Customer_ID"]
    assert sorted(r[1] for r in got) == [base + i for i in range(10)]  # no order's sku is an email
    _n, got = rows(c, sql.replace("not exists", "exists").replace("o.sku = c.email", "o.price = c.customer_id"))
    assert got == []


def test_a_signed_literal_answers_its_own_value_after_a_statement_with_minus_zero(conn):
    # normalize folds '-0' to 0, equal to its text's value: a template learnt from it alone
    # answered 7 for '-7' afterwards (normalize_cached); MariaDB answers -7
    c, base = conn
    alias = f"n{uuid.uuid4().hex[:8]}"
    for n in (0, 7, 12):
        _, got = rows(c, f"select customer_id, -{n} as {alias} from customer where customer_id = {base + 1}")
        assert got == [(base + 1, -n)]
