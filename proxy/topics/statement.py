"""The topic statements (beyond Vitess), recognised from raw text, and topic TTL/property rules.

::

    CREATE TOPIC [IF NOT EXISTS] [ks.]name [(user column definitions...)] [WITH (ttl_seconds = N, key = 'v', ...)]
    ALTER TOPIC [ks.]name SET ttl_seconds = N [, key = 'v' ...]      (also: ALTER TOPIC name WITH (...))
    DROP TOPIC [IF EXISTS] [ks.]name
    SHOW TOPICS [FROM ks] [LIKE 'pattern']
    STREAM * FROM [ks.]topic [WHERE message_id > 'id' | message_id >= 'id' | publish_time >= ms | publish_time > ms]

Properties are CDAP's string map; ``ttl`` (CDAP's name) and ``ttl_seconds`` are the same
property, a whole number of seconds > 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from proxy.errors import (
    ER_DUP_FIELDNAME,
    ER_NOT_SUPPORTED_YET,
    ER_WRONG_VALUE_FOR_VAR,
    ProxyError,
    SyntaxError_,
)
from proxy.topics.ids import first_id_at, is_id
from proxy.topics.names import check_name
from proxy.topics.schema import DEFAULT_TTL_SECONDS, INTERNAL_COLUMNS, MAX_TTL_SECONDS
from sqltext.lexer import split_parenthesised, split_top_level

_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$-]+)"
_QUALIFIED = rf"(?:(?P<ks>{_IDENT})\s*\.\s*)?(?P<name>{_IDENT})"
_CREATE = re.compile(
    rf"^\s*create\s+topic\s+(?P<ine>if\s+not\s+exists\s+)?{_QUALIFIED}\s*(?P<rest>.*?)\s*;?\s*$", re.I | re.S
)
_ALTER = re.compile(rf"^\s*alter\s+topic\s+{_QUALIFIED}\s+(?P<rest>.*?)\s*;?\s*$", re.I | re.S)
_DROP = re.compile(rf"^\s*drop\s+topic\s+(?P<ie>if\s+exists\s+)?{_QUALIFIED}\s*;?\s*$", re.I | re.S)
_IS_TOPIC_DDL = re.compile(r"^\s*(?:create|alter|drop)\s+topic\b", re.I)
_SHOW = re.compile(
    r"^\s*show\s+topics(?:\s+(?:from|in)\s+(?P<ks>`[^`]+`|\w+))?(?:\s+like\s+'(?P<like>[^']*)')?\s*;?\s*$", re.I | re.S
)
_WITH = re.compile(r"^with\s*\((?P<items>.*)\)$", re.I | re.S)
_SET = re.compile(r"^set\s+(?P<items>.*)$", re.I | re.S)
_COLUMN_NAME = re.compile(r"^(`(?:[^`]|``)+`|\w+)")
_CONSTRAINT = re.compile(r"^(primary|key|index|unique|constraint|foreign|check|fulltext|spatial)\b", re.I)
_STREAM_WHERE = re.compile(
    r"^\s*`?(?P<col>message_id|publish_time)`?\s*(?P<op>>=|>)\s*(?P<value>'[^']*'|\"[^\"]*\"|\d+)\s*$", re.I
)


def unquote(ident: str) -> str:
    return ident[1:-1].replace("``", "`") if ident.startswith("`") else ident


def is_topic_ddl(sql: str) -> bool:
    return _IS_TOPIC_DDL.match(sql) is not None


def is_show_topics(sql: str) -> bool:
    return _SHOW.match(sql) is not None


def parse_ttl(value: object, name: str = "ttl_seconds") -> int:
    """A TTL in whole seconds, > 0 (CDAP rejects anything else with 400)."""
    text = str(value).strip().strip("'\"")
    if not re.fullmatch(r"\d+", text) or not 0 < int(text) <= MAX_TTL_SECONDS:
        raise ProxyError(
            ER_WRONG_VALUE_FOR_VAR,
            f"Variable '{name}' can't be set to the value of '{text}' (a whole number of seconds, 1..{MAX_TTL_SECONDS})",
        )
    return int(text)


def normalise_properties(raw: dict[str, object], base: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    """(ttl seconds, properties) from a property map: ``ttl``/``ttl_seconds`` validated and kept
    as ``ttl``; other keys kept as strings. Without a TTL: ``base``'s, else the default."""
    props: dict[str, str] = {}
    ttl: int | None = None
    for key, value in raw.items():
        k = str(key).strip()
        if k.lower() in ("ttl", "ttl_seconds"):
            ttl = parse_ttl(value, k)
            continue
        if not k:
            raise ProxyError(ER_WRONG_VALUE_FOR_VAR, "empty topic property name")
        props[k] = "" if value is None else str(value)
    if ttl is None:
        ttl = int((base or {}).get("ttl", DEFAULT_TTL_SECONDS))
    props["ttl"] = str(ttl)
    return ttl, props


def _assignments(items: str, what: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in split_top_level(items):
        key, sep, value = (p.strip() for p in item.partition("="))
        if not sep or not key:
            raise SyntaxError_(f"syntax error in {what}: expected key = value, got {item!r}")
        v = value
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1].replace(v[0] * 2, v[0])
        out[unquote(key)] = v
    return out


@dataclass(frozen=True, slots=True)
class CreateTopic:
    keyspace: str | None
    name: str
    if_not_exists: bool
    ttl_seconds: int
    properties: dict[str, str]
    user_definitions: list[str] = field(default_factory=list)
    user_columns: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AlterTopic:
    keyspace: str | None
    name: str
    changes: dict[str, object]


@dataclass(frozen=True, slots=True)
class DropTopic:
    keyspace: str | None
    name: str
    if_exists: bool


