"""TPC-H as a correctness test: each of the 22 queries through the real proxy (MySQL protocol,
PyMySQL) over keyspace `tpch` (2 shards) answers what one MariaDB holding the same rows answers.

Same column names; the ORDER BY columns in the same sequence; the rows equal as a multiset
(DECIMAL exactly, scale included; DOUBLE to 9 significant digits). See tests/tpch/compare.py.
"""

from __future__ import annotations

import os

import pytest

from tests.tpch.cluster import row_counts
from tests.tpch.compare import differences, raw_connect, run
from tests.tpch.conftest import TEST_SF
from tests.tpch.queries import ORDER_KEYS, query

# A wrong plan can turn a join into a very long nested loop: fail the query instead of hanging.
QUERY_TIMEOUT_S = int(os.environ.get("SHARDGATE_TPCH_TIMEOUT", "120"))


def test_loaded_rows_equal_on_both_sides(tpch):
    expected = tpch.data.row_counts
    oracle = row_counts(tpch.tc.oracle)
    per_shard = {s: row_counts(ep) for s, ep in tpch.tc.shards.items()}
    assert oracle == expected
    for table, n in expected.items():
        if tpch.data.is_reference(table):
            assert {s: c[table] for s, c in per_shard.items()} == {s: n for s in per_shard}, table
        else:
            assert sum(c[table] for c in per_shard.values()) == n, table
            assert all(c[table] > 0 for c in per_shard.values()), table


@pytest.mark.filterwarnings("ignore::pymysql.err.Warning")
@pytest.mark.parametrize("n", range(1, 23), ids=[f"q{n}" for n in range(1, 23)])
def test_query_through_proxy_equals_oracle(tpch, tpch_proxy, n):
    sql = query(n, TEST_SF)
    o = tpch.tc.oracle
    with raw_connect(host=o.host, port=o.port, user=o.user, password=o.password, database=o.database) as conn:
        theirs = run(conn, sql)
    assert theirs.rows, f"q{n} returns no rows at SF {TEST_SF}: the comparison would prove little"
    p = tpch_proxy
    with raw_connect(host=p.host, port=p.port, user="root", password="", database="tpch",
                     read_timeout=QUERY_TIMEOUT_S) as conn:
        ours = run(conn, sql)
    problems = differences(ours, theirs, ORDER_KEYS[n])
    assert not problems, f"q{n}: " + "; ".join(problems)
