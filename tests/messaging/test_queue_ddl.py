"""CREATE QUEUE -> message table DDL and vschema entry (pure), and the DDL runs on MariaDB."""

from __future__ import annotations

import pytest

from proxy.errors import ProxyError
from proxy.messaging.queue_ddl import translate_create_queue
from proxy.messaging.schema import load_message_tables
from tests.messaging.conftest import run_sql


def test_queue_gets_bookkeeping_columns_index_and_default_comment():
    q = translate_create_queue("CREATE QUEUE jobs (tenant_id BIGINT, payload JSON)", sharded=False)
    assert q.name == "jobs"
    assert q.comment == (
        "vitess_message,vt_ack_wait=30,vt_purge_after=86400,vt_batch_size=10,vt_cache_size=10000,vt_poller_interval=1"
    )
    for part in ("id BIGINT NOT NULL", "time_acked BIGINT DEFAULT NULL", "tenant_id BIGINT", "payload JSON",
                 "PRIMARY KEY (id)", "INDEX poller_idx (time_acked, priority, time_next DESC)"):  # fmt: skip
        assert part in q.create_table


def test_with_parameters_override_defaults():
    q = translate_create_queue("create queue jobs (body TEXT) with (vt_ack_wait=5, vt_max_attempts=3)", sharded=False)
    assert "vt_ack_wait=5" in q.comment and "vt_max_attempts=3" in q.comment


def test_sharded_keyspace_gets_hash_vindex_on_id():
    q = translate_create_queue("CREATE QUEUE commerce.jobs (body TEXT)", sharded=True)
    assert q.keyspace == "commerce"
    assert q.vschema_table == {"column_vindexes": [{"column": "id", "name": "hash"}]}
    assert q.vindexes == {"hash": {"type": "hash"}}


def test_user_id_column_replaces_the_default():
    q = translate_create_queue("CREATE QUEUE jobs (id VARBINARY(36) NOT NULL, body TEXT)", sharded=False)
    assert "id VARBINARY(36) NOT NULL" in q.create_table
    assert "id BIGINT" not in q.create_table


def test_unknown_parameter_is_rejected():
    with pytest.raises(ProxyError) as e:
        translate_create_queue("CREATE QUEUE jobs (body TEXT) WITH (vt_ack=5)", sharded=False)
    assert "unknown parameter 'vt_ack'" in e.value.message


def test_message_cols_naming_unknown_column_is_rejected():
    with pytest.raises(ProxyError) as e:
        translate_create_queue("CREATE QUEUE jobs (body TEXT) WITH (vt_message_cols=id|nope)", sharded=False)
    assert e.value.message == "CREATE QUEUE jobs: nope missing from message table: jobs"


async def test_generated_ddl_creates_a_valid_message_table(lookup_pool):
    q = translate_create_queue("CREATE QUEUE m_queue_ddl_check (tenant_id BIGINT, body TEXT) WITH (vt_batch_size=3)", sharded=False)
    await run_sql(lookup_pool, "DROP TABLE IF EXISTS m_queue_ddl_check")
    try:
        await run_sql(lookup_pool, q.create_table)
        async with lookup_pool.connection() as sc:
            loaded = await load_message_tables(sc)
        spec = loaded["m_queue_ddl_check"].spec
        assert spec is not None
        assert (spec.batch_size, spec.streamed) == (3, ("id", "tenant_id", "body"))
    finally:
        await run_sql(lookup_pool, "DROP TABLE IF EXISTS m_queue_ddl_check")
