"""The SQL a message manager sends to its shard, as pure functions of the table spec.

Values are rendered as literals (the shard pool speaks the text protocol without bind
parameters). Ids arrive as the text-protocol bytes the shard sent, so a numeric id is rendered
as its digits (index-friendly) and anything else as an escaped string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from operator import attrgetter

from proxy.engine.result import Field, literal_kind
from proxy.messaging.cache import CachedMessage
from proxy.messaging.inserted import ParsedInsert
from proxy.messaging.table import MessageTableSpec
from sqltext.quoting import TextValueKind, quote_identifier, text_value_literal

PURGE_BATCH_ROWS = 500
_ID = attrgetter("id")
_EPOCH = attrgetter("epoch")
_NUMBER = re.compile(rb"^-?\d+(?:\.\d+)?$")
_NUMBER_LIST = re.compile(rb"-?\d+(?:\.\d+)?(?:,-?\d+(?:\.\d+)?)*")


def literal(value: bytes | str | int | None, f: Field | None = None) -> str:
    """A value as SQL text, typed by its column ``f``: numbers bare, binary as X'..', text as
    an escaped string. A value that is not a number (ids a client wrote, a column not known)
    is never written bare."""
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    raw = value.encode() if isinstance(value, str) else value
    kind = TextValueKind.NUMBER if f is None else literal_kind(f)
    if kind == TextValueKind.NUMBER and not _NUMBER.match(raw):
        kind = TextValueKind.STRING
    return text_value_literal(raw, kind)


def id_literals(spec: MessageTableSpec, ids: Iterable[bytes]) -> list[str]:
    """The ids as SQL literals, as ``literal`` writes them (the column's kind looked up once:
    a claim renders 50 ids three times, and ``literal`` per id was 3% of the proxy's CPU in
    the messaging benchmark)."""
    f = spec.fields[spec.id_index] if spec.fields else None
    kind = TextValueKind.NUMBER if f is None else literal_kind(f)
    if kind != TextValueKind.NUMBER:
        return [literal(i, f) for i in ids]
    id_list = ids if isinstance(ids, list) else list(ids)
    joined = b",".join(id_list)
    # The usual batch, all plain numbers, checked by one match (a match per id was a third of
    # a claim's SQL text): as many commas as separators, so no id held one.
    if _NUMBER_LIST.fullmatch(joined) and joined.count(b",") == len(id_list) - 1:
        return joined.decode("ascii").split(",")
    number = _NUMBER.match
    return [i.decode("ascii") if number(i) else literal(i, f) for i in id_list]


def _id_list(spec: MessageTableSpec, ids: Iterable[bytes]) -> str:
    return ", ".join(id_literals(spec, ids))


def _columns(cols: Sequence[str]) -> str:
    return ", ".join(quote_identifier(c) for c in cols)


def due_condition(now_ns: int) -> str:
    """Due now; a never-sent row with NULL ``time_next`` counts as due (Vitess never finds it)."""
    return f"(time_next <= {now_ns} OR (time_next IS NULL AND epoch = 0))"


def poll_sql(spec: MessageTableSpec, now_ns: int, predicate_sql: str | None = None) -> str:
    """Up to ``cache_size`` due rows, in Vitess's order (priority, then newest first), each as
    ``0, priority, time_next, epoch, <streamed columns>``; then one row ``1, NULL, <earliest
    future time_next>, NULL, ...`` for the poller's timer (proactive scheduling).

    One statement, not two: the second round trip was a fifth of the poll's cost and sat in
    the commit-to-receive path. With ``vt_ordering_col`` only the head (lowest id) of each
    key's unacked messages is due, so per key one message at a time is in flight (FIFO)."""
    t = quote_identifier(spec.name)
    where = f"time_acked IS NULL AND {due_condition(now_ns)}"
    if predicate_sql:
        where += f" AND ({predicate_sql})"
    if spec.ordering_col is not None:
        k = quote_identifier(spec.ordering_col)
        where += (
            f" AND NOT EXISTS (SELECT 1 FROM {t} AS o WHERE o.{k} = {t}.{k}"
            f" AND o.time_acked IS NULL AND o.id < {t}.id)"
        )
    nulls = ", NULL" * len(spec.streamed)
    return (
        f"(SELECT 0, priority, time_next, epoch, {_columns(spec.streamed)} FROM {t}"
        f" WHERE {where} ORDER BY priority, time_next DESC LIMIT {max(spec.cache_size, 1)})"
        f" UNION ALL (SELECT 1, NULL, MIN(time_next), NULL{nulls} FROM {t}"
        f" WHERE time_acked IS NULL AND time_next > {now_ns})"
    )


def claim_read_sql(spec: MessageTableSpec, ids: Iterable[bytes]) -> str:
    """Lock the candidate rows and read their current state (run inside a transaction)."""
    return (
        f"SELECT epoch, time_next, {_columns(spec.streamed)} FROM {quote_identifier(spec.name)}"
        f" WHERE id IN ({_id_list(spec, ids)}) AND time_acked IS NULL FOR UPDATE"
    )


