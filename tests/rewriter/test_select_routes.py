"""Route variants for single-route SELECTs, checked through VEXPLAIN PLAN (Vitess's shape)."""

from __future__ import annotations

import pytest

from rewriter import errors
from tests.rewriter.helpers import explain


def test_vindex_equality_routes_to_one_shard(vschema):
    plan = explain(vschema, "select * from customer where customer_id = 5")
    assert plan == {
        "OperatorType": "Route",
        "Variant": "EqualUnique",
        "Keyspace": {"Name": "customer", "Sharded": True},
        "FieldQuery": "SELECT * FROM customer WHERE 1 != 1",
        "Query": "select * from customer where customer_id = 5",
        "Table": "customer",
        "Values": ["5"],
        "Vindex": "hash",
    }


def test_string_value_is_shown_as_varchar(vschema):
    assert explain(vschema, "select * from customer where customer_id = '5'")["Values"] == ["'5'"]


def test_in_on_vindex_column_is_in_route(vschema):
    plan = explain(vschema, "select * from customer where customer_id in (1, 2, 3)")
    assert (plan["Variant"], plan["Vindex"]) == ("IN", "hash")
    assert plan["Values"] == ["(1, 2, 3)"]


def test_or_of_equalities_is_multi_equal(vschema):
    plan = explain(vschema, "select * from customer where customer_id = 1 or customer_id = 2")
    assert plan["Variant"] == "MultiEqual"
    assert plan["Values"] == ["(1, 2)"]


def test_contradicting_equalities_route_nowhere(vschema):
    assert explain(vschema, "select * from customer where customer_id = 1 and customer_id = 2")["Variant"] == "None"


def test_equality_with_null_routes_nowhere(vschema):
    assert explain(vschema, "select * from customer where customer_id = null")["Variant"] == "None"


def test_no_vindex_condition_scatters(vschema):
    plan = explain(vschema, "select * from customer where tenant_id = 1")
    assert plan["Variant"] == "Scatter" and "Values" not in plan


def test_or_across_columns_scatters(vschema):
    assert explain(vschema, "select * from customer where customer_id = 1 or tenant_id = 2")["Variant"] == "Scatter"


def test_unsharded_keyspace_table(vschema):
    plan = explain(vschema, "select * from product where name = 'x'")
    assert (plan["Variant"], plan["Keyspace"]) == ("Unsharded", {"Name": "commerce", "Sharded": False})


def test_reference_table(vschema):
    assert explain(vschema, "select * from country")["Variant"] == "Reference"


@pytest.mark.parametrize("schema", ["information_schema", "performance_schema", "mysql"])
def test_system_tables_use_dba_route(vschema, schema):
    assert explain(vschema, f"select * from {schema}.tables")["Variant"] == "DBA"


def test_keyspace_qualifier_is_stripped_from_the_query(vschema):
    plan = explain(vschema, "select customer.customer.email from customer.customer where customer_id = 1")
    assert plan["Query"] == "SELECT customer.email FROM customer WHERE customer_id = 1"


def test_session_keyspace_resolves_unqualified_names(vschema):
    assert explain(vschema, "select * from product", keyspace="commerce")["Variant"] == "Unsharded"


def test_table_missing_in_session_keyspace(vschema):
    with pytest.raises(errors.TableNotFound) as e:
        explain(vschema, "select * from nosuch", keyspace="customer")
    assert e.value.code == 1146
    assert "customer.nosuch" in e.value.message


def test_unknown_keyspace_qualifier(vschema):
    with pytest.raises(errors.PlanningError, match="unknown database 'nope'"):
        explain(vschema, "select * from nope.customer")


def test_lookup_vindex_equality_goes_through_vindex_lookup(vschema):
    plan = explain(vschema, "select * from customer where email = 'a@b'")
    assert (plan["OperatorType"], plan["Variant"]) == ("VindexLookup", "Equal")
    assert plan["Vindex"] == "email_lookup"
    assert plan["Inputs"][1]["Variant"] == "ByDestination"


def test_hash_preferred_over_lookup(vschema):
    plan = explain(vschema, "select * from customer where email = 'a@b' and customer_id = 3")
    assert (plan["OperatorType"], plan["Variant"], plan["Vindex"]) == ("Route", "EqualUnique", "hash")


def test_join_on_same_vindex_is_one_route(vschema):
    plan = explain(vschema, "select c.email, o.order_id from customer c join corder o "
                            "on c.customer_id = o.customer_id where c.customer_id = 5")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "EqualUnique")
    assert plan["Table"] == "corder, customer"


def test_join_with_reference_table_is_one_route(vschema):
    plan = explain(vschema, "select c.email, k.name from customer c join country k on c.country = k.code")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Scatter")


def test_unsharded_join_in_one_keyspace_is_one_route(vschema):
    plan = explain(vschema, "select * from product p join customer_seq s on p.id = s.id")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Unsharded")


