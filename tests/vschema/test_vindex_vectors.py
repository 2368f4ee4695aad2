"""Every vindex against every shared vector taken from Vitess's tests: the keyspace id
must be exactly Vitess's, and ``verify`` must accept it and reject any other."""

from __future__ import annotations

from typing import Any

import pytest

from tests.vschema.vectors import case_id, decode_input, expected_keyspace_id, vector_cases
from vschema.vindexes import FunctionalVindex, create_vindex

CASES = vector_cases()


def _vindex(vtype: str) -> FunctionalVindex:
    vindex = create_vindex("v", vtype)
    assert isinstance(vindex, FunctionalVindex)
    return vindex


def test_the_vector_file_covers_every_functional_hashing_vindex() -> None:
    covered = {vtype for vtype, _ in CASES}
    assert covered == {
        "hash",
        "xxhash",
        "unicode_loose_md5",
        "unicode_loose_xxhash",
        "binary_md5",
        "reverse_bits",
        "numeric",
    }


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_vindex_maps_vector_input_to_vitess_keyspace_id(case: tuple[str, dict[str, Any]]) -> None:
    vtype, vector = case
    assert _vindex(vtype).map([decode_input(vector)]) == [expected_keyspace_id(vector)]


MAPPED = [c for c in CASES if expected_keyspace_id(c[1]) is not None]


@pytest.mark.parametrize("case", MAPPED, ids=[case_id(c) for c in MAPPED])
def test_vindex_verifies_vector_input_against_its_keyspace_id(
    case: tuple[str, dict[str, Any]],
) -> None:
    vtype, vector = case
    ksid = expected_keyspace_id(vector)
    assert ksid is not None
    value = decode_input(vector)
    other = bytes(b ^ 0xFF for b in ksid)
    assert _vindex(vtype).verify([value, value], [ksid, other]) == [True, False]


@pytest.mark.parametrize("vtype", sorted({c[0] for c in CASES}))
def test_vindex_maps_a_batch_of_vector_inputs_in_order(vtype: str) -> None:
    vectors = [v for t, v in CASES if t == vtype]
    assert _vindex(vtype).map([decode_input(v) for v in vectors]) == [
        expected_keyspace_id(v) for v in vectors
    ]