def postpone_sql(spec: MessageTableSpec, next_times: dict[bytes, int | None]) -> str:
    """``epoch = epoch + 1`` and each row's next send time (NULL parks it)."""
    f = spec.fields[spec.id_index] if spec.fields else None
    cases = " ".join(f"WHEN {literal(i, f)} THEN {literal(t)}" for i, t in next_times.items())
    return (
        f"UPDATE {quote_identifier(spec.name)} SET epoch = epoch + 1, time_next = CASE id {cases} END"
        f" WHERE id IN ({_id_list(spec, next_times)}) AND time_acked IS NULL"
    )


def conditional_postpone_sql(
    spec: MessageTableSpec, batch: Sequence[CachedMessage], next_times: dict[bytes, int | None], now_ns: int
) -> str:
    """Claim by postponing only rows still at the epoch the poller saw, still due and unacked."""
    ids = id_literals(spec, list(map(_ID, batch)))
    epoch_set = set(map(_EPOCH, batch))
    time_set = set(next_times.values())
    if len(epoch_set) == 1 and len(time_set) == 1 and len(next_times) == len(batch):
        # The usual batch: one epoch, one next time (the jitter is per claim). Without the two
        # CASEs the statement is half as long and the shard compares one constant per row.
        return (
            f"UPDATE {quote_identifier(spec.name)} SET epoch = epoch + 1, time_next = {literal(time_set.pop())}"
            f" WHERE id IN ({', '.join(ids)}) AND time_acked IS NULL"
            f" AND epoch = {epoch_set.pop()} AND {due_condition(now_ns)}"
        )
    times = " ".join(f"WHEN {i} THEN {literal(next_times[m.id])}" for i, m in zip(ids, batch, strict=True))
    epochs = " ".join(f"WHEN {i} THEN {m.epoch}" for i, m in zip(ids, batch, strict=True))
    in_list = ids if len(next_times) == len(batch) and all(m.id in next_times for m in batch) else id_literals(spec, next_times)
    return (
        f"UPDATE {quote_identifier(spec.name)} SET epoch = epoch + 1, time_next = CASE id {times} END"
        f" WHERE id IN ({', '.join(in_list)}) AND time_acked IS NULL"
        f" AND epoch = CASE id {epochs} END AND {due_condition(now_ns)}"
    )


def preclaimed_insert_sql(parsed: ParsedInsert, epoch: int, time_next: int) -> str:
    """The INSERT ``parsed`` with every row written as a claim leaves it: ``epoch`` and
    ``time_next`` added to its column list and to each row, its own literals kept as written
    (byte for byte: the values the cache holds are those the shard stores)."""
    tail = f", {literal(epoch)}, {literal(time_next)})"
    rows = map(", ".join, zip(*parsed.values, strict=True))
    return (
        f"{parsed.head}, {quote_identifier('epoch')}, {quote_identifier('time_next')}) VALUES ("
        + (tail + ", (").join(rows)
        + tail
    )


def unclaim_sql(spec: MessageTableSpec, claims: dict[int, list[bytes]]) -> str:
    """Undo pre-claims (``MessageManager.preclaim``) whose messages were never sent: each row
    back to what its INSERT alone would have written, the columns' defaults (a pre-claimed
    INSERT names no bookkeeping column), only while it is still exactly as the pre-claim left
    it (``epoch`` 1, the ``time_next`` written, ``claims``' key, and unacked): a row another
    proxy claimed once due, or acked, is left alone."""
    groups = " OR ".join(f"(time_next = {t} AND id IN ({_id_list(spec, ids)}))" for t, ids in claims.items())
    return (
        f"UPDATE {quote_identifier(spec.name)} SET epoch = DEFAULT, time_next = DEFAULT"
        f" WHERE time_acked IS NULL AND epoch = 1 AND ({groups})"
    )


def claim_check_sql(spec: MessageTableSpec, ids: Iterable[bytes]) -> str:
    """After a partial conditional claim: which rows carry our epoch and time_next."""
    return f"SELECT id, epoch, time_next FROM {quote_identifier(spec.name)} WHERE id IN ({_id_list(spec, ids)})"


def ack_sql(spec: MessageTableSpec, ids: Iterable[bytes], now_ns: int) -> str:
    return (
        f"UPDATE {quote_identifier(spec.name)} SET time_acked = {now_ns}, time_next = NULL"
        f" WHERE id IN ({_id_list(spec, ids)}) AND time_acked IS NULL"
    )


def purge_sql(spec: MessageTableSpec, cutoff_ns: int) -> str:
    return (
        f"DELETE FROM {quote_identifier(spec.name)} WHERE time_acked < {cutoff_ns}"
        f" LIMIT {PURGE_BATCH_ROWS}"
    )