@dataclass(frozen=True, slots=True)
class ShowTopics:
    keyspace: str | None
    like: str | None


def _parenthesised(text: str) -> tuple[str, str]:
    split = split_parenthesised(text)
    if split is None:
        raise SyntaxError_("syntax error in CREATE TOPIC: unbalanced parentheses")
    return split


def parse_create(sql: str) -> CreateTopic:
    m = _CREATE.match(sql)
    if not m:
        raise SyntaxError_("syntax error in CREATE TOPIC: expected CREATE TOPIC name [(columns...)] [WITH (ttl_seconds = N)]")
    name = check_name(unquote(m.group("name")))
    rest = m.group("rest")
    definitions: list[str] = []
    columns: list[str] = []
    if rest.startswith("("):
        inner, rest = _parenthesised(rest)
        for d in split_top_level(inner):
            if _CONSTRAINT.match(d):
                if re.match(r"^(primary|unique|constraint|foreign)\b", d, re.I):
                    raise ProxyError(ER_NOT_SUPPORTED_YET, f"CREATE TOPIC: only plain KEY/INDEX on user columns is supported, not {d[:40]!r}")
                definitions.append(d)
                continue
            cm = _COLUMN_NAME.match(d)
            if not cm:
                raise SyntaxError_(f"syntax error in CREATE TOPIC column definition: {d!r}")
            col = unquote(cm.group(1))
            if col.lower() in INTERNAL_COLUMNS:
                raise ProxyError(ER_DUP_FIELDNAME, f"Duplicate column name '{col}' (a topic has it already)", "42S21")
            definitions.append(d)
            columns.append(col)
    raw: dict[str, object] = {}
    if rest:
        w = _WITH.match(rest)
        if not w:
            raise SyntaxError_(f"syntax error in CREATE TOPIC near {rest[:40]!r}")
        raw = _assignments(w.group("items"), "CREATE TOPIC")
    ttl, props = normalise_properties(raw)
    return CreateTopic(
        keyspace=unquote(m.group("ks")) if m.group("ks") else None,
        name=name,
        if_not_exists=bool(m.group("ine")),
        ttl_seconds=ttl,
        properties=props,
        user_definitions=definitions,
        user_columns=columns,
    )


def parse_alter(sql: str) -> AlterTopic:
    m = _ALTER.match(sql)
    if not m:
        raise SyntaxError_("syntax error in ALTER TOPIC: expected ALTER TOPIC name SET ttl_seconds = N")
    rest = m.group("rest")
    w = _WITH.match(rest) or _SET.match(rest)
    if not w:
        raise SyntaxError_(f"syntax error in ALTER TOPIC near {rest[:40]!r}")
    items = w.group("items").strip()
    if items.startswith("(") and items.endswith(")"):
        items = items[1:-1]
    changes = _assignments(items, "ALTER TOPIC")
    for k, v in changes.items():
        if k.lower() in ("ttl", "ttl_seconds"):
            parse_ttl(v, k)
    return AlterTopic(unquote(m.group("ks")) if m.group("ks") else None, unquote(m.group("name")), changes)


def parse_drop(sql: str) -> DropTopic:
    m = _DROP.match(sql)
    if not m:
        raise SyntaxError_("syntax error in DROP TOPIC: expected DROP TOPIC [IF EXISTS] name")
    return DropTopic(unquote(m.group("ks")) if m.group("ks") else None, unquote(m.group("name")), bool(m.group("ie")))


def parse_show(sql: str) -> ShowTopics:
    m = _SHOW.match(sql)
    if not m:
        raise SyntaxError_("syntax error in SHOW TOPICS: expected SHOW TOPICS [FROM ks] [LIKE 'pattern']")
    return ShowTopics(unquote(m.group("ks")) if m.group("ks") else None, m.group("like"))


@dataclass(frozen=True, slots=True)
class StartPosition:
    """Where a reader starts: after (or at) an id. ``after_id=''`` with inclusive: the start."""

    after_id: str = ""
    inclusive: bool = True

    @classmethod
    def beginning(cls) -> StartPosition:
        return cls("", True)

    @classmethod
    def at_time(cls, ms: int) -> StartPosition:
        return cls(first_id_at(ms), True)

    @classmethod
    def from_id(cls, message_id: str, inclusive: bool) -> StartPosition:
        if message_id == "":
            return cls("", inclusive)  # before every id: the start
        if not is_id(message_id):
            raise ProxyError(ER_WRONG_VALUE_FOR_VAR, f"not a message id: {message_id!r} (20 hex digits)")
        return cls(message_id.lower(), inclusive)

    def condition(self) -> str:
        """SQL over the view's message_id."""
        return f"message_id {'>=' if self.inclusive else '>'} '{self.after_id}'"


def stream_start(where_sql: str | None) -> StartPosition:
    """The start of ``STREAM * FROM topic WHERE ...``: one condition on message_id or publish_time."""
    if where_sql is None or not where_sql.strip():
        return StartPosition.beginning()
    m = _STREAM_WHERE.match(where_sql)
    if not m:
        raise ProxyError(
            ER_NOT_SUPPORTED_YET,
            "STREAM on a topic supports only WHERE message_id > '<id>' | message_id >= '<id>'"
            f" | publish_time >= <ms> | publish_time > <ms>, not: {where_sql[:80]}",
        )
    value = m.group("value").strip("'\"")
    if m.group("col").lower() == "message_id":
        return StartPosition.from_id(value, m.group("op") == ">=")
    if not value.isdigit():
        raise ProxyError(ER_WRONG_VALUE_FOR_VAR, f"publish_time must be milliseconds since the epoch, got {value!r}")
    ms = int(value) + (1 if m.group("op") == ">" else 0)
    return StartPosition.at_time(ms)
