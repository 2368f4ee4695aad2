"""Vitess's ALTER VSCHEMA statements: parsed from text and applied to keyspace documents (pure),
with Vitess's texts (topotools.ApplyVSchemaDDL, executor_vschema_ddl_test.go)."""

from __future__ import annotations

import copy

import pytest

from vschema.ddl import (
    ADD_AUTO_INC,
    ADD_COL_VINDEX,
    CREATE_VINDEX,
    DROP_AUTO_INC,
    DROP_COL_VINDEX,
    DROP_SEQUENCE,
    DROP_TABLE,
    DROP_VINDEX,
    QualifiedName,
    VSchemaDDLError,
    VSchemaDDLSyntaxError,
    apply_vschema_ddl,
    is_vschema_ddl,
    parse_vschema_ddl,
)
from vschema.loader import build_vschema

SHARDED = {
    "sharded": True,
    "vindexes": {"hash": {"type": "hash"}},
    "tables": {"customer": {"column_vindexes": [{"column": "customer_id", "name": "hash"}]}},
}
UNSHARDED = {"sharded": False, "tables": {"seq": {"type": "sequence"}}}


def apply(doc: dict, sql: str, keyspace: str = "ks") -> dict:
    return apply_vschema_ddl(keyspace, doc, parse_vschema_ddl(sql))


def refusal(doc: dict, sql: str, keyspace: str = "ks") -> str:
    with pytest.raises(VSchemaDDLError) as e:
        apply(doc, sql, keyspace)
    return str(e.value)


def test_every_statement_form_parses() -> None:
    cases = {
        "alter vschema create vindex ks.hash_vdx using hash": (CREATE_VINDEX, QualifiedName("hash_vdx", "ks")),
        "ALTER VSCHEMA DROP VINDEX hash_vdx": (DROP_VINDEX, QualifiedName("hash_vdx")),
        "alter vschema drop table `ks`.`t`;": (DROP_TABLE, QualifiedName("t", "ks")),
        "alter vschema drop sequence seq": (DROP_SEQUENCE, QualifiedName("seq")),
        "alter vschema on t drop vindex v": (DROP_COL_VINDEX, QualifiedName("t")),
        "alter vschema on ks.t drop auto_increment": (DROP_AUTO_INC, QualifiedName("t", "ks")),
    }
    for sql, (action, table) in cases.items():
        ddl = parse_vschema_ddl(sql)
        assert (ddl.action, ddl.table) == (action, table), sql
    assert is_vschema_ddl("  Alter  VSchema add table t") and not is_vschema_ddl("alter table t add c int")


def test_add_vindex_with_parameters_keeps_owner_apart() -> None:
    ddl = parse_vschema_ddl(
        "alter vschema on customer.corder add vindex corder_lkp(corder_id, sku) using consistent_lookup_unique "
        "with owner=`corder`, table=`product.corder_idx`, from='corder_id,sku', to=keyspace_id"
    )
    assert ddl.action == ADD_COL_VINDEX
    assert (ddl.table, ddl.vindex, ddl.vindex_type, ddl.columns) == (
        QualifiedName("corder", "customer"), "corder_lkp", "consistent_lookup_unique", ("corder_id", "sku"))
    assert ddl.owner_and_params() == (
        "corder", {"table": "product.corder_idx", "from": "corder_id,sku", "to": "keyspace_id"})


def test_add_auto_increment_names_the_sequence_with_its_keyspace() -> None:
    ddl = parse_vschema_ddl("alter vschema on t add auto_increment id using product.customer_seq")
    assert (ddl.action, ddl.auto_increment_column, str(ddl.sequence)) == (ADD_AUTO_INC, "id", "product.customer_seq")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("alter vschema add vindex x", "syntax error at position 25 near 'vindex'"),
        ("alter vschema on t add vindex v", "syntax error at position 32"),
        ("alter vschema on t add vindex v(a) using hash extra", "syntax error at position 52 near 'extra'"),
        ("alter vschema on t add auto_increment id seq", "syntax error at position 45 near 'seq'"),
        ("alter vschema create vindex v using hash with owner", "syntax error at position 52"),
    ],
)
def test_syntax_errors_name_the_position_as_vitess_does(sql: str, message: str) -> None:
    with pytest.raises(VSchemaDDLSyntaxError) as e:
        parse_vschema_ddl(sql)
    assert str(e.value) == message


