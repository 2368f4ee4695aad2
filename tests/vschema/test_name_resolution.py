"""Table name resolution as vtgate does it: qualified names, the selected keyspace,
global uniqueness with ambiguity errors, unsharded keyspaces, routing rules."""

from __future__ import annotations

import copy

import pytest

from vschema.errors import (
    AmbiguousTable,
    KeyspaceNotFound,
    TableDisabled,
    TableNotFound,
    VSchemaError,
)
from vschema.loader import build_vschema
from vschema.model import VSchema
from vschema.vindexes.hash import hash_uint64

COMMERCE = {
    "tables": {
        "product": {},
        "audit": {},
        "countries": {},
        "customer_seq": {"type": "sequence"},
    }
}
CUSTOMER = {
    "sharded": True,
    "vindexes": {"hash": {"type": "hash"}},
    "tables": {
        "customer": {
            "column_vindexes": [{"column": "customer_id", "name": "hash"}],
            "auto_increment": {"column": "customer_id", "sequence": "customer_seq"},
        },
        "corder": {"column_vindexes": [{"column": "customer_id", "name": "hash"}]},
        "audit": {"column_vindexes": [{"column": "id", "name": "hash"}]},
        "countries": {"type": "reference", "source": "commerce.countries"},
    },
}
RULES = {
    "rules": [
        {"from_table": "old_orders", "to_tables": ["customer.corder"]},
        {"from_table": "product", "to_tables": ["commerce.product"]},
        {"from_table": "customer.product", "to_tables": ["commerce.product"]},
        {"from_table": "legacy", "to_tables": []},
        {"from_table": "split", "to_tables": ["customer.corder", "commerce.audit"]},
        {"from_table": "lost", "to_tables": ["nowhere.t"]},
        {"from_table": "unqualified_target", "to_tables": ["corder"]},
    ]
}


@pytest.fixture(scope="module")
def vschema() -> VSchema:
    return build_vschema(
        {"commerce": (COMMERCE, ["0"]), "customer": (CUSTOMER, ["-80", "80-"])}, RULES
    )


def where(table) -> tuple[str, str]:
    return table.keyspace, table.name


# -- qualified and selected keyspace -----------------------------------------------
def test_qualified_name_always_resolves(vschema: VSchema) -> None:
    assert where(vschema.find_table("customer.corder")) == ("customer", "corder")


def test_qualified_name_wins_over_the_selected_keyspace(vschema: VSchema) -> None:
    assert where(vschema.find_table("customer.corder", keyspace="commerce")) == (
        "customer",
        "corder",
    )


def test_unqualified_name_looks_in_the_selected_keyspace(vschema: VSchema) -> None:
    assert where(vschema.find_table("audit", keyspace="customer")) == ("customer", "audit")
    assert where(vschema.find_table("audit", keyspace="commerce")) == ("commerce", "audit")


def test_unsharded_keyspace_accepts_tables_missing_from_its_vschema(vschema: VSchema) -> None:
    table = vschema.find_table("corder", keyspace="commerce")
    assert where(table) == ("commerce", "corder") and table.implicit
    assert table.column_vindexes == []
    assert vschema.is_unsharded("commerce") and not vschema.is_unsharded("customer")


def test_sharded_keyspace_does_not_know_unlisted_tables(vschema: VSchema) -> None:
    with pytest.raises(TableNotFound, match=r"^table nosuch not found$"):
        vschema.find_table("nosuch", keyspace="customer")


def test_unknown_keyspace_is_vitess_bad_database_error(vschema: VSchema) -> None:
    with pytest.raises(KeyspaceNotFound, match=r"VT05003: unknown database 'nope' in vschema"):
        vschema.find_table("nope.t")


# -- no keyspace selected ----------------------------------------------------------
def test_unique_unqualified_name_is_found_in_its_keyspace(vschema: VSchema) -> None:
    assert where(vschema.find_table("corder")) == ("customer", "corder")
    assert where(vschema.find_table("customer_seq")) == ("commerce", "customer_seq")


def test_name_in_two_keyspaces_is_ambiguous_naming_both(vschema: VSchema) -> None:
    with pytest.raises(AmbiguousTable) as info:
        vschema.find_table("audit")
    assert str(info.value) == (
        "ambiguous table reference: audit (found in keyspaces: commerce, customer)"
    )
    assert info.value.keyspaces == ["commerce", "customer"]


def test_reference_table_and_its_source_are_not_ambiguous(vschema: VSchema) -> None:
    assert where(vschema.find_table("countries")) == ("commerce", "countries")
    assert vschema.find_table("countries", keyspace="customer").source == "commerce.countries"


def test_unknown_unqualified_name_is_not_found_with_several_keyspaces(vschema: VSchema) -> None:
    with pytest.raises(TableNotFound, match="table nosuch not found"):
        vschema.find_table("nosuch")


