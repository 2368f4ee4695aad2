"""Key ranges and shard names: parsing, containment, keyspace id -> shard."""

from __future__ import annotations

import pytest

from vschema.errors import InvalidShardName, InvalidVSchema
from vschema.keyrange import KeyRange, ShardMap, shard_for_keyspace_id


@pytest.mark.parametrize(
    ("name", "start", "end"),
    [
        ("-80", b"", b"\x80"),
        ("80-", b"\x80", b""),
        ("40-80", b"\x40", b"\x80"),
        ("-", b"", b""),
        ("0", b"", b""),
        ("4000-8000", b"\x40", b"\x80"),
        ("-A0", b"", b"\xa0"),
    ],
)
def test_shard_name_parses_to_its_key_range(name: str, start: bytes, end: bytes) -> None:
    rng = KeyRange.parse(name)
    assert (rng.start, rng.end, rng.name) == (start, end, name)


@pytest.mark.parametrize("name", ["", "80", "x-80", "8-80", "80-40", "40-40", "-80-c0", "1"])
def test_malformed_shard_name_is_rejected(name: str) -> None:
    with pytest.raises(InvalidShardName):
        KeyRange.parse(name)


def test_unsharded_shard_names_cover_every_keyspace_id() -> None:
    for name in ("0", "-"):
        rng = KeyRange.parse(name)
        assert rng.is_full
        assert rng.contains(b"") and rng.contains(b"\xff" * 8) and rng.contains(b"\x00")


def test_start_is_inclusive_and_end_exclusive() -> None:
    rng = KeyRange.parse("40-80")
    assert rng.contains(b"\x40")
    assert rng.contains(b"\x7f\xff\xff\xff\xff\xff\xff\xff")
    assert not rng.contains(b"\x80")
    assert not rng.contains(b"\x3f\xff")


def test_keyspace_ids_compare_as_byte_strings_not_numbers() -> None:
    # A one-byte keyspace id 0x80 sorts before the 8-byte 0x8000000000000001.
    rng = KeyRange.parse("-8001")
    assert rng.contains(b"\x80")
    assert rng.contains(b"\x80\x00\xff")
    assert not rng.contains(b"\x80\x01")


def test_keyspace_id_maps_to_the_shard_holding_it() -> None:
    shards = ["-40", "40-80", "80-c0", "c0-"]
    assert shard_for_keyspace_id("ks", shards, b"\x00") == "-40"
    assert shard_for_keyspace_id("ks", shards, b"\x3f\xff") == "-40"
    assert shard_for_keyspace_id("ks", shards, b"\x40") == "40-80"
    assert shard_for_keyspace_id("ks", shards, b"\x80\x00\x00") == "80-c0"
    assert shard_for_keyspace_id("ks", shards, b"\xff" * 8) == "c0-"
    assert shard_for_keyspace_id("ks", shards, b"") == "-40"


def test_shard_order_in_the_list_does_not_matter() -> None:
    shard_map = ShardMap("ks", ["80-", "-80"])
    assert shard_map.names == ["-80", "80-"]
    assert shard_map.shard_for(b"\x90") == "80-"


def test_hash_of_one_lands_on_shard_minus_80() -> None:
    # Vitess's hash(1) = 166b40b44aba4bd6, below 0x80: the -80 shard.
    assert ShardMap("ks", ["-80", "80-"]).shard_for(bytes.fromhex("166b40b44aba4bd6")) == "-80"


def test_single_shard_keyspace_maps_everything_to_it() -> None:
    assert ShardMap("ks", ["0"]).shard_for(b"\xab") == "0"
    assert ShardMap("ks", ["-"]).shard_for(b"\x00") == "-"


def test_gap_between_shards_is_an_error_naming_the_keyspace() -> None:
    with pytest.raises(InvalidVSchema, match=r"keyspace customer: .*gap between -40 and 80-"):
        ShardMap("customer", ["-40", "80-"])


def test_overlapping_shards_are_an_error_naming_the_keyspace() -> None:
    with pytest.raises(InvalidVSchema, match=r"keyspace customer: shards -80 and 40- overlap"):
        ShardMap("customer", ["-80", "40-"])


def test_full_range_shard_next_to_another_shard_overlaps() -> None:
    with pytest.raises(InvalidVSchema, match="overlap"):
        ShardMap("ks", ["0", "80-"])


def test_missing_low_end_is_an_error() -> None:
    with pytest.raises(InvalidVSchema, match=r"keyspace ks: .*nothing starts at the minimum"):
        ShardMap("ks", ["40-80", "80-"])


def test_missing_high_end_is_an_error() -> None:
    with pytest.raises(InvalidVSchema, match=r"keyspace ks: .*nothing ends at the maximum"):
        ShardMap("ks", ["-80"])


def test_no_shards_is_an_error() -> None:
    with pytest.raises(InvalidVSchema, match="keyspace ks: has no shards"):
        ShardMap("ks", [])


def test_bad_shard_name_error_names_the_keyspace() -> None:
    with pytest.raises(InvalidShardName, match=r"keyspace ks: invalid shard name 'zz-'"):
        ShardMap("ks", ["-80", "zz-"])


def test_shards_intersecting_a_key_range() -> None:
    shard_map = ShardMap("ks", ["-40", "40-80", "80-c0", "c0-"])
    assert shard_map.shards_for_range(KeyRange.parse("-")) == ["-40", "40-80", "80-c0", "c0-"]
    assert shard_map.shards_for_range(KeyRange.parse("50-90")) == ["40-80", "80-c0"]
    assert shard_map.shards_for_range(KeyRange.parse("-40")) == ["-40"]
