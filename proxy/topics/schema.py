"""The SQL that lays a topic out on its shard (see ``proxy.topics.names``): pure text builders.

The log table keeps every message row. A direct publish (``proxy.topics.direct``) writes its
rows with ``publish_time`` and ``seq``; other publishes insert with no id (only ``payload``,
user columns, optionally ``ttl_seconds``): ``publish_time`` and ``seq`` keep their defaults
``UNSEQUENCED_MS`` (0) and ``UNSEQUENCED_SEQ`` (-1; a direct publish whose rows wait for a pass
writes these defaults too) until the sequencer gives the committed row its place, and ``message_id`` (a generated column, so its
unique index serves ``WHERE message_id > ... ORDER BY message_id``) is NULL until then; the
same index finds the rows waiting for an id (``message_id IS NULL``, in key order).
``pending`` marks rows stored under a REST transaction write pointer and not yet published
(CDAP's payload table); the sequencer skips them. ``payload_bytes`` and ``expire_ms`` are
computed by MariaDB on insert/sequencing, for the counters and the per-message TTL purge.

Why 0 and not NULL before the pass, and why ``message_id`` is VIRTUAL (only its index holds
it): the pass's UPDATE then changes no column's size (0 -> the ms, -1 -> the seq; ``expire_ms``
stays NULL without a per-message TTL), so InnoDB updates the clustered record in place instead
of rebuilding it. Measured on a shard (400-row passes, 100-byte payloads, FULL row images):
the pass's UPDATE ~21 -> ~13 us per row, the topic's shard CPU per message beyond the raw
inserts ~29 -> ~21 us (BENCHMARKS.md, branch ``topicpass``). NULL stays allowed, and reads
the same (no id), so the direct publish's SQL is the same for logs laid out before this
(NULL defaults, a PERSISTENT ``message_id``): those keep working, at the older cost.
The ``publish_time`` index stays although the pass moves its entry too (~4 us a row; dropping
it sped the raw ceiling, a copy of this layout, as much, BENCHMARKS.md): a client's read of the
view by ``publish_time >= <ms>`` (the issue's time-addressed start) must not scan the log. The
proxy's own time reads (purge, stats) use ranges of the id index (``first_id_at_sql``).

The view shows the sequenced, unexpired rows, and nothing else: its TTL is a constant in its
text (replaced by ``ALTER TOPIC``), per-message TTLs are read from ``expire_ms``, and the
clock is the shard's (``NOW(3)``), the same clock the sequencer stamps ``publish_time`` with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from proxy.topics.names import META_TABLE, log_table
from sqltext.quoting import quote_identifier

# Columns of the log table the proxy owns; user columns may not take these names.
INTERNAL_COLUMNS = frozenset(
    {"_pk", "publish_time", "seq", "message_id", "payload", "ttl_seconds", "expire_ms", "payload_bytes",
     "tx_pointer", "pending", "stored_ms"}
)  # fmt: skip
# What a reader of the view sees, before the user columns (ttl_seconds comes last).
VIEW_HEAD = ("message_id", "publish_time", "payload")

DEFAULT_TTL_SECONDS = 86400  # CDAP's messaging.topic.default.ttl
MAX_TTL_SECONDS = 100 * 365 * 86400
DEFAULT_MAX_POLL_BYTES = 4 * 1024 * 1024  # payload bytes per read (CDAP's messaging.max.poll.size)
NOW_MS = "ROUND(UNIX_TIMESTAMP(NOW(3)) * 1000)"
# ``publish_time`` and ``seq`` of a row waiting for its id (see the module docstring). ``seq`` is
# the marker: an ``INSERT INTO <view> ... SELECT`` gets ``publish_time`` filled by MariaDB from
# the view's condition (now - TTL, seen on 10.11), never ``seq``.
UNSEQUENCED_MS = 0
UNSEQUENCED_SEQ = -1


def message_id_sql(publish_time: str, seq: str) -> str:
    """``message_id`` from the SQL expressions of a row's ``publish_time`` and ``seq``: the log
    table's generated column, and the ids a direct publish computes from its variables."""
    return f"LOWER(CONCAT(LPAD(HEX({publish_time}), 16, '0'), LPAD(HEX({seq}), 4, '0')))"


def first_id_at_sql(ms: str) -> str:
    """The smallest id a message published at or after ``ms`` (an SQL expression) can have: a
    time as a range of the id index (ids sort by publish time first), for logs of either
    layout."""
    return message_id_sql(ms, "0")


META_DDL = f"""CREATE TABLE IF NOT EXISTS {META_TABLE} (
  name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  generation BIGINT NOT NULL,
  ttl_seconds BIGINT NOT NULL,
  properties TEXT NOT NULL,
  columns TEXT NOT NULL,
  last_ms BIGINT NOT NULL DEFAULT 0,
  last_seq INT NOT NULL DEFAULT -1,
  messages BIGINT NOT NULL DEFAULT 0,
  bytes BIGINT NOT NULL DEFAULT 0,
  purged BIGINT NOT NULL DEFAULT 0,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB COMMENT 'shardgate topics (proxy/topics)'"""


