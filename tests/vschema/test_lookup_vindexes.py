"""Lookup vindexes: parameters, the SQL they generate, and how lookup rows are read."""

from __future__ import annotations

import pytest

from vschema.errors import VindexError
from vschema.vindexes import LookupVindex, create_vindex
from vschema.vindexes.consistent_lookup import ConsistentLookupBase
from vschema.vindexes.hash import hash_uint64

PARAMS = {"table": "lookup.name_idx", "from": "name", "to": "keyspace_id"}


def lookup(vtype: str = "lookup", **extra: str) -> LookupVindex:
    vindex = create_vindex("name_idx", vtype, {**PARAMS, **extra}, owner="customer")
    assert isinstance(vindex, LookupVindex)
    return vindex


def test_lookup_exposes_its_table_columns_and_flags() -> None:
    vindex = lookup(autocommit="true", ignore_nulls="true")
    assert vindex.table == "lookup.name_idx"
    assert (vindex.table_keyspace, vindex.table_name) == ("lookup", "name_idx")
    assert vindex.from_columns == ["name"] and vindex.to_column == "keyspace_id"
    assert (vindex.autocommit, vindex.write_only, vindex.ignore_nulls) == (True, False, True)
    assert vindex.consistent is False and vindex.owner == "customer"


def test_unqualified_lookup_table_has_no_keyspace() -> None:
    vindex = create_vindex("v", "lookup", {**PARAMS, "table": "name_idx"})
    assert isinstance(vindex, LookupVindex)
    assert (vindex.table_keyspace, vindex.table_name) == (None, "name_idx")


def test_from_parameter_lists_several_columns() -> None:
    vindex = lookup(**{"from": "a, b"})
    assert vindex.from_columns == ["a", "b"]


@pytest.mark.parametrize("missing", ["table", "from", "to"])
def test_missing_lookup_parameter_is_an_error_naming_the_vindex(missing: str) -> None:
    params = {k: v for k, v in PARAMS.items() if k != missing}
    with pytest.raises(
        VindexError, match=rf"vindex v \(lookup\): missing required parameter '{missing}'"
    ):
        create_vindex("v", "lookup", params)


def test_boolean_parameter_must_be_true_or_false() -> None:
    with pytest.raises(VindexError, match="write_only value must be 'true' or 'false': 'yes'"):
        lookup(write_only="yes")


def test_unknown_parameters_are_kept_aside() -> None:
    assert lookup(colour="blue").unknown_params == ["colour"]


def test_lookup_query_selects_from_and_to_for_a_batch_of_values() -> None:
    assert lookup().lookup_query(3) == (
        "select name, keyspace_id from name_idx where name in (%s, %s, %s)"
    )
    assert lookup().lookup_query(1, for_update=True).endswith(" for update")


def test_only_integral_values_are_looked_up_in_one_batch() -> None:
    assert lookup().batchable([1, 2, 3])
    assert not lookup().batchable([1, "a"])


def test_rows_of_a_batched_lookup_are_grouped_per_input_value() -> None:
    rows = [(2, b"\x20"), (1, b"\x10"), (2, b"\x21")]
    assert lookup().ksids_from_rows([1, 2, 3], rows) == [[b"\x10"], [b"\x20", b"\x21"], []]


def test_text_protocol_rows_match_integer_inputs() -> None:
    assert lookup().ksids_from_rows([1, 2], [(b"2", b"\x20")]) == [[], [b"\x20"]]


def test_non_unique_lookup_gives_every_keyspace_id_and_none_when_missing() -> None:
    assert lookup().destinations([[b"\x10", b"\x20"], []]) == [[b"\x10", b"\x20"], None]


def test_unique_lookup_with_two_rows_for_one_value_is_an_error() -> None:
    with pytest.raises(VindexError, match="unexpected multiple results from lookup table"):
        lookup("lookup_unique").destinations([[b"\x10", b"\x20"]])


def test_verify_query_checks_one_value_against_one_keyspace_id() -> None:
    assert lookup().verify_query() == (
        "select name from name_idx where name = %s and keyspace_id = %s"
    )


def test_insert_query_writes_one_row_per_owner_row() -> None:
    assert lookup().insert_query(2) == (
        "insert into name_idx(name, keyspace_id) values (%s, %s), (%s, %s)"
    )
    assert lookup().insert_query(1, ignore=True).startswith("insert ignore into name_idx")


def test_autocommit_non_unique_lookup_upserts_like_vitess() -> None:
    assert (
        lookup(autocommit="true")
        .insert_query(1)
        .endswith(" on duplicate key update name=values(name), keyspace_id=values(keyspace_id)")
    )
    assert "on duplicate" not in lookup("lookup_unique", autocommit="true").insert_query(1)


def test_insert_rows_are_sorted_and_carry_the_keyspace_id() -> None:
    rows = lookup().insert_rows([["bob"], ["alice"]], [b"\x02", b"\x01"])
    assert rows == [("alice", b"\x01"), ("bob", b"\x02")]


def test_null_from_value_is_an_error_unless_ignore_nulls() -> None:
    with pytest.raises(VindexError, match="input has null values: row: 1, col: 0"):
        lookup().insert_rows([["a"], [None]], [b"\x01", b"\x02"])
    assert lookup(ignore_nulls="true").insert_rows([["a"], [None]], [b"\x01", b"\x02"]) == [
        ("a", b"\x01")
    ]


def test_delete_query_matches_from_columns_and_keyspace_id() -> None:
    vindex = lookup(**{"from": "a,b"})
    assert (
        vindex.delete_query() == "delete from name_idx where a = %s and b = %s and keyspace_id = %s"
    )
    assert vindex.deletes_rows
    assert not lookup(autocommit="true").deletes_rows


def test_lookup_hash_stores_the_unhashed_id_and_reads_back_the_hash() -> None:
    vindex = lookup("lookup_hash")
    assert vindex.row_value_for_ksid(hash_uint64(42)) == 42
    assert vindex.ksid_from_row_value(b"42") == hash_uint64(42)
    assert vindex.ksids_from_rows(["x"], [("x", 7)]) == [[hash_uint64(7)]]


def test_consistent_lookup_builds_vitess_lock_and_update_queries() -> None:
    vindex = create_vindex("name_idx", "consistent_lookup_unique", PARAMS, owner="customer")
    assert isinstance(vindex, ConsistentLookupBase) and vindex.consistent
    vindex.set_owner_info("customer", "customer", ["name"])
    assert vindex.lock_lookup_query() == (
        "select keyspace_id from name_idx where name = %s for update"
    )
    assert vindex.lock_owner_query() == (
        "select name from customer where name = %s lock in share mode"
    )
    assert vindex.update_lookup_query() == "update name_idx set keyspace_id = %s where name = %s"


def test_consistent_lookup_refuses_autocommit() -> None:
    with pytest.raises(VindexError, match="autocommit is not supported"):
        lookup("consistent_lookup", autocommit="true")


def test_owner_columns_must_match_from_columns() -> None:
    with pytest.raises(VindexError, match="owner table column count does not match vindex"):
        lookup().set_owner_info("customer", "customer", ["a", "b"])


def test_write_only_lookup_is_flagged_for_scatter_reads() -> None:
    assert lookup(write_only="true").write_only