def test_single_unsharded_keyspace_accepts_any_unqualified_name() -> None:
    only = build_vschema({"main": ({}, ["0"])})
    table = only.find_table("anything")
    assert where(table) == ("main", "anything") and table.implicit


def test_single_sharded_keyspace_does_not_accept_unknown_names() -> None:
    only = build_vschema({"main": ({"sharded": True}, ["-80", "80-"])})
    with pytest.raises(TableNotFound):
        only.find_table("anything")


def test_dual_resolves_to_the_first_keyspace_by_name(vschema: VSchema) -> None:
    assert where(vschema.find_table("dual")) == ("commerce", "dual")
    assert where(vschema.find_table("dual", keyspace="customer")) == ("customer", "dual")


def test_keyspace_requiring_explicit_routing_stays_out_of_unqualified_lookup() -> None:
    hidden = {**COMMERCE, "require_explicit_routing": True}
    customer = copy.deepcopy(CUSTOMER)
    customer["tables"]["customer"]["auto_increment"]["sequence"] = "commerce.customer_seq"
    vschema = build_vschema({"commerce": (hidden, ["0"]), "customer": (customer, ["-"])})
    assert where(vschema.find_table("audit")) == ("customer", "audit")
    assert where(vschema.find_table("commerce.audit")) == ("commerce", "audit")


# -- routing rules -----------------------------------------------------------------
def test_routing_rule_redirects_an_unqualified_name(vschema: VSchema) -> None:
    assert where(vschema.find_table("old_orders")) == ("customer", "corder")


def test_routing_rules_apply_before_the_vschema(vschema: VSchema) -> None:
    # "product" is a table of commerce anyway; the rule keyed "customer.product" sends
    # the name to commerce even with the sharded keyspace selected.
    assert where(vschema.find_table("product", keyspace="customer")) == ("commerce", "product")
    assert where(vschema.find_table("customer.product")) == ("commerce", "product")


def test_unqualified_rule_does_not_apply_once_a_keyspace_is_selected(vschema: VSchema) -> None:
    with pytest.raises(TableNotFound):
        vschema.find_table("old_orders", keyspace="customer")


def test_rule_without_targets_disables_the_table(vschema: VSchema) -> None:
    with pytest.raises(TableDisabled, match="table legacy has been disabled"):
        vschema.find_table("legacy")


def test_rule_with_two_targets_fails_when_used(vschema: VSchema) -> None:
    with pytest.raises(VSchemaError, match=r"table split has more than one target"):
        vschema.find_table("split")


def test_rule_to_an_unknown_keyspace_fails_when_used(vschema: VSchema) -> None:
    with pytest.raises(KeyspaceNotFound, match="unknown database 'nowhere'"):
        vschema.find_table("lost")


def test_rule_target_must_be_qualified(vschema: VSchema) -> None:
    with pytest.raises(
        VSchemaError, match=r"invalid table name: corder, it must be of the qualified form"
    ):
        vschema.find_table("unqualified_target")


def test_find_table_without_routing_ignores_rules(vschema: VSchema) -> None:
    with pytest.raises(TableNotFound):
        vschema.find_table_without_routing("old_orders")


def test_routing_rules_document_with_unknown_fields_is_rejected() -> None:
    with pytest.raises(VSchemaError, match=r"routing rules: rules\[0\]: unknown field 'to'"):
        build_vschema({"c": ({}, ["0"])}, {"rules": [{"from_table": "a", "to": ["c.a"]}]})


# -- shards and vindexes -----------------------------------------------------------
def test_shards_and_keyspace_id_routing(vschema: VSchema) -> None:
    assert vschema.shards("customer") == ["-80", "80-"]
    assert vschema.shards("commerce") == ["0"]
    assert vschema.shard_for("customer", hash_uint64(1)) == "-80"  # 166b40b4...
    assert vschema.shard_for("customer", hash_uint64(4)) == "80-"  # d2fd8867...
    assert vschema.shard_for("commerce", hash_uint64(4)) == "0"


def test_primary_vindex_maps_a_row_to_its_shard(vschema: VSchema) -> None:
    customer = vschema.find_table("customer")
    primary = customer.primary_vindex
    assert primary is not None and primary.covers("CUSTOMER_ID")
    ksid = primary.vindex.map([5])[0]  # type: ignore[attr-defined]
    assert vschema.shard_for("customer", ksid) == "-80"  # hash(5) = 70bb023c...


def test_find_vindex_by_name(vschema: VSchema) -> None:
    vindex = vschema.find_vindex("hash")
    assert vindex is not None and vindex.type_name == "hash"
    assert vschema.find_vindex("nosuch") is None
