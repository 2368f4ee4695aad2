"""INSERT / REPLACE plans that need the table's columns (schema tracking), and ON DUPLICATE
KEY UPDATE checks (pure planner, no shards)."""

from __future__ import annotations

import json

import pytest

from rewriter import PlanCache, errors, plan_query
from vschema.tracked_schema import ColumnInfo, TableSchema, TrackedSchema


def _table(name: str, *columns: str) -> TableSchema:
    return TableSchema(name, tuple(ColumnInfo(c) for c in columns))


SCHEMA = TrackedSchema({"customer": {
    "customer": _table("customer", "customer_id", "email", "tenant_id"),
    "corder": _table("corder", "order_id", "customer_id", "sku"),
    "customer_note": _table("customer_note", "note_id", "customer_id", "body", "shard_only_column"),
}})


def explain(vschema, sql: str, schema=SCHEMA) -> dict:
    node, _ = plan_query("vexplain plan " + sql, vschema, "customer", PlanCache(), schema=schema)
    return json.loads(node.json)


def test_columns_come_from_the_tracked_schema_and_are_sent_explicitly(vschema):
    plan = explain(vschema, "insert into customer values (1, 'a', 2)")
    assert plan["Query"] == "INSERT INTO customer (customer_id, email, tenant_id) VALUES (:__seq0, 'a', 2)"
    assert plan["VindexValues"]["hash"] == "1"


def test_an_authoritative_vschema_column_list_wins_over_the_tracked_one(vschema):
    plan = explain(vschema, "insert into customer_note values (1, 2, 'b')")
    assert plan["Query"].startswith("INSERT INTO customer_note (note_id, customer_id, body) VALUES")


def test_no_columns_known_is_vitess_vt09004(vschema):
    with pytest.raises(errors.Unsupported, match="VT09004"):
        explain(vschema, "insert into corder values (1, 2, 'x')", schema=None)


def test_column_count_mismatch_is_1136_naming_the_row(vschema):
    with pytest.raises(errors.WrongValueCount) as e:
        explain(vschema, "insert into customer values (1, 'a', 2), (3, 'b')")
    assert (e.value.code, e.value.message) == (1136, "Column count doesn't match value count at row 2")


def test_a_new_schema_version_replans(vschema):
    cache = PlanCache()
    sql = "insert into customer values (1, 'a', 2)"
    first, _ = plan_query(sql, vschema, "customer", cache, schema=SCHEMA)
    assert plan_query(sql, vschema, "customer", cache, schema=SCHEMA)[0] is first
    wider = SCHEMA.replace_keyspace("customer", {
        **SCHEMA.keyspaces["customer"], "customer": _table("customer", "customer_id", "email", "tenant_id", "x")})
    assert wider.version != SCHEMA.version
    with pytest.raises(errors.WrongValueCount):
        plan_query(sql, vschema, "customer", cache, schema=wider)


def test_replace_plans_like_insert_with_its_own_verb(vschema):
    plan = explain(vschema, "replace into customer_note values (1, 2, 'b'), (3, 4, 'c')")
    assert (plan["OperatorType"], plan["Variant"]) == ("Insert", "Sharded")
    assert plan["Query"] == "REPLACE INTO customer_note (note_id, customer_id, body) VALUES (1, 2, 'b'), (3, 4, 'c')"
    assert plan["VindexValues"] == {"hash": "1, 3"}


def test_replace_into_an_unsharded_table_goes_whole(vschema):
    plan = explain(vschema, "replace into commerce.product values (1, 'p')")
    assert (plan["Variant"], plan["Query"]) == ("Unsharded", "REPLACE INTO product VALUES (1, 'p')")


def test_replace_with_owned_lookup_vindexes_is_refused(vschema):
    with pytest.raises(errors.Unsupported, match="REPLACE on a table with owned lookup vindexes"):
        explain(vschema, "replace into corder (order_id, customer_id, sku) values (1, 2, 'x')")


def test_replace_with_on_duplicate_key_update_is_a_syntax_error(vschema):
    with pytest.raises(errors.ParseError):
        explain(vschema, "replace into customer values (1, 'a', 2) on duplicate key update email = 'b'")


def test_row_alias_becomes_values_function(vschema):
    plan = explain(vschema, "insert into customer (customer_id, tenant_id) values (1, 2) as new(i, t) "
                            "on duplicate key update tenant_id = new.t + t + tenant_id")
    assert plan["Query"].endswith(
        "ON DUPLICATE KEY UPDATE tenant_id = VALUES(tenant_id) + VALUES(tenant_id) + tenant_id")
    assert " AS new" not in plan["Query"]


@pytest.mark.parametrize("update", ["customer_id = 5", "customer_id = values(tenant_id)",
                                    "email = new.tenant_id", "customer_id = new.customer_id + 1"])
def test_on_duplicate_key_update_of_any_vindex_column_is_refused(vschema, update):
    with pytest.raises(errors.Unsupported, match="^VT12001: unsupported: DML cannot update vindex column$"):
        explain(vschema, f"insert into customer values (1, 'a', 2) as new on duplicate key update {update}")


def test_on_duplicate_key_update_of_a_vindex_column_to_its_own_new_value_is_allowed(vschema):
    plan = explain(vschema, "insert into customer values (1, 'a', 2) as new "
                            "on duplicate key update email = new.email, customer_id = values(customer_id)")
    assert plan["Query"].endswith("ON DUPLICATE KEY UPDATE email = VALUES(email), customer_id = VALUES(customer_id)")
