"""Loading Vitess vschema JSON: what Vitess accepts loads, what it rejects fails with a
message naming the keyspace, table and vindex concerned."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from vschema.errors import InvalidShardName, InvalidVSchema
from vschema.loader import build_vschema, load_keyspace, load_vschema_file, vschema_to_json
from vschema.vindexes import LookupVindex

DATA = Path(__file__).resolve().parent / "data"


def doc(name: str) -> dict[str, Any]:
    return load_vschema_file(DATA / name)


def example_vschema():
    return build_vschema(
        {
            "customer": (doc("customer_sharded.json"), ["-80", "80-"]),
            "commerce": (doc("commerce_sequences.json"), ["0"]),
        }
    )


# -- Vitess's own examples ---------------------------------------------------------
def test_vitess_local_example_customer_keyspace_loads() -> None:
    ks = example_vschema().keyspace("customer")
    assert ks.sharded and ks.shard_names == ["-80", "80-"]
    customer = ks.tables["customer"]
    assert customer.primary_vindex is not None
    assert customer.primary_vindex.columns == ["customer_id"]
    assert customer.primary_vindex.name == "hash"
    assert customer.primary_vindex.type_name == "xxhash"


def test_auto_increment_sequences_resolve_into_the_unsharded_keyspace() -> None:
    vschema = example_vschema()
    corder = vschema.keyspace("customer").tables["corder"]
    assert corder.auto_increment is not None
    assert corder.auto_increment.column == "order_id"
    seq = corder.auto_increment.sequence_table
    assert seq is not None and (seq.keyspace, seq.name, seq.is_sequence) == (
        "commerce",
        "order_seq",
        True,
    )


def test_qualified_sequence_name_resolves_in_that_keyspace() -> None:
    customer = doc("customer_sharded.json")
    customer["tables"]["customer"]["auto_increment"]["sequence"] = "commerce.customer_seq"
    vschema = build_vschema(
        {"customer": (customer, ["-"]), "commerce": (doc("commerce_sequences.json"), ["0"])}
    )
    seq = vschema.keyspace("customer").tables["customer"].auto_increment.sequence_table  # type: ignore[union-attr]
    assert seq is not None and seq.qualified_name == "commerce.customer_seq"


def user_vschema():
    return build_vschema(
        {
            "user": (doc("user_sharded.json"), ["-40", "40-80", "80-c0", "c0-"]),
            "lookup": (doc("lookup_unsharded.json"), ["0"]),
        }
    )


def test_owned_lookup_vindexes_load_with_their_owner_columns() -> None:
    user = user_vschema().keyspace("user").tables["user"]
    assert [cv.name for cv in user.column_vindexes] == ["hash", "email_idx", "phone_idx"]
    assert [cv.name for cv in user.owned_vindexes] == ["email_idx", "phone_idx"]
    email = user.owned_vindexes[0].vindex
    assert isinstance(email, LookupVindex) and email.consistent
    assert (email.owner, email.owner_keyspace, email.owner_columns) == ("user", "user", ["email"])
    assert (email.table_keyspace, email.table_name) == ("lookup", "user_email_idx")


def test_lookup_not_owned_by_the_table_using_it_is_not_owned() -> None:
    tag = user_vschema().keyspace("user").tables["user_tag"]
    assert [cv.owned for cv in tag.column_vindexes] == [False, False]


def test_column_vindexes_order_by_cost_for_the_planner() -> None:
    order = user_vschema().keyspace("user").tables["user_order"]
    assert [(cv.name, cv.cost) for cv in order.ordered_vindexes] == [
        ("hash", 1),
        ("order_sku_idx", 20),
    ]


def test_unicode_loose_md5_can_be_a_primary_vindex() -> None:
    tag = user_vschema().keyspace("user").tables["user_tag"]
    assert tag.primary_vindex is not None and tag.primary_vindex.type_name == "unicode_loose_md5"


def test_qualified_and_unqualified_sequences_resolve_to_the_unsharded_keyspace() -> None:
    ks = user_vschema().keyspace("user")
    for table, seq in (("user", "user_seq"), ("user_order", "order_seq")):
        ai = ks.tables[table].auto_increment
        assert ai is not None and ai.sequence_table is not None
        assert ai.sequence_table.qualified_name == f"lookup.{seq}"


def test_unsharded_keyspace_without_vschema_document_loads() -> None:
    ks = load_keyspace("commerce", None, ["0"])
    assert not ks.sharded and ks.shard_names == ["0"]


def test_every_keyspace_has_dual() -> None:
    vschema = example_vschema()
    assert vschema.keyspace("customer").tables["dual"].is_reference
    assert vschema.keyspace("commerce").tables["dual"].implicit


def test_pinned_table_and_declared_columns_load() -> None:
    ks = load_keyspace(
        "ks",
        {
            "sharded": True,
            "tables": {
                "settings": {
                    "pinned": "80",
                    "columns": [{"name": "id", "type": "INT64"}, {"name": "v"}],
                    "column_list_authoritative": True,
                },
                "countries": {"type": "reference"},
            },
        },
        ["-80", "80-"],
    )
    settings = ks.tables["settings"]
    assert settings.pinned == b"\x80" and ks.shard_for(settings.pinned) == "80-"
    assert [(c.name, c.type) for c in settings.columns] == [("id", "INT64"), ("v", None)]
    assert ks.tables["countries"].is_reference


def test_multi_column_vindex_with_columns_list_loads() -> None:
    ks = load_keyspace(
        "ks",
        {
            "sharded": True,
            "vindexes": {
                "h": {"type": "hash"},
                "ab_idx": {
                    "type": "lookup",
                    "owner": "t",
                    "params": {"table": "ab_idx", "from": "a,b", "to": "keyspace_id"},
                },
            },
            "tables": {
                "t": {
                    "column_vindexes": [
                        {"column": "id", "name": "h"},
                        {"columns": ["a", "b"], "name": "ab_idx"},
                    ]
                }
            },
        },
        ["-"],
    )
    assert ks.tables["t"].column_vindexes[1].columns == ["a", "b"]


# -- round trip ------------------------------------------------------------------
def test_vschema_to_json_round_trips_a_keyspace() -> None:
    original = doc("user_sharded.json")
    lookup = doc("lookup_unsharded.json")
    first = build_vschema({"user": (original, ["-80", "80-"]), "lookup": (lookup, ["0"])})
    persisted = vschema_to_json(first.keyspace("user"))
    assert json.loads(json.dumps(persisted)) == persisted
    second = build_vschema({"user": (persisted, ["-80", "80-"]), "lookup": (lookup, ["0"])})
    assert vschema_to_json(second.keyspace("user")) == persisted
    assert persisted["tables"] == original["tables"]
    assert persisted["vindexes"] == original["vindexes"]


def test_vschema_to_json_leaves_out_empty_fields_and_dual() -> None:
    assert vschema_to_json(load_keyspace("commerce", {"tables": {"product": {}}}, ["0"])) == {
        "tables": {"product": {}}
    }


def test_a_table_added_to_the_persisted_form_loads_back() -> None:
    vschema = example_vschema()
    persisted = vschema_to_json(vschema.keyspace("customer"))
    persisted["tables"]["invoice"] = {
        "column_vindexes": [{"column": "customer_id", "name": "hash"}]
    }
    ks = load_keyspace("customer", persisted, ["-80", "80-"])
    assert ks.tables["invoice"].primary_vindex is not None


# -- rejections --------------------------------------------------------------------
SHARDED: dict[str, Any] = {
    "sharded": True,
    "vindexes": {
        "hash": {"type": "hash"},
        "name_idx": {
            "type": "lookup",
            "owner": "customer",
            "params": {"table": "lookup.name_idx", "from": "name", "to": "keyspace_id"},
        },
    },
    "tables": {
        "customer": {
            "column_vindexes": [
                {"column": "id", "name": "hash"},
                {"column": "name", "name": "name_idx"},
            ]
        }
    },
}


def mutated(change) -> dict[str, Any]:
    out = copy.deepcopy(SHARDED)
    change(out)
    return out


def test_the_base_document_of_the_rejection_tests_loads() -> None:
    assert load_keyspace("customer", SHARDED, ["-80", "80-"]).tables["customer"]


REJECTIONS = [
    (
        "unknown vindex name in a table",
        lambda d: d["tables"]["customer"]["column_vindexes"][0].update(name="hsh"),
        r"keyspace customer: vindex hsh not found for table customer",
    ),
    (
        "sharded table without column vindexes",
        lambda d: d["tables"].update(orders={}),
        r"keyspace customer: missing primary col vindex for table: orders",
    ),
    (
        "owner table missing",
        lambda d: d["vindexes"]["name_idx"].update(owner="client"),
        r"keyspace customer: owner table client of vindex name_idx not found in keyspace",
    ),
    (
        "unknown vindex type",
        lambda d: d["vindexes"]["hash"].update(type="hashh"),
        r"keyspace customer: vindexType 'hashh' not found \(vindex hash\)",
    ),
    (
        "non-unique primary vindex",
        lambda d: d["tables"]["customer"]["column_vindexes"].reverse(),
        r"keyspace customer: primary vindex name_idx is not Unique for table customer",
    ),
    (
        "owned primary vindex",
        lambda d: (
            d["vindexes"]["name_idx"].update(type="lookup_unique"),
            d["tables"]["customer"]["column_vindexes"].reverse(),
        ),
        r"keyspace customer: primary vindex name_idx cannot be owned for table customer",
    ),
    (
        "column and columns together",
        lambda d: d["tables"]["customer"]["column_vindexes"][0].update(columns=["a"]),
        r"can't use column and columns at the same time in vindex \(hash\) and table \(customer\)",
    ),
    (
        "no column at all",
        lambda d: d["tables"]["customer"]["column_vindexes"][0].pop("column"),
        r"must specify at least one column for vindex \(hash\) and table \(customer\)",
    ),
    (
        "bad table type",
        lambda d: d["tables"]["customer"].update(type="view"),
        r"keyspace customer: table customer: unidentified table type view",
    ),
    (
        "sequence in a sharded keyspace",
        lambda d: d["tables"].update(seq={"type": "sequence"}),
        r"keyspace customer: sequence table has to be in an unsharded keyspace or must be pinned: seq",
    ),
    (
        "bad pinned hex",
        lambda d: d["tables"].update(p={"pinned": "zz"}),
        r"keyspace customer: table p: could not decode the keyspace id for pin",
    ),
    (
        "duplicate declared column",
        lambda d: d["tables"]["customer"].update(columns=[{"name": "a"}, {"name": "A"}]),
        r"keyspace customer: duplicate column name 'A' for table: customer",
    ),
    (
        "misspelt table field",
        lambda d: d["tables"]["customer"].update(colum_vindexes=[]),
        r"keyspace customer: table customer: unknown field 'colum_vindexes'",
    ),
    (
        "lookup vindex without params",
        lambda d: d["vindexes"]["name_idx"].pop("params"),
        r"keyspace customer: vindex name_idx \(lookup\): missing required parameter 'table'",
    ),
    (
        "non-string vindex param",
        lambda d: d["vindexes"]["name_idx"]["params"].update(autocommit=True),
        r"keyspace customer: vindex name_idx: params: autocommit: expected a string, got true",
    ),
    (
        "sharded flag not a boolean",
        lambda d: d.update(sharded="yes"),
        r"keyspace customer: sharded: expected true or false",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"), [r[1:] for r in REJECTIONS], ids=[r[0] for r in REJECTIONS]
)
def test_invalid_vschema_is_rejected_naming_the_culprit(change, message: str) -> None:
    with pytest.raises(InvalidVSchema, match=message):
        load_keyspace("customer", mutated(change), ["-80", "80-"])


def test_bad_shard_name_is_rejected_naming_the_keyspace() -> None:
    with pytest.raises(InvalidShardName, match=r"keyspace customer: invalid shard name '80'"):
        load_keyspace("customer", SHARDED, ["-80", "80"])


def test_shards_not_covering_the_key_range_are_rejected() -> None:
    with pytest.raises(InvalidVSchema, match=r"keyspace customer: shards do not cover"):
        load_keyspace("customer", SHARDED, ["-80", "c0-"])


def test_unsharded_keyspace_with_several_shards_is_rejected() -> None:
    with pytest.raises(
        InvalidVSchema, match=r"keyspace commerce: an unsharded keyspace has exactly one shard"
    ):
        load_keyspace("commerce", {}, ["-80", "80-"])


def test_unresolvable_sequence_is_rejected_naming_keyspace_and_table() -> None:
    with pytest.raises(
        InvalidVSchema,
        match=r"keyspace customer: table customer: cannot resolve sequence customer_seq: table customer_seq not found",
    ):
        build_vschema(
            {
                "customer": (doc("customer_sharded.json"), ["-"]),
                "other": ({"sharded": True, "tables": {}}, ["-"]),
            }
        )


def test_sequence_pointing_at_a_normal_table_is_rejected() -> None:
    commerce = {"tables": {"customer_seq": {"type": "sequence"}, "order_seq": {}}}
    with pytest.raises(
        InvalidVSchema,
        match=r"table corder: auto_increment sequence order_seq is a table of type 'normal'",
    ):
        build_vschema(
            {
                "customer": (doc("customer_sharded.json"), ["-"]),
                "commerce": (commerce, ["0"]),
            }
        )


def test_reference_source_in_a_missing_keyspace_is_rejected() -> None:
    with pytest.raises(
        InvalidVSchema,
        match=r"keyspace ks: source 'nope.t' references a non-existent keyspace 'nope'",
    ):
        build_vschema(
            {
                "ks": (
                    {"sharded": True, "tables": {"t": {"type": "reference", "source": "nope.t"}}},
                    ["-"],
                )
            }
        )


def test_reference_source_in_the_same_keyspace_is_rejected() -> None:
    with pytest.raises(
        InvalidVSchema, match="may not reference a table in the same keyspace as table: t"
    ):
        load_keyspace("ks", {"tables": {"t": {"type": "reference", "source": "ks.u"}}}, ["0"])


def test_vschema_file_that_is_not_an_object_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "vschema.json"
    path.write_text("[]")
    with pytest.raises(InvalidVSchema, match="expected a JSON object"):
        load_vschema_file(path)
