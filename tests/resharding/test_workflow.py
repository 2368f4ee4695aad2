"""A copy's position (lastpk) survives the workflow store as the SQL literals of its values."""

from __future__ import annotations

from proxy.resharding.workflow import lastpk_literals, lastpk_to_json


def test_a_stored_lastpk_reads_back_as_the_literals_of_its_values() -> None:
    stored = lastpk_to_json((7, b"\x00\xff", "it's", b""))
    assert lastpk_literals(stored) == ["7", "X'00ff'", "'it\\'s'", "X''"]