def test_create_vindex_makes_an_empty_keyspace_sharded_and_refuses_a_duplicate() -> None:
    doc = apply({}, "alter vschema create vindex ks.hash_vdx using hash")
    assert doc == {"sharded": True, "vindexes": {"hash_vdx": {"type": "hash"}}}
    assert refusal(doc, "alter vschema create vindex hash_vdx using xxhash") == (
        "vindex hash_vdx already exists in keyspace ks")


def test_add_vindex_creates_the_table_entry_and_the_vindex() -> None:
    doc = apply(SHARDED, "alter vschema on corder add vindex hash(customer_id)")
    doc = apply(doc, "alter vschema on corder add vindex sku_x(sku, price) using xxhash")
    assert doc["tables"]["corder"] == {"column_vindexes": [
        {"column": "customer_id", "name": "hash"}, {"columns": ["sku", "price"], "name": "sku_x"}]}
    assert doc["vindexes"]["sku_x"] == {"type": "xxhash"}
    assert SHARDED["tables"].keys() == {"customer"}  # the input is never changed
    built = build_vschema({"ks": (doc, ["-80", "80-"])})
    assert built.find_table("corder", "ks").primary_vindex.name == "hash"


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("alter vschema on t add vindex nope(id)", "vindex nope does not exist in keyspace ks"),
        ("alter vschema on t add vindex hash(id) using xxhash", "vindex hash defined with type hash not xxhash"),
        ("alter vschema on t add vindex hash(id) using hash with owner=t", "vindex hash defined with owner  not t"),
        ("alter vschema on t add vindex hash(id) using hash with foo=bar", "vindex hash defined with different parameters"),
        ("alter vschema on customer add vindex hash(id)", "vindex hash already defined on table customer"),
        ("alter vschema on nowhere drop vindex hash", "table ks.nowhere not defined in vschema"),
        ("alter vschema on customer drop vindex other", "vindex other not defined in table ks.customer"),
        ("alter vschema add table t", "add vschema table: unsupported on sharded keyspace ks"),
        ("alter vschema add sequence s", "add sequence table: unsupported on sharded keyspace ks"),
        ("alter vschema drop sequence s", "drop sequence table: unsupported on sharded keyspace ks"),
        ("alter vschema drop table nowhere", "vschema does not contain table nowhere in keyspace ks"),
        ("alter vschema drop vindex nope", "vindex nope does not exists in keyspace ks"),
        ("alter vschema drop vindex hash", "can not drop vindex cause hash still defined on table customer"),
        ("alter vschema on nowhere add auto_increment id using s", "vschema does not contain table nowhere in keyspace ks"),
        ("alter vschema on nowhere drop auto_increment", "vschema does not contain table nowhere in keyspace ks"),
    ],
)
def test_refusals_have_vitess_texts_and_change_nothing(sql: str, message: str) -> None:
    before = copy.deepcopy(SHARDED)
    assert refusal(SHARDED, sql) == message
    assert before == SHARDED


def test_drop_the_last_vindex_of_a_table_takes_the_table_out() -> None:
    doc = apply(SHARDED, "alter vschema on customer drop vindex hash")
    assert "tables" not in doc and doc["vindexes"] == {"hash": {"type": "hash"}}


def test_unsharded_tables_and_sequences_come_and_go() -> None:
    doc = apply(UNSHARDED, "alter vschema add table product")
    doc = apply(doc, "alter vschema add sequence order_seq")
    assert doc["tables"] == {"seq": {"type": "sequence"}, "product": {}, "order_seq": {"type": "sequence"}}
    assert refusal(doc, "alter vschema add table product") == "vschema already contains table product in keyspace ks"
    assert refusal(doc, "alter vschema add sequence seq") == "vschema already contains sequence seq in keyspace ks"
    doc = apply(apply(doc, "alter vschema drop sequence order_seq"), "alter vschema drop table product")
    assert doc == UNSHARDED
    assert refusal(doc, "alter vschema drop sequence nope") == "vschema does not contain sequence nope in keyspace ks"


def test_auto_increment_is_added_once_and_dropped() -> None:
    doc = apply(SHARDED, "alter vschema on customer add auto_increment customer_id using lookup.seq")
    assert doc["tables"]["customer"]["auto_increment"] == {"column": "customer_id", "sequence": "lookup.seq"}
    assert refusal(doc, "alter vschema on customer add auto_increment id using seq") == (
        'vschema already contains auto inc column:"customer_id" sequence:"lookup.seq" on table customer in keyspace ks')
    assert apply(doc, "alter vschema on customer drop auto_increment") == SHARDED
