"""``rewriter.dialect``: MySQL 8 / MariaDB syntax parses, or is refused with 1235 naming
the construct (never 1064 for valid SQL), and what the dialect writes back means the same.

The round trips are checked as text; ``test_mariadb_*`` run the client's text and the
generated text on a shard of the local cluster (a scratch database created and dropped
there) and compare results: the generated text is accepted and means the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
import sqlglot

from rewriter import PlanCache, plan_query
from rewriter.context import DIALECT
from rewriter.errors import ParseError, Unsupported
from rewriter.normalize import normalize
from tests.rewriter.helpers import explain

ROUND_TRIPS = [
    # JSON
    ("select json_object('a', 1)", "SELECT JSON_OBJECT('a', 1)"),
    ("select json_object('a', 1, 'b', x = 1, 'c', x is null) from t",
     "SELECT JSON_OBJECT('a', 1, 'b', x = 1, 'c', x IS NULL) FROM t"),
    ("select json_object()", "SELECT JSON_OBJECT()"),
    ("select json_arrayagg(x), json_objectagg(k, v) from t", "SELECT JSON_ARRAYAGG(x), JSON_OBJECTAGG(k, v) FROM t"),
    ("select j->'$.a', j->>'$.a' from t", "SELECT JSON_EXTRACT(j, '$.a'), JSON_UNQUOTE(JSON_EXTRACT(j, '$.a')) FROM t"),
    # aggregates, windows
    ("select group_concat(distinct x order by y desc separator ';') from t",
     "SELECT GROUP_CONCAT(DISTINCT x ORDER BY y DESC SEPARATOR ';') FROM t"),
    ("select a, sum(b) from t group by a with rollup", "SELECT a, SUM(b) FROM t GROUP BY a WITH ROLLUP"),
    ("select row_number() over w from t window w as (partition by a order by b)",
     "SELECT ROW_NUMBER() OVER w FROM t WINDOW w AS (PARTITION BY a ORDER BY b)"),
    ("select sum(b) over (partition by a order by b rows between 1 preceding and current row) from t",
     "SELECT SUM(b) OVER (PARTITION BY a ORDER BY b rows BETWEEN 1 preceding AND CURRENT ROW) FROM t"),
    ("select sum(b) over (order by b range between unbounded preceding and current row) from t",
     "SELECT SUM(b) OVER (ORDER BY b range BETWEEN UNBOUNDED preceding AND CURRENT ROW) FROM t"),
    # DML
    ("insert into t (a, b) values (1, 2) on duplicate key update b = values(b)",
     "INSERT INTO t (a, b) VALUES (1, 2) ON DUPLICATE KEY UPDATE b = VALUES(b)"),
    ("insert into t (a, b) values (1, 2) as new on duplicate key update b = new.b",
     "INSERT INTO t (a, b) VALUES (1, 2) AS new ON DUPLICATE KEY UPDATE b = new.b"),
    ("update t1 join t2 on t1.a = t2.a set t1.b = t2.b where t2.c = 1",
     "UPDATE t1 JOIN t2 ON t1.a = t2.a SET t1.b = t2.b WHERE t2.c = 1"),
    ("delete t1 from t1 join t2 on t1.a = t2.a where t2.c = 1",
     "DELETE t1 FROM t1 JOIN t2 ON t1.a = t2.a WHERE t2.c = 1"),
    ("delete t1.*, t2.* from t1 join t2 on t1.a = t2.a", "DELETE t1, t2 FROM t1 JOIN t2 ON t1.a = t2.a"),
    ("update low_priority t set a = default where id = 1", "UPDATE t SET a = DEFAULT WHERE id = 1"),
    ("delete low_priority quick from t where id = 1", "DELETE FROM t WHERE id = 1"),
    ("insert low_priority ignore into t (id) values (1)", "INSERT IGNORE INTO t (id) VALUES (1)"),
    ("insert into t (a) values (1) on duplicate key update a = default, b = default(b)",
     "INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = DEFAULT, b = DEFAULT(b)"),
    ("update t set b = default(b) where `default` = 1", "UPDATE t SET b = DEFAULT(b) WHERE `default` = 1"),
    # query forms
    ("select exists(select 1 from t where a = 1)", "SELECT EXISTS(SELECT 1 FROM t WHERE a = 1)"),
    ("select a from t intersect select a from t2", "SELECT a FROM t INTERSECT SELECT a FROM t2"),
    ("select a from t except select a from t2", "SELECT a FROM t EXCEPT SELECT a FROM t2"),
    ("select 1 from dual", "SELECT 1 FROM DUAL"),
    # literals
    ("select _binary'abc', _latin1 x'e9'", "SELECT _binary 'abc', _latin1 x'e9'"),
    ("select 0x1, 0xfff, x'0f', b'101', 0b11", "SELECT 0x1, 0xfff, x'0f', b'101', b'11'"),
    ("select date '2020-01-01', time '10:00:00', timestamp '2020-01-01 10:00:00'",
     "SELECT CAST('2020-01-01' AS DATE), CAST('10:00:00' AS TIME), TIMESTAMP('2020-01-01 10:00:00')"),
    # intervals, casts, collations
    ("select now() + interval 1 day, d - interval '1:30' hour_minute from t",
     "SELECT NOW() + INTERVAL '1' DAY, d - INTERVAL '1:30' HOUR_MINUTE FROM t"),
    ("select interval 1 day + '2020-01-01'", "SELECT INTERVAL '1' DAY + '2020-01-01'"),
    ("select interval(a, 1, 2, 3) from t", "SELECT INTERVAL(a, 1, 2, 3) FROM t"),
    ("select interval(a) from t", "SELECT INTERVAL(a) FROM t"),
    ("select interval 1 day + (d) from t", "SELECT INTERVAL '1' DAY + (d) FROM t"),
    ("select cast(a as decimal(10, 2)), cast(a as char(10)), cast(a as signed) from t",
     "SELECT CAST(a AS DECIMAL(10, 2)), CAST(a AS CHAR(10)), CAST(a AS SIGNED) FROM t"),
    ("select convert(a using utf8mb4) from t", "SELECT CAST(a AS CHAR CHARACTER SET utf8mb4) FROM t"),
    ("select a collate utf8mb4_bin from t where a = 'x' collate utf8mb4_general_ci",
     "SELECT a COLLATE utf8mb4_bin FROM t WHERE a = 'x' COLLATE utf8mb4_general_ci"),
    ("select utc_date(), utc_time()", "SELECT UTC_DATE(), UTC_TIME()"),
    # joins, hints, locking
    ("select straight_join a from t1, t2", "SELECT STRAIGHT_JOIN a FROM t1, t2"),
    ("select a from t1 straight_join t2 on t1.a = t2.a", "SELECT a FROM t1 STRAIGHT_JOIN t2 ON t1.a = t2.a"),
    ("select a from t use index (i1) force index for join (i2) where a = 1",
     "SELECT a FROM t USE INDEX (i1) FORCE INDEX FOR JOIN (i2) WHERE a = 1"),
    ("select a from t where a = 1 lock in share mode", "SELECT a FROM t WHERE a = 1 LOCK IN SHARE MODE"),
    ("select a from t where a = 1 for share", "SELECT a FROM t WHERE a = 1 LOCK IN SHARE MODE"),
    ("select a from t where a = 1 lock in share mode nowait", "SELECT a FROM t WHERE a = 1 LOCK IN SHARE MODE NOWAIT"),
    ("select a from t where a = 1 for update", "SELECT a FROM t WHERE a = 1 FOR UPDATE"),
    ("select a from t where a = 1 for update skip locked", "SELECT a FROM t WHERE a = 1 FOR UPDATE SKIP LOCKED"),
    ("select a from t where id = 1 /*!50000 for update */", "SELECT a FROM t WHERE id = 1 FOR UPDATE"),
    # select modifiers
    ("select sql_calc_found_rows a from t limit 10", "SELECT SQL_CALC_FOUND_ROWS a FROM t LIMIT 10"),
    ("select high_priority sql_no_cache distinct a from t", "SELECT DISTINCT HIGH_PRIORITY SQL_NO_CACHE a FROM t"),
    ("select sql_cache a from t", "SELECT a FROM t"),
    ("select /*!40001 SQL_NO_CACHE */ a from t", "SELECT SQL_NO_CACHE a FROM t"),
    ("select /*!99999 distinct */ a from t", "/* !99999 distinct */ SELECT a FROM t"),
    # operators, variables, LIMIT
    ("select @a := 1, @b", "SELECT @a := 1, @b"),
    ("select a from t limit 5, 10", "SELECT a FROM t LIMIT 10 OFFSET 5"),
    ("select 7 div 2, 7 mod 2, 1 xor 0, a <=> null from t", "SELECT 7 DIV 2, 7 % 2, 1 XOR 0, a <=> NULL FROM t"),
    ("select a regexp '^x', a not regexp 'y', (a rlike 'z') = 1 from t",
     "SELECT a REGEXP '^x', NOT a REGEXP 'y', (a REGEXP 'z') = 1 FROM t"),
    ("select a sounds like b from t", "SELECT SOUNDEX(a) = SOUNDEX(b) FROM t"),
    ("select match(k, name) against ('x' in boolean mode) from t",
     "SELECT MATCH(k, name) AGAINST('x' IN BOOLEAN MODE) FROM t"),
]


@pytest.mark.parametrize(("sql", "expected"), ROUND_TRIPS)
def test_round_trip(sql: str, expected: str) -> None:
    assert sqlglot.parse_one(sql, read=DIALECT).sql(dialect=DIALECT) == expected


@pytest.mark.parametrize("sql", [s for s, _ in ROUND_TRIPS])
def test_normalized_shape_parses_and_round_trips(sql: str) -> None:
    """The planner parses the normalised text (literals as ``:vtgN``): it parses too, and
    what is generated from it parses to the same text again."""
    shape, _ = normalize(sql)
    once = sqlglot.parse_one(shape.replace("::", " :"), read=DIALECT).sql(dialect=DIALECT)
    assert sqlglot.parse_one(once, read=DIALECT).sql(dialect=DIALECT) == once


REFUSED = [
    ("select a into @x from t", "SELECT INTO"),
    ("select a from t limit 1 into @x", "SELECT INTO"),
    ("select a from t into outfile '/tmp/x'", "SELECT INTO"),
    ("select a from t procedure analyse()", "PROCEDURE"),
    ("select a from t group by a desc", "GROUP BY ... ASC/DESC"),
    ("select a from t limit 2 rows examined 100", "LIMIT ROWS EXAMINED"),
    ("values (1, 2), (3, 4)", "VALUES statement"),
    ("update ignore t set a = 1", "UPDATE IGNORE"),
    ("update low_priority ignore t set a = 1", "UPDATE IGNORE"),
    ("delete ignore from t where id = 1", "DELETE IGNORE"),
    ("insert delayed into t (id) values (1)", "INSERT DELAYED"),
]


@pytest.mark.parametrize(("sql", "what"), REFUSED)
def test_valid_sql_the_planner_cannot_carry_is_refused_with_1235_naming_it(sql: str, what: str) -> None:
    with pytest.raises(Unsupported) as e:
        sqlglot.parse_one(sql, read=DIALECT)
    assert e.value.code == 1235
    assert e.value.message == f"VT12001: unsupported: {what}" or what in e.value.message


def test_a_real_syntax_error_stays_1064(vschema: Any) -> None:
    with pytest.raises(ParseError) as e:
        plan_query("select from where", vschema, "customer", PlanCache())
    assert e.value.code == 1064
    with pytest.raises(ParseError):  # an unterminated quote (sqlglot's TokenError)
        plan_query("select `abc from customer", vschema, "customer", PlanCache())


def test_json_object_with_bind_variables_plans(vschema: Any) -> None:
    """``json_object('a', 1)`` normalises to ``json_object(:vtg1, :vtg2)``, which stock
    sqlglot cannot parse."""
    plan, bindvars = plan_query("select json_object('id', customer_id) from customer where customer_id = 5",
                                vschema, "customer", PlanCache())
    assert plan.opcode == "EqualUnique" and bindvars == {"vtg1": "id", "vtg2": 5}


def test_scatter_query_is_written_for_mariadb(vschema: Any) -> None:
    plan = explain(vschema, "select high_priority email from customer where email regexp '^a' order by email")
    assert plan["Query"] == "SELECT HIGH_PRIORITY email FROM customer WHERE email REGEXP '^a' ORDER BY email"


def test_long_connector_chains_are_balanced_with_the_same_terms_in_order() -> None:
    terms = [f"a = {i}" for i in range(1000)]
    tree = sqlglot.parse_one("select 1 from t where " + " or ".join(terms), read=DIALECT)
    where = tree.args["where"].this
    depth, stack = 0, [(where, 1)]
    while stack:
        node, d = stack.pop()
        depth = max(depth, d)
        stack.extend((c, d + 1) for c in node.iter_expressions())
    assert depth < 20
    assert tree.sql(dialect=DIALECT) == "SELECT 1 FROM t WHERE " + " OR ".join(terms)


# -- against MariaDB ----------------------------------------------------------------------

# (client text, reference): the generated text must give the client text's result; when
# the client text is MySQL-only syntax, the reference's (what MariaDB reads) instead.
MARIADB_CASES: list[tuple[str, str | None]] = [
    ("select json_object('a', 1, 'b', a = 1, 'c', a is null) from t order by id", None),
    ("select json_object(k, a) from t where k is not null order by id", None),
    ("select json_arrayagg(a), json_objectagg(k, a) from t", None),
    ("select j->'$.a' from t order by id", "select json_extract(j, '$.a') from t order by id"),
    ("select j->>'$.a' from t order by id", "select json_unquote(json_extract(j, '$.a')) from t order by id"),
    ("select group_concat(distinct a order by b desc, a asc separator ';') from t", None),
    ("select a, b, sum(c) from t group by a, b with rollup", None),
    ("select a, row_number() over w, sum(b) over (w rows between unbounded preceding and current row) "
     "from t window w as (order by id) order by id", None),
    ("select sum(a) over (order by id range between 1 preceding and 1 following) from t order by id", None),
    ("select exists(select 1 from t where a = 1), exists(select 1 from t where a = 9)", None),
    ("select a from t intersect select a from t2 order by a", None),
    ("select a from t except select b from t2 order by a", None),
    ("select _binary'abc' = 'abc', _utf8mb4'x' collate utf8mb4_bin, _latin1 x'e9' = _latin1'\xe9'", None),
    ("select 0x1, 0xfff, 0x41 + 0, x'41' + 0, x'0f', b'101', 0b11, b'1000001' = 'A', 0b1000001 + 0", None),
    ("select date '2020-01-01', time '10:00:00', timestamp '2020-01-01 10:00:00'", None),
    ("select d + interval 1 day, date_sub(d, interval '1-2' year_month), d - interval '1:30' hour_minute "
     "from t order by id", None),
    ("select interval 1 day + '2020-01-01', interval(5, 1, 2, 3), interval(a, 1, 2) from t order by id", None),
    ("select cast(a as decimal(10, 2)), cast(k as char(10)), cast(a as signed), cast('2020-01-01' as date) "
     "from t order by id", None),
    ("select convert(k using utf8mb4), convert(k, char(5)), convert(a, signed) from t order by id", None),
    ("select k collate utf8mb4_bin from t where k = 'X' collate utf8mb4_general_ci", None),
    ("select straight_join t1.a from t1, t2 where t1.id = t2.id order by t1.id", None),
    ("select t1.a from t1 straight_join t2 on t1.id = t2.id order by t1.id", None),
    ("select a from t use index (i) where a = 1", None),
    ("select a from t force index for join (i1) ignore index for order by (i) where a = 1 order by a", None),
    ("select a from t where id = 1 lock in share mode", None),
    ("select a from t where id = 1 for share", "select a from t where id = 1 lock in share mode"),
    ("select a from t where id = 1 lock in share mode nowait", None),
    ("select a from t where id = 1 for update skip locked", None),
    ("select a from t where id = 1 /*!50000 for update */", None),
    ("select sql_calc_found_rows a from t order by id limit 1", None),
    ("select high_priority sql_no_cache distinct a from t order by a", None),
    ("select sql_cache a from t order by id", None),
    ("select @dialect_a := 1, @dialect_a + 1", None),
    ("select a from t order by id limit 1, 2", None),
    ("select 7 div 2, 7 mod 2, -7 % 3, 1 xor 0, a <=> null, a <=> 1 from t order by id", None),
    ("select k regexp '^x', k not regexp 'y', (k rlike 'x') = 1, 1 = (k regexp 'x') from t order by id", None),
    ("select k sounds like 'ex' from t order by id", None),
    ("select match(k, name) against ('abc') from t order by id", None),
    ("select match(k) against ('+x -y' in boolean mode) from t order by id", None),
    ("select utc_date() = utc_date(), utc_time() is not null, 1 from dual", None),
    ("select a from t where k like 'x%' escape '|' order by id", None),
    ("select a from t where (a, b) in ((1, 2), (2, 1)) order by id", None),
    ("select a from t where a > all (select a from t2 where a is not null) or a < any (select a from t2)", None),
    ("with recursive r (n) as (select 1 union all select n + 1 from r where n < 5) select sum(n) from r", None),
    ("select a from t where id = 1 and (((((((((((((((((((((a = 1)))))))))))))))))))))", None),
    ("insert into t (id, a, b) values (1, 5, 6), (9, 1, 2) on duplicate key update b = values(b) + 1", None),
    ("insert low_priority ignore into t (id, a) values (1, 7), (10, 7)", None),
    ("update low_priority t set a = default, b = b + 1 where id = 1", None),
    ("insert into t (id, a) values (1, 5) on duplicate key update a = default, b = default(b)", None),
    ("select default(a), default(k) from t order by id", None),
    ("update t1 join t2 on t1.id = t2.id set t1.a = t2.b where t2.c = 3", None),
    ("delete low_priority quick from t where id = 1", None),
    ("delete t1.* from t1 join t2 on t1.id = t2.id where t2.id = 1", None),
    ("delete from t1 using t1 join t2 on t1.id = t2.id where t1.id = 1", None),
]

_COLUMNS = ("id int primary key, a int, b int, c int, d datetime, j json, k varchar(10), name varchar(20), "
            "key i (a), key i1 (b), fulltext key ft (k, name), fulltext key ft2 (k)")
_ROWS = ("(1, 1, 2, 3, '2020-01-01 10:00:00', '{\"a\": 1}', 'x', 'abc'), "
         "(2, 2, 1, 3, '2021-02-03 00:00:00', '[1, 2]', 'y', 'b'), "
         "(3, null, null, null, null, null, null, null)")
_SCRATCH = "sg_dialect_check"


@pytest.fixture(scope="module")
def mariadb(local_cluster: Any) -> Iterator[pymysql.connections.Connection]:
    """A scratch database on a shard of the local cluster, with tables t, t1, t2."""
    e = local_cluster.endpoint("commerce", "-80")
    conn = pymysql.connect(host=e.host, port=e.port, user=e.user, password=e.password, autocommit=True,
                           charset="utf8mb4")
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {_SCRATCH}")
        cur.execute(f"CREATE DATABASE {_SCRATCH}")
        cur.execute(f"USE {_SCRATCH}")
        for table in ("t", "t1", "t2"):
            cur.execute(f"CREATE TABLE {table} ({_COLUMNS}) ENGINE=InnoDB")
            cur.execute(f"INSERT INTO {table} VALUES {_ROWS}")
    try:
        yield conn
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {_SCRATCH}")
        conn.close()


def _run(conn: pymysql.connections.Connection, sql: str) -> Any:
    """The statement's result; for a DML statement its row count and the tables after it,
    rolled back."""
    dml = sql.lstrip().split(None, 1)[0].lower() in ("insert", "update", "delete", "replace")
    with conn.cursor() as cur:
        if not dml:
            cur.execute(sql)
            return cur.fetchall()
        conn.begin()
        try:
            count = cur.execute(sql)
            cur.execute("SELECT * FROM t UNION ALL SELECT * FROM t1 ORDER BY 1")
            return count, cur.fetchall()
        finally:
            conn.rollback()


@pytest.mark.parametrize(("sql", "reference"), MARIADB_CASES)
def test_mariadb_reads_the_generated_text_with_the_same_meaning(mariadb: Any, sql: str, reference: str | None) -> None:
    generated = sqlglot.parse_one(sql, read=DIALECT).sql(dialect=DIALECT)
    assert _run(mariadb, generated) == _run(mariadb, reference or sql), generated


@pytest.mark.parametrize(("sql", "reference"), MARIADB_CASES)
def test_mariadb_reads_the_text_generated_from_the_normalized_shape(mariadb: Any, sql: str,
                                                                    reference: str | None) -> None:
    """What the planner sends: the normalised shape, generated, with the values put back."""
    from rewriter.sqltemplate import parse_template

    shape, bindvars = normalize(sql)
    generated = sqlglot.parse_one(shape.replace("::", " :"), read=DIALECT).sql(dialect=DIALECT)
    assert _run(mariadb, parse_template(generated).render(bindvars)) == _run(mariadb, reference or sql), generated


def test_a_from_clause_with_no_select_before_it_is_mysqls_syntax_error() -> None:
    # sqlglot reads 'FROM t' as DuckDB's FROM-first 'SELECT * FROM t': MySQL has no such
    # syntax ('select a from from t' answered 1054 instead of 1064)
    from rewriter import errors
    from rewriter.planner import parse

    for sql in ("select a from from t", "select a from t join from u on 1", "select a, from t", "from t"):
        with pytest.raises(errors.ParseError) as e:
            parse(sql)
        assert e.value.code == 1064 and "near 'from" in str(e.value)
    assert parse("select extract(year from d), trim(leading 'x' from a) from t") is not None
