"""``CREATE QUEUE name (user columns...) [WITH (vt_key=value, ...)]`` -> the message table DDL.

Beyond Vitess (the syntax its messaging design doc proposed but never shipped). A pure
function: it returns the ``CREATE TABLE`` text to run on every shard of the keyspace (with the
bookkeeping columns, ``poller_idx`` and a complete comment) and, for a sharded keyspace, the
vschema table entry (a ``hash`` vindex on ``id``). The front end executes and persists them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from proxy.errors import ER_UNKNOWN_ERROR, ProxyError, SyntaxError_
from proxy.messaging.errors import MessageTableError
from proxy.messaging.table import parse_message_table
from sqltext.lexer import split_parenthesised, split_top_level

DEFAULT_PARAMETERS: dict[str, str] = {
    "vt_ack_wait": "30",
    "vt_purge_after": "86400",
    "vt_batch_size": "10",
    "vt_cache_size": "10000",
    "vt_poller_interval": "1",
}
KNOWN_PARAMETERS = frozenset(
    DEFAULT_PARAMETERS
    | dict.fromkeys(
        ["vt_min_backoff", "vt_max_backoff", "vt_message_cols", "vt_max_rate", "vt_max_inflight", "vt_max_attempts",
         "vt_ordering_col"]
    )
)  # fmt: skip

BOOKKEEPING_COLUMNS = {
    "id": "id BIGINT NOT NULL",
    "priority": "priority TINYINT NOT NULL DEFAULT 50",
    "epoch": "epoch BIGINT NOT NULL DEFAULT 0",
    "time_next": "time_next BIGINT DEFAULT 0",
    "time_acked": "time_acked BIGINT DEFAULT NULL",
}
HASH_VINDEX = {"type": "hash"}

_HEAD = re.compile(
    r"^\s*create\s+queue\s+(?:(?P<ks>`[^`]+`|\w+)\.)?(?P<name>`[^`]+`|\w+)\s*(?P<rest>.*?)\s*;?\s*$", re.I | re.S
)
_WITH = re.compile(r"^with\s*\((?P<params>.*)\)$", re.I | re.S)
_CONSTRAINT = re.compile(r"^(primary|key|index|unique|constraint|foreign|check|fulltext|spatial)\b", re.I)
_PARAM_VALUE = re.compile(r"^[A-Za-z0-9_.|]+$")


@dataclass(frozen=True, slots=True)
class QueueDefinition:
    keyspace: str | None  # the qualifier in the statement, if any
    name: str
    create_table: str
    comment: str
    vschema_table: dict[str, Any] | None  # None for an unsharded keyspace
    vindexes: dict[str, Any]  # vindexes the vschema must have for the table entry


def is_create_queue(sql: str) -> bool:
    return re.match(r"^\s*create\s+queue\b", sql, re.I) is not None


def _unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def _parenthesised(text: str) -> tuple[str, str]:
    split = split_parenthesised(text)
    if split is None:
        raise SyntaxError_("syntax error in CREATE QUEUE: unbalanced parentheses")
    return split


def translate_create_queue(sql: str, sharded: bool) -> QueueDefinition:
    m = _HEAD.match(sql)
    if not m:
        raise SyntaxError_("syntax error in CREATE QUEUE: expected CREATE QUEUE name (columns...) [WITH (...)]")
    name = _unquote(m.group("name"))
    keyspace = _unquote(m.group("ks")) if m.group("ks") else None
    rest = m.group("rest")
    user_defs: list[str] = []
    if rest.startswith("("):
        inner, rest = _parenthesised(rest)
        user_defs = split_top_level(inner)
    params = dict(DEFAULT_PARAMETERS)
    if rest:
        w = _WITH.match(rest)
        if not w:
            raise SyntaxError_(f"syntax error in CREATE QUEUE near {rest[:40]!r}")
        for item in split_top_level(w.group("params")):
            key, sep, value = (p.strip() for p in item.partition("="))
            key = key.lower()
            value = value.strip("'\"")
            if not sep or key not in KNOWN_PARAMETERS:
                raise ProxyError(ER_UNKNOWN_ERROR, f"CREATE QUEUE: unknown parameter {key!r}; known: {', '.join(sorted(KNOWN_PARAMETERS))}")
            if not _PARAM_VALUE.match(value):
                raise ProxyError(ER_UNKNOWN_ERROR, f"CREATE QUEUE: invalid value for {key}: {value!r}")
            params[key] = value

    columns: dict[str, str] = {}  # lower name -> definition, user's first
    constraints: list[str] = []
    for d in user_defs:
        if _CONSTRAINT.match(d):
            constraints.append(d)
            continue
        ident = re.match(r"^(`[^`]+`|\w+)", d)
        if not ident:
            raise SyntaxError_(f"syntax error in CREATE QUEUE column definition: {d!r}")
        columns[_unquote(ident.group(1)).lower()] = d
    for col, definition in BOOKKEEPING_COLUMNS.items():
        columns.setdefault(col, definition)
    ordered = [columns[c] for c in BOOKKEEPING_COLUMNS] + [d for c, d in columns.items() if c not in BOOKKEEPING_COLUMNS]
    if not any(re.match(r"^primary\s+key", c, re.I) for c in constraints):
        constraints.insert(0, "PRIMARY KEY (id)")
    if not any(re.search(r"\bpoller_idx\b", c, re.I) for c in constraints):
        constraints.append("INDEX poller_idx (time_acked, priority, time_next DESC)")

    comment = "vitess_message," + ",".join(f"{k}={v}" for k, v in params.items())
    column_names = [_unquote(re.match(r"^(`[^`]+`|\w+)", d).group(1)) for d in ordered]  # type: ignore[union-attr]
    try:
        parse_message_table(name, comment, column_names)
    except MessageTableError as e:
        raise ProxyError(ER_UNKNOWN_ERROR, f"CREATE QUEUE {name}: {e.message}") from e
    body = ",\n  ".join(ordered + constraints)
    escaped = comment.replace("'", "''")
    quoted = "`" + name.replace("`", "``") + "`"
    create = f"CREATE TABLE {quoted} (\n  {body}\n) ENGINE=InnoDB COMMENT '{escaped}'"
    vschema_table = {"column_vindexes": [{"column": "id", "name": "hash"}]} if sharded else None
    return QueueDefinition(
        keyspace=keyspace,
        name=name,
        create_table=create,
        comment=comment,
        vschema_table=vschema_table,
        vindexes={"hash": dict(HASH_VINDEX)} if sharded else {},
    )