def log_ddl(name: str, user_definitions: Sequence[str]) -> str:
    user = "".join(f",\n  {d}" for d in user_definitions)
    return f"""CREATE TABLE {quote_identifier(log_table(name))} (
  _pk BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  publish_time BIGINT NULL DEFAULT {UNSEQUENCED_MS},
  seq INT NULL DEFAULT {UNSEQUENCED_SEQ},
  message_id CHAR(20) CHARACTER SET ascii COLLATE ascii_general_ci
    AS (IF(seq = {UNSEQUENCED_SEQ}, NULL, {message_id_sql("publish_time", "seq")})) VIRTUAL,
  payload LONGBLOB NOT NULL DEFAULT '',
  ttl_seconds INT UNSIGNED NULL,
  expire_ms BIGINT AS (IF(seq = {UNSEQUENCED_SEQ}, NULL, publish_time + 1000 * ttl_seconds)) PERSISTENT,
  payload_bytes BIGINT UNSIGNED AS (LENGTH(payload)) PERSISTENT,
  tx_pointer BIGINT NULL,
  pending TINYINT NOT NULL DEFAULT 0,
  stored_ms BIGINT NULL{user},
  PRIMARY KEY (_pk),
  UNIQUE KEY message_id (message_id),
  KEY publish_time (publish_time),
  KEY expire_ms (expire_ms),
  KEY tx_pointer (tx_pointer, pending)
) ENGINE=InnoDB COMMENT 'shardgate topic log (proxy/topics)'"""


def view_columns(user_columns: Sequence[str]) -> list[str]:
    return [*VIEW_HEAD, *user_columns, "ttl_seconds"]


def view_select_list(user_columns: Sequence[str]) -> str:
    """The view's columns, quoted: its SELECT list (a direct publish's rows read back for the
    followers' feed read the log table with the same one)."""
    return ", ".join(quote_identifier(c) for c in view_columns(user_columns))


def view_condition(ttl_seconds: int, margin_ms: int = 0) -> str:
    """The rows of the log the view shows: sequenced, not expired (``ttl_seconds``: the topic's);
    with ``margin_ms``, only those that stay so for that long yet."""
    margin = f" + {int(margin_ms)}" if margin_ms else ""
    return (f"message_id IS NOT NULL AND publish_time >= {NOW_MS}{margin} - {int(ttl_seconds) * 1000}"
            f" AND (expire_ms IS NULL OR expire_ms > {NOW_MS}{margin})")


def view_ddl(name: str, user_columns: Sequence[str], ttl_seconds: int) -> str:
    cols = view_select_list(user_columns)
    return (
        f"CREATE OR REPLACE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW {quote_identifier(name)} AS SELECT {cols}"
        f" FROM {quote_identifier(log_table(name))} WHERE {view_condition(ttl_seconds)}"
    )


def capped_read_sql(name: str, columns: str, condition: str, limit: int, max_bytes: int) -> str:
    """The view's messages matching ``condition``, in id order: at most ``limit`` of them and at
    most ``max_bytes`` of payload in all, but always the first one (a message bigger than the
    cap comes alone).

    The cap is a bound on the id, computed by an uncorrelated subquery (MariaDB runs it once)
    over the same ``limit`` rows: the running total of payload sizes, keeping the prefix within
    the cap. The subquery reads ids and lengths only, never a payload into a temporary table,
    and it reads the view, so it counts exactly the rows the outer read returns (not expired ones)."""
    view = quote_identifier(name)
    lim = int(limit)
    sizes = (f"SELECT message_id, len, SUM(len) OVER (ORDER BY message_id) AS total FROM (SELECT message_id,"
             f" LENGTH(payload) AS len FROM {view} WHERE {condition} ORDER BY message_id LIMIT {lim}) w")
    bound = f"SELECT MAX(message_id) FROM ({sizes}) s WHERE total <= {int(max_bytes)} OR total = len"
    return (f"SELECT {columns} FROM {view} WHERE {condition} AND message_id <= ({bound})"
            f" ORDER BY message_id LIMIT {lim}")


def generation_guard(name: str, generation: int) -> str:
    """SQL that is true while topic ``name`` is at ``generation`` on its shard. A follower's reads
    carry it: a proxy learns of a DROP TOPIC + CREATE TOPIC made through another proxy only at
    its next refresh, and meanwhile the view of that name shows the new generation's messages,
    which a follower of the dropped topic must never get (it ends with 1051 once this proxy
    sees the drop). Uncorrelated: MariaDB reads the metadata row once per read, by key."""
    return (f"EXISTS (SELECT 1 FROM {META_TABLE} WHERE name = {sql_string(name)}"
            f" AND generation = {int(generation)})")


def properties_json(properties: dict[str, str]) -> str:
    return json.dumps(properties, sort_keys=True)


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"
