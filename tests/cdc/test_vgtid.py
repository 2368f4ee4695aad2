"""VGTID and GTID position values: Vitess/Debezium JSON shape and MariaDB position rules."""

from __future__ import annotations

import json

import pytest

from proxy.cdc import Gtid, GtidPosition, InvalidPositionError, Vgtid


def test_vgtid_serialises_as_a_list_of_keyspace_shard_gtid():
    vgtid = Vgtid.from_json(
        '[{"keyspace":"commerce","shard":"-80","gtid":"1-100-7"},'
        '{"keyspace":"commerce","shard":"80-","gtid":"2-101-3"}]'
    )
    assert json.loads(vgtid.to_json()) == [
        {"keyspace": "commerce", "shard": "-80", "gtid": "1-100-7"},
        {"keyspace": "commerce", "shard": "80-", "gtid": "2-101-3"},
    ]
    assert Vgtid.from_json(vgtid.to_json()) == vgtid


def test_vgtid_accepts_vitess_shard_gtids_form_and_empty_table_pks():
    vgtid = Vgtid.from_json(
        {
            "shard_gtids": [
                {"keyspace": "ks", "shard": "0", "gtid": "MariaDB/1-1-5", "table_p_ks": []}
            ]
        }
    )
    assert vgtid.position_of("ks", "0") == "MariaDB/1-1-5"
    assert str(GtidPosition.parse(vgtid.position_of("ks", "0"))) == "1-1-5"


def test_vgtid_with_a_copy_in_progress_is_rejected():
    with pytest.raises(InvalidPositionError, match="table_p_ks"):
        Vgtid.from_json(
            [{"keyspace": "ks", "shard": "0", "gtid": "", "table_p_ks": [{"table_name": "t"}]}]
        )


@pytest.mark.parametrize("text", ["", "[]", "{}", "not json", '[{"shard": "0"}]'])
def test_malformed_vgtid_is_an_invalid_position(text):
    with pytest.raises(InvalidPositionError):
        Vgtid.from_json(text)


def test_gtid_position_keeps_one_gtid_per_domain_sorted():
    position = GtidPosition.parse("2-101-9,1-100-4")
    assert str(position) == "1-100-4,2-101-9"
    assert str(position.advanced_to(Gtid(1, 100, 5))) == "1-100-5,2-101-9"


def test_gtid_position_includes_earlier_sequence_numbers_of_its_domains_only():
    position = GtidPosition.parse("1-100-4")
    assert position.includes(Gtid(1, 100, 4))
    assert position.includes(Gtid(1, 100, 2))
    assert not position.includes(Gtid(1, 100, 5))
    assert not position.includes(Gtid(2, 100, 1))


@pytest.mark.parametrize("text", ["1-2", "a-b-c", "1-2-3-4"])
def test_malformed_gtid_is_an_invalid_position(text):
    with pytest.raises(InvalidPositionError):
        GtidPosition.parse(text)
