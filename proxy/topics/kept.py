"""A client transaction's topic rows kept by the proxy until its COMMIT (issue 13).

Inside a client's transaction, an ``INSERT INTO topic (payload[, ttl_seconds]) VALUES ...`` went
to the shard without ids and a sequencer pass UPDATEd each row later: 26-48 us of shard CPU a
message against the direct publish's 12-15 (BENCHMARKS.md, "topicwrite"). When the proxy can
prove the INSERT cannot fail, it does not send it: the transaction keeps its rows
(``KeptRows``, on ``ShardTransaction.kept``), the INSERT's OK is answered by the proxy, and the
client's COMMIT publishes them as ONE direct publish (``proxy.topics.direct``, through the
topic's batcher): written with ids, no pass. ROLLBACK, a disconnect or KILL of the connection
drop the transaction and its kept rows with it (nothing was written).

Only a transaction that has done nothing else keeps rows (no shard joined it: every statement
since its BEGIN was a kept INSERT into the same topic), so its COMMIT is the publish alone and
all or nothing by the publish's own transaction; the first statement of any other kind (a write
elsewhere, a read — of the log too —, SAVEPOINT, ROLLBACK TO, an INSERT that cannot be kept, one
into another topic) first *flushes* the kept rows: each kept INSERT is sent as it was written,
in order, in the transaction (today's deferred path), and the transaction keeps no more rows.
So the transaction's own messages keep their insert order, mixed transactions commit both or
neither as before, and savepoints see every row. Never kept: twopc (its commit belongs to the
resolver), a shard-targeted session, a READ ONLY transaction, an implicit (autocommit
statement's) transaction, a transaction with a savepoint set before.

What proves an INSERT cannot fail (``literal_rows``): the topic has no user columns; the INSERT
is read exactly for a direct publish (``direct.read_direct``: plain ``INSERT INTO``, a column
list of the log's writable columns, a VALUES list and nothing after it); its columns are
``payload`` and/or ``ttl_seconds``, each named once; every row has one value per column, and
each value is a literal that the column takes in any sql_mode: ``payload`` (LONGBLOB NOT
NULL) a quoted string, a hex literal (``X'..'`` with whole bytes, ``0x..``) or a plain integer
(never NULL: 1048 in strict mode); ``ttl_seconds`` (INT UNSIGNED NULL) NULL or an unsigned
integer of at most 9 digits. Anything else (an expression, a variable, a function, a
``_charset`` introducer, a SELECT) takes the deferred path as before, so its error is still the
statement's. What can still fail at COMMIT is the shard itself (connection lost, lock wait, the
topic dropped meanwhile): the COMMIT then answers the shard's error and nothing is written.

Cap: ``direct.MAX_ROWS`` rows (one script's millisecond) and ``direct.SAFE_SCRIPT_CHARS`` of
script text: an INSERT beyond either flushes the kept rows and takes the deferred path.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from proxy.topics import direct, routing

# One SQL literal each (default sql_mode spelling: the caller declines sessions whose sql_mode
# is set when the text has quotes or backslashes, as the direct publish does).
# Possessive runs (no backtracking into a string): 100 rows of 100-byte strings, 88 -> 76 us.
_STRING = r"""'[^'\\]*+(?:(?:\\.|'')[^'\\]*+)*+'|"[^"\\]*+(?:(?:\\.|"")[^"\\]*+)*+\""""
_PAYLOAD = rf"(?:{_STRING}|[xX]'(?:[0-9a-fA-F]{{2}})*'|0x[0-9a-fA-F]+|-?[0-9]{{1,18}})"
_TTL = r"(?:[nN][uU][lL][lL]|[0-9]{1,9})"
_LITERALS = {"payload": _PAYLOAD, "ttl_seconds": _TTL}


@functools.lru_cache(maxsize=16)
def _rows_pattern(columns: tuple[str, ...]) -> re.Pattern[str]:
    """A VALUES list whose every row has one literal each of ``columns``' kinds."""
    row = r"\(\s*" + r"\s*,\s*".join(_LITERALS[c] for c in columns) + r"\s*\)"
    return re.compile(rf"\s*{row}(?:\s*,\s*{row})*\s*", re.S)


_COLUMNS = re.compile(r"\(([^()]*), seq, publish_time\)\s*values?\s*$", re.I)


def literal_rows(insert: direct.DirectInsert) -> bool:
    """Whether every row of ``insert`` (read by ``direct.read_direct``) is certain to insert:
    see the module docstring."""
    head = insert.head
    m = _COLUMNS.search(head)
    if m is None:
        return False
    columns = tuple(c.strip().strip("`").lower() for c in m.group(1).split(","))
    if len(set(columns)) != len(columns) or not set(columns) <= _LITERALS.keys():
        return False
    if columns == ("payload",) and _plain_strings(insert.values, insert.ends):
        return True
    return _rows_pattern(columns).fullmatch(insert.values) is not None


def _plain_strings(values: str, ends: list[int]) -> bool:
    """The publish path's common form, each row ``('<no quote, no backslash>')``, checked at C
    speed (20 us for 100 rows of 100 bytes against the pattern's 76): every row opens with
    ``('`` and closes with ``')`` at two places, and the list holds no other quote and no
    backslash, so each row is exactly one plain string (``row_ends`` already read the list)."""
    pos = 0
    find = values.find
    for end in ends:
        start = find("(", pos)
        if end - start < 3 or values[start + 1] != "'" or values[end - 1] != "'":
            return False
        pos = end + 1
    return values.count("'") == 2 * len(ends) and "\\" not in values


Publish = Callable[[direct.DirectInsert], Awaitable[bool]]


@dataclass(slots=True)
class KeptRows:
    """The rows a transaction keeps for one topic: the INSERTs as written (for a flush), and
    their rows as one direct INSERT (for the COMMIT's publish)."""

    keyspace: str
    topic: str
    publish: Publish  # the COMMIT's direct publish (the topic's batcher): whether the rows took ids
    routed: list[routing.Routed] = field(default_factory=list)
    inserts: list[direct.DirectInsert] = field(default_factory=list)
    rows: int = 0
    chars: int = 0

    def fits(self, insert: direct.DirectInsert) -> bool:
        """Whether ``insert`` may join: the same column list, within the caps."""
        if self.inserts and insert.head != self.inserts[0].head:
            return False
        return self.rows + insert.rows <= direct.MAX_ROWS and self.chars + insert.size < direct.SAFE_SCRIPT_CHARS

    def add(self, routed: routing.Routed, insert: direct.DirectInsert) -> None:
        self.routed.append(routed)
        self.inserts.append(insert)
        self.rows += insert.rows
        self.chars += insert.size

    def merged(self) -> direct.DirectInsert:
        """The kept INSERTs as one (their VALUES lists joined, in order)."""
        first = self.inserts[0]
        if len(self.inserts) == 1:
            return first
        values: list[str] = []
        ends: list[int] = []
        pos = 0
        for ins in self.inserts:
            if values:
                values.append(",")
                pos += 1
            ends += [pos + e for e in ins.ends]
            values.append(ins.values)
            pos += len(ins.values)
        return direct.DirectInsert(first.head, "".join(values), ends, first.quoted_log, first.topic)