def test_subquery_on_reference_table_stays_in_route(vschema):
    plan = explain(vschema, "select * from customer where country in (select code from country)")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Scatter")


def test_union_in_one_unsharded_keyspace_is_sent_whole(vschema):
    plan = explain(vschema, "select id from product union select id from customer_seq")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Unsharded")


def test_union_all_across_routes_is_concatenate(vschema):
    plan = explain(vschema, "select email from customer union all select name from product")
    assert plan["OperatorType"] == "Concatenate"
    assert [i["Variant"] for i in plan["Inputs"]] == ["Scatter", "Unsharded"]


def test_union_distinct_across_routes_adds_distinct(vschema):
    plan = explain(vschema, "select email from customer union select name from product")
    assert plan["OperatorType"] == "Distinct"


def test_derived_table_over_sharded_table_is_one_scatter_route(vschema):
    plan = explain(vschema, "select a from (select * from customer) SPARK_GEN_SUBQ_0 where 1=0")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Scatter")


def test_derived_table_keeps_inner_vindex_routing(vschema):
    plan = explain(vschema, "select * from (select * from customer where customer_id = 9) t")
    assert plan["Variant"] == "EqualUnique"


def test_select_without_from_goes_to_one_shard(vschema):
    assert explain(vschema, "select 1 + 1")["Variant"] == "Reference"


def test_sequence_next_values(vschema):
    plan = explain(vschema, "select next 10 values from customer_seq")
    assert (plan["OperatorType"], plan["Variant"], plan["Table"]) == ("Route", "Next", "customer_seq")


def test_next_on_a_non_sequence_table_is_an_error(vschema):
    with pytest.raises(errors.PlanningError, match="non-sequence"):
        explain(vschema, "select next 1 values from product")


def test_shard_targeted_session_sends_verbatim(vschema):
    plan = explain(vschema, "select * from whatever_table", keyspace="customer:-80")
    assert plan["OperatorType"] == "Send"
    assert plan["TargetDestination"] == "Shard(-80)"


def test_pinned_table_goes_to_its_keyspace_id(vschema):
    plan = explain(vschema, "select * from pinned_settings")
    assert (plan["Variant"], plan["TargetDestination"]) == ("ByDestination", "KeyspaceID(90)")


def test_routing_rule_redirects_and_keeps_the_written_name_as_alias(vschema):
    plan = explain(vschema, "select old_customer.email from old_customer where customer_id = 3")
    assert (plan["Keyspace"]["Name"], plan["Variant"]) == ("customer", "EqualUnique")
    assert plan["Query"] == "SELECT old_customer.email FROM customer AS old_customer WHERE customer_id = 3"


def test_routing_rule_without_target_disables_the_table(vschema):
    with pytest.raises(errors.PlanningError, match="retired has been disabled"):
        explain(vschema, "select * from retired")


def test_ambiguous_unqualified_name_names_the_keyspaces():
    from vschema.loader import build_vschema

    vs = build_vschema({
        "ks1": ({"sharded": False, "tables": {"t": {}}}, ["0"]),
        "ks2": ({"sharded": False, "tables": {"t": {}}}, ["0"]),
    })
    with pytest.raises(errors.AmbiguousTable, match="ks1, ks2"):
        explain(vs, "select * from t")


def test_system_table_subquery_next_to_unsharded_table_is_one_route(vschema):
    plan = explain(vschema, "select * from product where name in (select table_name from information_schema.tables)")
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "Unsharded")


def test_shard_qualified_table_sends_to_that_shard(vschema):
    plan = explain(vschema, "select * from `customer:80-`.customer where tenant_id = 1")
    assert (plan["OperatorType"], plan["TargetDestination"]) == ("Send", "Shard(80-)")
    assert plan["Query"] == "SELECT * FROM customer WHERE tenant_id = 1"


def test_unknown_shard_qualifier_is_an_error(vschema):
    with pytest.raises(errors.PlanningError, match="no shard 40- in keyspace customer"):
        explain(vschema, "select * from `customer:40-`.customer")


@pytest.mark.parametrize("sql", [
    "select * from customer where customer_id in (null)",
    "select * from customer where 1 = 0",
    "select * from customer where false and tenant_id = 3",
])
def test_predicates_no_row_can_satisfy_route_to_no_shard(vschema, sql):
    plan = explain(vschema, sql)
    assert (plan["OperatorType"], plan["Variant"]) == ("Route", "None")


def test_binary_string_literal_is_a_vindex_value(vschema):
    plan = explain(vschema, "select * from customer where email = _binary'a@x'")
    assert plan["OperatorType"] == "VindexLookup"


@pytest.mark.parametrize("target", ["customer:-80", "customer[-80]", "customer[-40]"])
def test_shard_and_key_range_qualified_tables_target_one_shard(vschema, target):
    plan = explain(vschema, f"select * from `{target}`.customer")
    assert (plan["OperatorType"], plan["TargetDestination"]) == ("Send", "Shard(-80)")
