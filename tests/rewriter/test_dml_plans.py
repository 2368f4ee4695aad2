"""INSERT / UPDATE / DELETE plans."""

from __future__ import annotations

import pytest

from rewriter import errors
from tests.rewriter.helpers import explain


def test_sharded_insert_routes_per_row(vschema):
    plan = explain(vschema, "insert into customer (customer_id, email) values (1, 'a'), (2, 'b')")
    assert (plan["OperatorType"], plan["Variant"], plan["TableName"]) == ("Insert", "Sharded", "customer")
    assert plan["VindexValues"] == {"hash": "1, 2", "email_lookup": "'a', 'b'"}


def test_insert_without_auto_increment_column_gets_it_from_the_sequence(vschema):
    plan = explain(vschema, "insert into customer (email) values ('a')")
    assert plan["AutoIncrement"] == "commerce.customer_seq:customer_id"
    assert plan["Query"] == "INSERT INTO customer (email, customer_id) VALUES ('a', :__seq0)"
    assert plan["VindexValues"]["hash"] == ":__seq0"


def test_insert_missing_primary_vindex_column_is_refused_like_vitess(vschema):
    with pytest.raises(errors.PlanningError, match="VT09003: INSERT query does not have sharding column 'customer_id'"):
        explain(vschema, "insert into corder (order_id, sku) values (1, 'x')")


def test_insert_without_column_list_into_sharded_table_is_refused(vschema):
    with pytest.raises(errors.Unsupported, match="VT09004"):
        explain(vschema, "insert into corder values (1, 2, 'x', 3)")


def test_insert_on_duplicate_key_update_keeps_the_clause_for_every_shard(vschema):
    plan = explain(vschema, "insert into corder (order_id, customer_id, sku) values (1, 2, 'x') "
                            "on duplicate key update sku = values(sku)")
    assert plan["Query"].endswith("ON DUPLICATE KEY UPDATE sku = VALUES(sku)")


def test_insert_into_unsharded_table(vschema):
    plan = explain(vschema, "insert into product (id, name) values (1, 'p')")
    assert (plan["Variant"], plan["Keyspace"]["Sharded"]) == ("Unsharded", False)


def test_update_by_vindex_equality_is_equal_unique(vschema):
    plan = explain(vschema, "update corder set sku = 'y' where customer_id = 4")
    assert (plan["OperatorType"], plan["Variant"], plan["Vindex"]) == ("Update", "EqualUnique", "hash")


def test_update_by_in_list_routes_to_those_shards(vschema):
    assert explain(vschema, "update corder set sku = 'y' where customer_id in (1, 2)")["Variant"] == "IN"


def test_update_without_vindex_condition_scatters(vschema):
    assert explain(vschema, "update corder set sku = 'y' where price > 3")["Variant"] == "Scatter"


def test_update_of_primary_vindex_column_is_refused(vschema):
    with pytest.raises(errors.Unsupported,
                       match="VT12001: unsupported: you cannot UPDATE primary vindex columns; invalid update on vindex: hash"):
        explain(vschema, "update corder set customer_id = 5 where order_id = 1")


def test_multi_shard_update_with_limit_is_refused(vschema):
    with pytest.raises(errors.Unsupported, match="multi shard UPDATE with LIMIT"):
        explain(vschema, "update corder set sku = 'y' where price > 3 limit 2")


def test_delete_by_vindex_equality(vschema):
    plan = explain(vschema, "delete from customer where customer_id = 9")
    assert (plan["OperatorType"], plan["Variant"]) == ("Delete", "EqualUnique")


def test_delete_of_lookup_owner_reads_rows_first(vschema):
    plan = explain(vschema, "delete from corder where customer_id = 9")
    assert plan["OwnedVindexQuery"] == "SELECT customer_id, order_id FROM corder WHERE customer_id = 9 FOR UPDATE"


def test_update_of_owned_lookup_column_reads_the_rows_first(vschema):
    plan = explain(vschema, "update customer set email = 'new' where customer_id = 3")
    assert (plan["Variant"], plan["Vindex"]) == ("EqualUnique", "hash")
    assert plan["OwnedVindexQuery"] == "SELECT customer_id, email FROM customer WHERE customer_id = 3 FOR UPDATE"


def test_update_of_lookup_column_to_an_expression_is_refused(vschema):
    with pytest.raises(errors.Unsupported, match="update of lookup vindex column email to an expression"):
        explain(vschema, "update customer set email = concat(email, 'x') where customer_id = 3")


def test_insert_select_into_sharded_table_runs_the_select_first(vschema):
    plan = explain(vschema, "insert into corder (order_id, customer_id, sku) select id, id, name from product")
    assert (plan["OperatorType"], plan["Variant"]) == ("Insert", "Select")
    assert plan["VindexOffsetFromSelect"] == {"hash": "1", "corder_lookup": "0"}
    assert plan["Inputs"][0]["Variant"] == "Unsharded"


def test_insert_select_within_one_unsharded_keyspace_is_sent_whole(vschema):
    plan = explain(vschema, "insert into product (id, name) select id, name from product where id < 3")
    assert (plan["OperatorType"], plan["Variant"]) == ("Insert", "Unsharded")
    assert plan["Query"] == "insert into product (id, name) select id, name from product where id < 3"
