"""Message ids: CDAP's layout (publish time in ms, then a sequence within that ms) as text.

An id is 20 lower-case hex digits: 16 for the publish time in milliseconds since the epoch,
4 for the sequence (0..65535) within that millisecond. Fixed width, so ids sort the same as
text (any collation), as bytes and as (ms, seq) pairs; ``make_id(ms, 0)`` is the first id a
message published at ``ms`` can have, which is how time-addressed reads become id ranges.

Ids are assigned on the shard under the topic's mark lock, by a direct publish's SQL
(``proxy.topics.direct``, the same rule in SQL, but a publish's rows in one millisecond: rows
that do not fit in the rest of the mark's start the next one at 0) or a sequencer pass
(``assign``; see ``proxy.topics.sequencer``): CDAP's single writer per topic takes the next
(ms, seq) after the last one it gave, and waits for the next millisecond after 65,536 messages
in one; we move on to the next millisecond instead, so an id's time may run ahead of the clock
by a few ms during a burst, never behind the last id.
"""

from __future__ import annotations

import re

ID_LENGTH = 20
MAX_SEQ = 0xFFFF
_ID = re.compile(r"^[0-9a-fA-F]{20}$")


def make_id(ms: int, seq: int) -> str:
    return f"{ms:016x}{seq:04x}"


def is_id(text: str) -> bool:
    return _ID.match(text) is not None


def parse_id(text: str) -> tuple[int, int]:
    """(publish time ms, sequence) of an id; ValueError for anything else."""
    if not is_id(text):
        raise ValueError(f"not a message id: {text!r} (expected {ID_LENGTH} hex digits)")
    return int(text[:16], 16), int(text[16:], 16)


def first_id_at(ms: int) -> str:
    """The smallest id a message published at or after ``ms`` can have."""
    return make_id(max(ms, 0), 0)


def assign(last_ms: int, last_seq: int, now_ms: int, count: int) -> list[tuple[int, int]]:
    """``count`` (ms, seq) pairs after (last_ms, last_seq), strictly increasing, at ``now_ms``
    or later: never before the last id given, whatever the clock says."""
    ms = max(now_ms, last_ms)
    seq = last_seq + 1 if ms == last_ms else 0
    out: list[tuple[int, int]] = []
    for _ in range(count):
        if seq > MAX_SEQ:
            ms, seq = ms + 1, 0
        out.append((ms, seq))
        seq += 1
    return out
