"""Functional vindexes beyond the shared vectors: value types, NULL, out-of-range
values, verify and reverse mapping, registry."""

from __future__ import annotations

import hashlib
from decimal import Decimal

import pytest

from vschema.errors import UnknownVindexType, VindexError
from vschema.vindexes import VINDEX_TYPES, FunctionalVindex, LookupVindex, create_vindex


def functional(vtype: str) -> FunctionalVindex:
    vindex = create_vindex(f"my_{vtype}", vtype)
    assert isinstance(vindex, FunctionalVindex)
    return vindex


HASH_OF_1 = bytes.fromhex("166b40b44aba4bd6")
HASH_OF_MINUS_1 = bytes.fromhex("355550b2150e2451")


# -- hash --------------------------------------------------------------------------
@pytest.mark.parametrize("value", [1, "1", b"1", Decimal("1"), True])
def test_hash_maps_every_form_of_an_integer_literal_alike(value: object) -> None:
    assert functional("hash").map([value]) == [HASH_OF_1]


def test_hash_takes_a_negative_number_as_its_twos_complement() -> None:
    assert functional("hash").map([-1, "-1", 2**64 - 1]) == [HASH_OF_MINUS_1] * 3


def test_hash_maps_null_to_no_shard() -> None:
    assert functional("hash").map([None]) == [None]


def test_hash_maps_many_values_at_once_as_it_maps_each_alone() -> None:
    vindex = functional("hash")
    values: list[object] = [1, None, "-1", 2**64 - 1, *range(1000, 1100), None, b"1"]
    assert vindex.map(values) == [vindex.map([v])[0] for v in values]
    assert vindex.map(values)[:4] == [HASH_OF_1, None, HASH_OF_MINUS_1, HASH_OF_MINUS_1]
    with pytest.raises(VindexError, match=r"vindex my_hash \(hash\): cannot map value"):
        vindex.map([1, 2, 3, 4, "abc"])


@pytest.mark.parametrize("value", ["abc", "1.5", 1.5, Decimal("1.5"), 2**64, -(2**63) - 1, ""])
def test_hash_of_a_value_without_uint64_form_is_an_error_naming_the_vindex(value: object) -> None:
    with pytest.raises(VindexError, match=r"vindex my_hash \(hash\): cannot map value"):
        functional("hash").map([value])


def test_hash_reverse_map_recovers_the_value() -> None:
    vindex = create_vindex("h", "hash")
    ksids = vindex.map([0, 42, 2**64 - 1])  # type: ignore[attr-defined]
    assert vindex.reverse_map(ksids) == [0, 42, 2**64 - 1]  # type: ignore[attr-defined]


def test_hash_verify_compares_each_value_with_its_keyspace_id() -> None:
    assert functional("hash").verify([1, 2], [HASH_OF_1, HASH_OF_1]) == [True, False]


def test_verify_with_mismatched_lengths_is_an_error() -> None:
    with pytest.raises(VindexError, match="verify got 2 values but 1 keyspace ids"):
        functional("hash").verify([1, 2], [HASH_OF_1])


# -- numeric and reverse_bits ------------------------------------------------------
def test_numeric_keyspace_id_is_the_big_endian_value() -> None:
    assert functional("numeric").map([0x0102030405060708]) == [bytes(range(1, 9))]


@pytest.mark.parametrize("value", [None, -1, 2**64, "abc", 1.1, Decimal("2.5")])
def test_numeric_maps_unconvertible_values_to_no_shard(value: object) -> None:
    assert functional("numeric").map([value]) == [None]


def test_numeric_reverse_map_rejects_keyspace_ids_not_8_bytes_long() -> None:
    with pytest.raises(VindexError, match="length of keyspace id is not 8: 3"):
        create_vindex("n", "numeric").reverse_map([b"abc"])  # type: ignore[attr-defined]


def test_reverse_bits_mirrors_the_bits_and_reverses_back() -> None:
    vindex = create_vindex("r", "reverse_bits")
    assert vindex.map([1, 2**63]) == [bytes.fromhex("8000000000000000"), bytes(7) + b"\x01"]  # type: ignore[attr-defined]
    assert vindex.reverse_map(vindex.map([12345])) == [12345]  # type: ignore[attr-defined]


def test_reverse_bits_maps_negative_numbers_to_no_shard() -> None:
    assert functional("reverse_bits").map([-5, None]) == [None, None]


# -- byte-oriented vindexes --------------------------------------------------------
def test_xxhash_hashes_the_literal_text_of_integers() -> None:
    vindex = functional("xxhash")
    assert vindex.map([1]) == vindex.map(["1"]) == vindex.map([b"1"])


def test_xxhash_maps_null_as_the_empty_string() -> None:
    assert functional("xxhash").map([None]) == functional("xxhash").map([b""])


def test_binary_keyspace_id_is_the_value_itself() -> None:
    assert functional("binary").map([b"\x00\xffab", "é"]) == [b"\x00\xffab", "é".encode()]


def test_binary_maps_null_to_the_empty_keyspace_id_like_vitess() -> None:
    assert functional("binary").map([None]) == [b""]


def test_binary_md5_hashes_the_raw_bytes() -> None:
    assert functional("binary_md5").map([b"test1"]) == [hashlib.md5(b"test1").digest()]


def test_null_vindex_sends_every_value_including_null_to_keyspace_id_zero() -> None:
    assert functional("null").map([1, "x", None]) == [b"\x00"] * 3
    assert functional("null").verify([7, 7], [b"\x00", b"\x01"]) == [True, False]


# -- registry ----------------------------------------------------------------------
EXPECTED_COST_AND_UNIQUENESS = {
    "numeric": (0, True),
    "null": (0, True),
    "binary": (0, True),
    "hash": (1, True),
    "xxhash": (1, True),
    "binary_md5": (1, True),
    "unicode_loose_md5": (1, True),
    "unicode_loose_xxhash": (1, True),
    "reverse_bits": (1, True),
    "lookup_unique": (10, True),
    "lookup_hash_unique": (10, True),
    "consistent_lookup_unique": (10, True),
    "lookup": (20, False),
    "lookup_hash": (20, False),
    "consistent_lookup": (20, False),
}


def test_registry_knows_every_vindex_type_of_the_brief() -> None:
    assert set(VINDEX_TYPES) == set(EXPECTED_COST_AND_UNIQUENESS)


@pytest.mark.parametrize("vtype", sorted(EXPECTED_COST_AND_UNIQUENESS))
def test_vindex_cost_and_uniqueness_match_vitess(vtype: str) -> None:
    params = {"table": "lookup.t_idx", "from": "c", "to": "keyspace_id"}
    vindex = create_vindex("v", vtype, params if "lookup" in vtype else None)
    assert (vindex.cost, vindex.unique) == EXPECTED_COST_AND_UNIQUENESS[vtype]
    assert vindex.needs_lookup is ("lookup" in vtype)
    assert isinstance(vindex, LookupVindex) is ("lookup" in vtype)
    assert (vindex.name, vindex.type_name) == ("v", vtype)


def test_unknown_vindex_type_is_an_error_naming_vindex_and_type() -> None:
    with pytest.raises(
        UnknownVindexType, match=r"vindexType 'hashh' not found \(vindex user_idx\)"
    ):
        create_vindex("user_idx", "hashh")


def test_hash_maps_many_values_in_one_call_as_it_maps_each() -> None:
    vindex = functional("hash")
    values: list[object] = [None if i % 7 == 0 else ("-1" if i % 11 == 0 else i * 7919) for i in range(100)]
    assert vindex.map(values) == [vindex.keyspace_id(v) for v in values]  # type: ignore[attr-defined]
