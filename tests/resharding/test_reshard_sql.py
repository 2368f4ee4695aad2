"""The Reshard verbs as SQL (``RESHARD ks.workflow VERB ...``) through the proxy of a
``shardgate up`` process: the same workflow the ``shardgate reshard`` commands drive."""

from __future__ import annotations

import pymysql
import pytest

from tests.resharding.test_reshard_workflow import seed, wait_for
from tests.resharding.workflow_cluster import UpProcess, serving_shards, status


def _sql(up: UpProcess, statement: str) -> list[str]:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            assert [d[0] for d in cur.description] == ["Result"]
            return [r[0] for r in cur.fetchall()]
    finally:
        conn.close()


def _error(up: UpProcess, statement: str) -> tuple[int, str]:
    with pytest.raises(pymysql.MySQLError) as e:
        _sql(up, statement)
    return e.value.args[0], e.value.args[1]


def test_reshard_statements_create_watch_and_cancel_a_workflow(up: UpProcess) -> None:
    seed(up, 1, 300)
    created = _sql(up, "reshard commerce.bysql create source_shards = '-80' target_shards = '-40,40-80'")
    assert created == ["workflow bysql created: commerce -80 -> -40,40-80"], created
    wait_for(lambda: status(up.config_path, "bysql")["state"] == "Running", 120, "the copy")
    lines = _sql(up, "RESHARD `commerce`.`bysql` STATUS")
    assert any("state Running" in line for line in lines) and any("copy -80/customer:" in line for line in lines), lines
    assert _sql(up, "reshard commerce.bysql cancel;") == ["workflow bysql cancelled: -40,40-80 removed"]
    assert status(up.config_path, "bysql")["state"] == "Cancelled"
    assert serving_shards(up.config_path) == ("-80", "80-")


def test_malformed_reshard_statements_answer_1064_and_refusals_keep_their_codes(up: UpProcess) -> None:
    code, message = _error(up, "reshard commerce.bad explode")
    assert code == 1064 and "expected RESHARD <keyspace>.<workflow>" in message, message
    code, message = _error(up, "reshard commerce.bad create source_shards = '-80'")
    assert code == 1064 and "CREATE needs SOURCE_SHARDS and TARGET_SHARDS" in message, message
    code, message = _error(up, "reshard commerce.bad switchtraffic sideways")
    assert code == 1064 and "near 'sideways'" in message, message
    code, message = _error(up, "reshard commerce.bad switchtraffic reads_only writes_only")
    assert code == 1235, message
    code, message = _error(up, "reshard commerce.nope status")
    assert "workflow nope: not found" in message, message
    code, message = _error(up, "reshard commerce.bad create source_shards = '-80' target_shards = '-40,50-80'")
    assert "gap between -40 and 50-80" in message, message
