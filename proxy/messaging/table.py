"""A message table's declaration: its comment parsed exactly as Vitess does, plus our extensions.

Vitess (vttablet schema loading) splits the table comment on ``,`` and each piece on ``=``;
only pieces with exactly two parts count and keys are not trimmed. Required keys give
``attribute <key> not specified for message table`` when missing or empty, and a value that
does not parse gives Go's own conversion error text. Beyond Vitess we accept ``vt_max_rate``,
``vt_max_inflight``, ``vt_max_attempts`` and ``vt_ordering_col`` (0/absent = off).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from proxy.engine.result import Field
from proxy.messaging.errors import MessageTableError
from proxy.messaging.inserted import InsertShape

MESSAGE_MARKER = "vitess_message"
SEQUENCE_MARKER = "vitess_sequence"

# The bookkeeping columns every message table has; they are never streamed by default.
REQUIRED_COLUMNS = ("id", "priority", "time_next", "epoch", "time_acked")
HIDDEN_COLUMNS = frozenset({"priority", "time_next", "epoch", "time_acked"})

_GO_FLOAT = re.compile(r"^[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)$", re.I)
_GO_INT = re.compile(r"^[+-]?\d+$")


@dataclass(frozen=True, slots=True)
class MessageTableSpec:
    """Everything the manager needs about one message table on one shard."""

    name: str
    ack_wait: float  # seconds
    purge_after: float
    poller_interval: float
    batch_size: int
    cache_size: int
    min_backoff: float
    max_backoff: float  # 0 = no cap
    # Column names of the table in table order, and the streamed ones with their exact fields.
    columns: tuple[str, ...]
    streamed: tuple[str, ...]
    fields: tuple[Field, ...] = field(default=(), compare=False)
    # beyond Vitess
    max_rate: float = 0.0  # messages/second sent per table and shard; 0 = unlimited
    max_inflight: int = 0  # sent-but-unacked messages per table and shard; 0 = unlimited
    max_attempts: int = 0  # sends before a message is parked; 0 = never parked
    ordering_col: str | None = None  # per-key FIFO column
    comment: str = field(default="", compare=False)
    # The columns as an INSERT's values determine them (None: not read; inserts are polled).
    insert_shape: InsertShape | None = None

    @property
    def id_index(self) -> int:
        """Position of ``id`` in the streamed columns (Vitess requires it first)."""
        return self.streamed.index("id")


def is_message_comment(comment: str) -> bool:
    """Vitess checks ``vitess_sequence`` first: such a table is a sequence, never a message table."""
    return SEQUENCE_MARKER not in comment and MESSAGE_MARKER in comment


def comment_keyvals(comment: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for piece in comment.split(","):
        kv = piece.split("=")
        if len(kv) == 2:
            out[kv[0]] = kv[1]
    return out


def _go_parse_float(key: str, raw: str) -> float:
    if not _GO_FLOAT.match(raw):
        raise MessageTableError(f'strconv.ParseFloat: parsing "{raw}": invalid syntax')
    return float(raw)


def _duration(kv: dict[str, str], key: str) -> float:
    raw = kv.get(key, "")
    if raw == "":
        raise MessageTableError(f"attribute {key} not specified for message table")
    return _go_parse_float(key, raw)


def _number(kv: dict[str, str], key: str) -> int:
    raw = kv.get(key, "")
    if raw == "":
        raise MessageTableError(f"attribute {key} not specified for message table")
    if not _GO_INT.match(raw):
        raise MessageTableError(f'strconv.Atoi: parsing "{raw}": invalid syntax')
    return int(raw)


def _optional_duration(kv: dict[str, str], key: str) -> float:
    """Vitess ignores parse errors of the optional durations (they read as 0)."""
    raw = kv.get(key, "")
    if raw == "" or not _GO_FLOAT.match(raw):
        return 0.0
    value = float(raw)
    return 0.0 if math.isnan(value) else value


def _optional_number(kv: dict[str, str], key: str) -> int:
    raw = kv.get(key, "")
    if raw == "":
        return 0
    if not _GO_INT.match(raw):
        raise MessageTableError(f'strconv.Atoi: parsing "{raw}": invalid syntax')
    return int(raw)


def parse_message_table(
    name: str, comment: str, columns: Sequence[str], fields_by_column: dict[str, Field] | None = None
) -> MessageTableSpec:
    """Parse a message table's comment and check its columns; raises ``MessageTableError``.

    ``columns`` are the table's column names in table order; ``fields_by_column`` (lower-case
    name -> wire field as the shard describes it) gives the streamed fields their exact types.
    """
    kv = comment_keyvals(comment)
    ack_wait = _duration(kv, "vt_ack_wait")
    purge_after = _duration(kv, "vt_purge_after")
    batch_size = _number(kv, "vt_batch_size")
    cache_size = _number(kv, "vt_cache_size")
    poller_interval = _duration(kv, "vt_poller_interval")
    min_backoff = _optional_duration(kv, "vt_min_backoff") or ack_wait
    max_backoff = _optional_duration(kv, "vt_max_backoff")

    lower = [c.lower() for c in columns]
    for required in REQUIRED_COLUMNS:
        if required not in lower:
            raise MessageTableError(f"{required} missing from message table: {name}")

    specified = [c.strip() for c in kv.get("vt_message_cols", "").split("|")]
    if len(specified) == 1 and specified[0] == "":
        streamed = [c for c in columns if c.lower() not in HIDDEN_COLUMNS]
    else:
        streamed = []
        for col in specified:
            if col.lower() not in lower:
                raise MessageTableError(f"{col} missing from message table: {name}")
            streamed.append(columns[lower.index(col.lower())])
        if specified[0].lower() != "id":
            raise MessageTableError(f"vt_message_cols must begin with id: {name}")

    # beyond Vitess
    max_rate = _optional_duration(kv, "vt_max_rate")
    max_inflight = _optional_number(kv, "vt_max_inflight")
    max_attempts = _optional_number(kv, "vt_max_attempts")
    ordering_raw = kv.get("vt_ordering_col", "").strip()
    ordering_col: str | None = None
    if ordering_raw:
        if ordering_raw.lower() not in lower:
            raise MessageTableError(f"{ordering_raw} missing from message table: {name}")
        ordering_col = columns[lower.index(ordering_raw.lower())]

    fields: tuple[Field, ...] = ()
    if fields_by_column is not None:
        fields = tuple(fields_by_column[c.lower()] for c in streamed)
    return MessageTableSpec(
        name=name,
        ack_wait=ack_wait,
        purge_after=purge_after,
        poller_interval=poller_interval,
        batch_size=batch_size,
        cache_size=cache_size,
        min_backoff=min_backoff,
        max_backoff=max_backoff,
        columns=tuple(columns),
        streamed=tuple(streamed),
        fields=fields,
        max_rate=max_rate,
        max_inflight=max_inflight,
        max_attempts=max_attempts,
        ordering_col=ordering_col,
        comment=comment,
    )
