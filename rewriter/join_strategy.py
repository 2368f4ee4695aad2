"""Which algorithm joins a table to the rows before it, when the planner has a choice.

A table joined only by equalities between its own columns and earlier tables' columns
(``o.customer_id = c.customer_id``), with each pair of one comparable type, need not be
looked up once per left row (Vitess's nested loop):

- **batched**: the right side runs once per batch of left rows, with the batch's key
  values as an ``IN`` list (routed to the shards holding them when the key is the right
  table's vindex column), rows matched at the proxy;
- **hash**: the right side runs once, whole (with its own filters), and is matched in
  memory.

The choice compares estimated costs from the shards' row estimates (schema tracking's
``TableSchema.rows``, per shard, rounded to a power of 10): a shard query's round trip
costs about as much as fetching and matching 20 rows (tests/benchmarks/bench_joins.py on
this 2-core machine: 98 µs per point query, 2.3 µs per row fetched, a few more to decode
and hash it). Unknown sizes choose batched, which never reads a table whole. Key pairs of different type families (a number with a
string, two collations) keep the per-row nested loop, where the shard compares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from rewriter.context import PlanContext
from rewriter.tables import TableRef
from vschema.tracked_schema import ColumnInfo

QUERY_COST = 100.0  # µs: one shard query's round trip
ROW_COST = 5.0  # µs: one row shipped, decoded and matched at the proxy
BATCH_ROWS = 1000  # left rows per batched lookup
HASH_ROWS_MAX = 2_000_000  # never hash a right side estimated larger than this

_EXACT = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "decimal", "numeric"})
_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BYTES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_TEMPORAL = frozenset({"date", "datetime", "timestamp", "time"})
_GENERAL_CI = frozenset({"utf8mb4_general_ci", "utf8mb3_general_ci", "utf8_general_ci"})


@dataclass(frozen=True, slots=True)
class KeyPair:
    """``right.column = left_table.left_column`` (right: the table being joined)."""

    column: str
    left_table: int
    left_column: str


def key_family(info: ColumnInfo | None) -> str | None:
    """Columns of one family compare at the proxy exactly as MySQL compares them."""
    if info is None:
        return None
    dt = info.data_type.lower()
    if dt in _EXACT:
        return "exact"
    if dt in _TEXT and (info.collation or "").lower() in _GENERAL_CI:
        return "general_ci"
    if dt in _BYTES:
        return "bytes"
    if dt in _TEMPORAL:
        return info.column_type.lower()  # datetime(6) and datetime print differently
    return None


def column_info(ref: TableRef, column: str, ctx: PlanContext) -> ColumnInfo | None:
    if ctx.schema is None or ref.system:
        return None
    table = ctx.schema.table(ref.keyspace, ref.name)
    return table.column(column) if table is not None else None


def equi_keys(t: int, preds: list[exp.Expression], refs: list[TableRef], table_of: dict[int, int],
              ctx: PlanContext) -> list[KeyPair] | None:
    """The key pairs if every predicate of table ``t`` that reads an earlier table is a
    comparable column equality; None otherwise (or when there is none).
    ``table_of``: id of each Column node -> its table's index."""
    pairs: list[KeyPair] = []
    for p in preds:
        tables = {table_of[id(c)] for c in p.find_all(exp.Column)}
        if tables <= {t}:
            continue  # the right table's own filter
        if not (isinstance(p, exp.EQ) and isinstance(p.this, exp.Column) and isinstance(p.expression, exp.Column)):
            return None
        a, b = p.this, p.expression
        ta, tb = table_of[id(a)], table_of[id(b)]
        if tb == t:
            a, b, ta, tb = b, a, tb, ta
        if ta != t or tb == t:
            return None
        fam = key_family(column_info(refs[t], a.name, ctx))
        if fam is None or fam != key_family(column_info(refs[tb], b.name, ctx)):
            return None
        pairs.append(KeyPair(a.name, tb, b.name))
    return pairs or None


def estimated_rows(ref: TableRef, own_preds: int, ctx: PlanContext) -> float | None:
    """The table's rows after its own filters (each guessed to keep a tenth), or None
    when the shards gave no estimate."""
    if ctx.schema is None or ref.system:
        return None
    table = ctx.schema.table(ref.keyspace, ref.name)
    if table is None or table.rows <= 0:
        return None
    shards = 1 if (not ref.sharded or ref.is_reference or ref.pinned is not None) \
        else len(ctx.vschema.shards(ref.keyspace))
    return max(1.0, table.rows * shards / 10 ** own_preds)


def choose(left_rows: float | None, right_rows: float | None, right_shards: int,
           lookup_routes: bool) -> str:
    """``"hash"`` or ``"batched"``. ``lookup_routes``: the batch's IN list routes by the
    right table's vindex (one query per batch and holding shard, not a scatter)."""
    if left_rows is None or right_rows is None or right_rows > HASH_ROWS_MAX:
        return "batched"
    per_batch = QUERY_COST * (1 if lookup_routes else right_shards)
    batched = math.ceil(left_rows / BATCH_ROWS) * per_batch + left_rows * ROW_COST
    hashed = QUERY_COST * right_shards + right_rows * ROW_COST
    return "hash" if hashed < batched else "batched"
