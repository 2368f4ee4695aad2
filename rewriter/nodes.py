"""Plan nodes: plain dataclasses named like Vitess's engine primitives.

The planner (``rewriter.planner``) builds trees of these; ``proxy.engine`` executes
them. Nodes hold no connections and no per-execution state, so a cached plan is
shared by every execution of the same query shape. Values that come from the query
are ``Val``s: a bind variable name (``:vtg1``) or a constant.

Column references between nodes are indexes into the input's row; an index < 0
counts from the end of the row (used when ``*`` makes the width unknown at plan
time; hidden helper columns are always appended at the end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rewriter.sqltemplate import SqlTemplate
from sqltext.quoting import sql_literal


class Opcode(StrEnum):
    """Route variants (Vitess ``engine.Opcode``)."""

    Unsharded = "Unsharded"
    EqualUnique = "EqualUnique"
    Equal = "Equal"
    IN = "IN"
    MultiEqual = "MultiEqual"
    Scatter = "Scatter"
    Reference = "Reference"
    DBA = "DBA"
    None_ = "None"
    ByDestination = "ByDestination"
    Next = "Next"


SINGLE_SHARD = frozenset(
    {Opcode.Unsharded, Opcode.EqualUnique, Opcode.Reference, Opcode.DBA, Opcode.Next}
)


@dataclass(frozen=True, slots=True)
class Val:
    """A value in a plan: a bind variable (``name``) or a constant (``const``)."""

    name: str | None = None
    const: Any = None

    def resolve(self, bindvars: Mapping[str, Any]) -> Any:
        return bindvars[self.name] if self.name is not None else self.const

    def describe(self) -> str:
        if self.name is not None:
            return ":" + self.name
        return describe_literal(self.const)


def describe_literal(v: Any) -> str:
    """A value as VEXPLAIN shows it, as Vitess prints it today: the SQL literal (``5``,
    ``'abc'``, ``null``, a list as ``(1, 2)``), not the typed ``INT64(5)`` of older
    releases."""
    if v is None:
        return "null"
    if isinstance(v, list | tuple):
        return "(" + ", ".join(describe_literal(x) for x in v) + ")"
    return sql_literal(v)


@dataclass(frozen=True, slots=True)
class OrderKey:
    """Sort by ``column`` of the input row (``< 0``: from the end)."""

    column: int
    desc: bool = False
    text: str = ""  # the ORDER BY expression, for VEXPLAIN


class Plan:
    """Marker base class of every plan node."""

    __slots__ = ()


@dataclass(eq=False)
class Route(Plan):
    """Send ``query`` to the shards ``opcode`` picks: ``values`` mapped through ``vindex``
    (EqualUnique/Equal: one value; IN: a list bind var or a list of values; MultiEqual:
    several values); ``order_by`` set means the shards sort and the proxy merges."""

    opcode: Opcode
    keyspace: str
    sharded: bool
    query: SqlTemplate
    field_query: str = ""  # the query with WHERE 1 != 1: columns without rows
    table: str = ""
    vindex_name: str = ""
    vindex: Any = None
    values: list[Val] = field(default_factory=list)
    # IN over a list bind var: each shard gets only the values that map to it
    in_var: str | None = None
    order_by: list[OrderKey] = field(default_factory=list)
    truncate: int = 0  # hidden columns to drop at the end of each row
    target_ksid: bytes | None = None  # ByDestination (pinned tables)
    target_shard: str | None = None  # ByDestination (targeted queries)
    tables_used: list[str] = field(default_factory=list)


@dataclass(eq=False)
class VindexLookup(Plan):
    """Map values through a lookup vindex, then run ``route`` on the shards found."""

    keyspace: str
    vindex_name: str
    vindex: Any
    values: list[Val]
    route: Route
    lookup_keyspace: str = ""


# The bind variable a Limit sets for the LIMIT pushed into its input's shard queries.
UPPER_LIMIT = "__upper_limit"


@dataclass(eq=False)
class Limit(Plan):
    """The input's pushed query carries ``LIMIT :__upper_limit`` (count + offset, bound at execution)."""

    count: Val
    offset: Val | None
    input: Plan


@dataclass(eq=False)
class MemorySort(Plan):
    order_by: list[OrderKey]
    input: Plan
    upper_limit: Val | None = None
    truncate: int = 0


AGG_SUM_COUNT_STAR = "sum_count_star"
AGG_SUM_COUNT = "sum_count"
AGG_SUM = "sum"
AGG_MIN = "min"
AGG_MAX = "max"
AGG_AVG = "avg"
AGG_COUNT_DISTINCT = "count_distinct"
AGG_SUM_DISTINCT = "sum_distinct"
AGG_ANY_VALUE = "any_value"
AGG_COMPUTED = "computed"  # placeholder column filled by a Projection above


@dataclass(frozen=True, slots=True)
class AggSpec:
    """One output column of an aggregation.

    ``kind`` is one of the AGG_* names; ``column`` the input column holding the
    shard-level partial (for avg: the partial sum; ``column2`` the partial count).
    """

    kind: str
    column: int
    alias: str
    column2: int = -1


@dataclass(eq=False)
class Aggregate(Plan):
    """``Scalar`` (no GROUP BY: always one row) or ``Ordered`` (input sorted by the keys)."""

    variant: str  # "Scalar" | "Ordered"
    group_by: list[int]
    aggregates: list[AggSpec]  # one per output column, in output order
    input: Plan
    output_names: list[SqlTemplate | str] = field(default_factory=list)


# Window function kinds (``WindowFunc.kind``)
WIN_ROW_NUMBER = "row_number"
WIN_RANK = "rank"
WIN_DENSE_RANK = "dense_rank"
WIN_NTILE = "ntile"
WIN_LAG = "lag"
WIN_LEAD = "lead"
WIN_FIRST_VALUE = "first_value"
WIN_LAST_VALUE = "last_value"
WIN_SUM = "sum"
WIN_COUNT = "count"
WIN_COUNT_STAR = "count_star"
WIN_AVG = "avg"
WIN_MIN = "min"
WIN_MAX = "max"
WIN_PERCENT_RANK = "percent_rank"
WIN_CUME_DIST = "cume_dist"
WIN_NTH_VALUE = "nth_value"


@dataclass(frozen=True, slots=True)
class FrameBound:
    """One end of a frame: ``kind`` is ``unbounded`` (UNBOUNDED PRECEDING/FOLLOWING,
    by ``preceding``), ``current`` or ``offset`` (``distance`` rows before/after)."""

    kind: str
    preceding: bool = True
    distance: Val | None = None


@dataclass(frozen=True, slots=True)
class WindowFunc:
    """One window function: its value for each row of its partition (rows equal on the
    ``partition`` columns), in ``order``. ``frame_rows`` False: the frame is RANGE,
    its CURRENT ROW ends reaching the row's peers (equal on ``order``). ``arg`` is the
    input column of the argument (-1: none); ``offset`` LAG/LEAD's offset, NTILE's
    bucket count or NTH_VALUE's N; ``default`` LAG/LEAD's value past the partition's end."""

    kind: str
    partition: tuple[int, ...]
    order: tuple[OrderKey, ...]
    start: FrameBound
    end: FrameBound
    frame_rows: bool = False
    arg: int = -1
    offset: Val | None = None
    default: Val | None = None
    name: str = ""
    text: str = ""  # the function as written, for VEXPLAIN


@dataclass(eq=False)
class Window(Plan):
    """Append one column per function of ``functions`` to each input row, computed at
    the proxy over all the rows, which keep the input's order. The input (a Route)
    arrives sorted by one function's partition and order keys, which the others' are a
    prefix of where the planner could (window_planner): those sort nothing at the proxy."""

    functions: list[WindowFunc]
    input: Plan


@dataclass(eq=False)
class Distinct(Plan):
    input: Plan
    truncate: int = 0


@dataclass(eq=False)
class Filter(Plan):
    """Keep rows where ``predicate(row_values, bindvars)`` is true (HAVING, or WHERE over
    a derived table). With ``names`` the predicate's values are those columns of the
    input, found by name at execution (the input's width may be unknown at plan time)."""

    predicate: Callable[[list[Any], Mapping[str, Any]], Any]
    input: Plan
    text: str = ""
    names: list[str] | None = None


@dataclass(eq=False)
class ProjectNames(Plan):
    """Select input columns by name (``None``: every column, for ``*``; a ``Val``: a
    constant column such as Spark's ``SELECT 1 FROM (...)``), renaming them to
    ``aliases`` where given. Names are matched case-insensitively at execution."""

    columns: list[str | Val | None]
    aliases: list[str | None]
    input: Plan


@dataclass(eq=False)
class SimpleProjection(Plan):
    """Keep ``columns`` of the input (drops hidden helper columns)."""

    columns: list[int]
    input: Plan


@dataclass(eq=False)
class Truncate(Plan):
    """Drop the last ``count`` columns (hidden ORDER BY / GROUP BY helpers)."""

    count: int
    input: Plan


ValueKind = tuple[str, int]  # ("int" | "decimal" | "double" | "string", scale)


@dataclass(frozen=True, slots=True)
class Computed:
    """A column the proxy computes from other columns of the same row.

    ``fn(values, bindvars)`` gets the decoded row; ``result_kind(kind_of_column, bindvars)``
    gives the MySQL result type (kind and scale) from the kinds of the input columns."""

    column: int
    fn: Callable[[list[Any], Mapping[str, Any]], Any]
    result_kind: Callable[[Callable[[int], ValueKind], Mapping[str, Any]], ValueKind]
    name: str
    text: str = ""


@dataclass(eq=False)
class Projection(Plan):
    """Replace some columns of each input row by computed values (expressions over
    aggregates, e.g. ``sum(a) / count(*)``); the other columns pass through."""

    computed: list[Computed]
    input: Plan


@dataclass(eq=False)
class Join(Plan):
    """Nested loop join. ``cols``: ``-(i+1)`` = left column i, ``i+1`` = right column i.
    ``vars``: bind var name -> left column index, bound for each left row."""

    left: Plan
    right: Plan
    cols: list[int]
    vars: dict[str, int]
    left_join: bool = False
    table_name: str = ""


@dataclass(eq=False)
class HashJoin(Plan):
    """Equi-join at the proxy (beyond Vitess's nested loops): ``right`` runs once and
    its rows go into a hash table on ``right_keys``; ``left`` streams and each row
    probes it with ``left_keys``. ``cols`` as Join's. Keys compare as the columns' one
    type does (numbers by value, ``*_general_ci`` text by its weights, binary strings
    byte-wise); a NULL key matches nothing. ``predicate``: the join condition as written."""

    left: Plan
    right: Plan
    cols: list[int]
    left_keys: list[int]
    right_keys: list[int]
    predicate: str = ""
    left_join: bool = False
    table_name: str = ""


@dataclass(eq=False)
class BatchedJoin(Plan):
    """Nested loop over batches of left rows: ``right`` runs once per batch of up to
    ``batch_size`` left rows, with ``batch_var`` bound to the batch's distinct values of
    ``left_keys[0]`` (its query filters ``right_keys[0] IN ::batch_var``), and its rows are
    matched to the batch's rows at the proxy on every key pair, as HashJoin matches."""

    left: Plan
    right: Plan
    cols: list[int]
    left_keys: list[int]
    right_keys: list[int]
    batch_var: str
    predicate: str = ""
    left_join: bool = False
    table_name: str = ""
    batch_size: int = 1000


@dataclass(eq=False)
class PulloutSubquery(Plan):
    """Run an uncorrelated subquery first and bind its result for ``outer`` (Vitess's
    ``UncorrelatedSubquery``). ``kind``: ``"in"`` (``values_var`` = list of its values,
    ``has_values_var`` = 1 if any), ``"exists"`` (``has_values_var`` only) or ``"value"``
    (``values_var`` = its single value or NULL; more than one row is error 1242)."""

    kind: str
    values_var: str
    has_values_var: str
    subquery: Plan
    outer: Plan


@dataclass(eq=False)
class SemiJoin(Plan):
    """Filter ``outer``'s rows by a correlated ``[NOT] EXISTS`` / ``[NOT] IN`` subquery
    at the proxy (Vitess's ``SemiJoin``). ``inner`` runs once and yields one column,
    the subquery's keys; ``outer``'s last column is the outer key (dropped from the
    output). ``kind``: ``"exists"``, ``"not_exists"``, ``"in"`` or ``"not_in"``
    (SQL's NULL rules, proxy.engine.semi_join). Keys compare as HashJoin's do.

    With ``batch_var``, ``inner`` runs once per batch of up to ``batch_size`` outer rows
    instead, that variable bound to the batch's distinct outer keys (its query filters
    ``key IN ::batch_var``, routed by vindex when the key is the inner table's vindex
    column); ``NOT IN`` then also needs ``probe``, run once: the subquery's ``key IS NULL``
    values, DISTINCT (none: the set is empty; a 1: it holds a NULL)."""

    outer: Plan
    inner: Plan
    kind: str
    predicate: str = ""
    batch_var: str = ""
    batch_size: int = 1000
    probe: Plan | None = None


@dataclass(eq=False)
class Send(Plan):
    """Send ``query`` verbatim to one shard (targeted ``USE ks:shard`` sessions)."""

    keyspace: str
    shard: str
    query: SqlTemplate
    is_dml: bool = False


@dataclass(eq=False)
class Concatenate(Plan):
    """UNION ALL of sources that are not on one route (rows of each source in turn)."""

    sources: list[Plan]


@dataclass(eq=False)
class SequenceNext(Plan):
    """``SELECT NEXT n VALUES FROM seq``: reserve ids from a vitess_sequence table."""

    keyspace: str
    table: str
    count: Val


class DMLOpcode(StrEnum):
    Unsharded = "Unsharded"
    EqualUnique = "EqualUnique"
    Equal = "Equal"
    IN = "IN"
    MultiEqual = "MultiEqual"
    Scatter = "Scatter"
    ByDestination = "ByDestination"
    Sharded = "Sharded"  # insert: per-row routing
    None_ = "None"


@dataclass(frozen=True, slots=True)
class VindexValues:
    """For one column vindex of an inserted table: per row, the values of its columns."""

    vindex_name: str
    vindex: Any
    columns: tuple[str, ...]
    rows: tuple[tuple[Val, ...], ...]
    owned: bool = False


@dataclass(eq=False)
class Insert(Plan):
    """INSERT. ``prefix``/``suffix`` are the statement around the VALUES rows and
    ``row_templates`` render each row (``(v1, v2)``), so rows can be grouped per shard."""

    opcode: DMLOpcode
    keyspace: str
    table: str
    prefix: SqlTemplate
    row_templates: list[SqlTemplate]
    suffix: SqlTemplate
    columns: list[str]
    vindex_values: list[VindexValues] = field(default_factory=list)  # primary first
    auto_increment: AutoIncrement | None = None
    query: SqlTemplate | None = None  # unsharded: the whole statement
    ignore: bool = False
    target_ksid: bytes | None = None  # pinned table


@dataclass(eq=False)
class InsertSelect(Plan):
    """``INSERT INTO t (cols) SELECT ...`` where the rows must be routed one by one:
    the SELECT runs first, then its rows are inserted like a multi-row INSERT.
    ``vindex_columns``: per column vindex (primary first, then owned lookups) the
    positions of its columns in ``columns``; ``auto_column``: position of the
    auto_increment column (appended when the statement did not name it)."""

    keyspace: str
    table: str
    sharded: bool
    columns: list[str]
    source: Plan
    prefix: SqlTemplate
    suffix: SqlTemplate
    vindex_columns: list[tuple[str, Any, tuple[int, ...], bool]] = field(default_factory=list)
    auto_column: int | None = None
    auto_appended: bool = False
    sequence: tuple[str, str] | None = None  # (keyspace, table)
    ignore: bool = False
    target_ksid: bytes | None = None


@dataclass(frozen=True, slots=True)
class AutoIncrement:
    """Fill ``column`` from the sequence table for rows that gave no value (or NULL)."""

    column: str
    sequence_keyspace: str
    sequence_table: str
    # per row: the bind var that holds the value (filled when the row gave NULL/none)
    row_vars: tuple[str, ...]
    given: tuple[Val | None, ...]


@dataclass(eq=False)
class ModifyRows(Plan):
    """What UPDATE and DELETE share: a query routed like a Route, and the owned lookup
    vindexes to maintain (owned_select reads the affected rows first)."""

    opcode: DMLOpcode
    keyspace: str
    table: str
    query: SqlTemplate
    vindex_name: str = ""
    vindex: Any = None
    values: list[Val] = field(default_factory=list)
    in_var: str | None = None
    target_ksid: bytes | None = None
    target_shard: str | None = None
    # UPDATE: (column vindex, new value per column or None if not assigned) of owned
    # lookups whose columns change; DELETE: the owned lookups whose entries go.
    owned_lookups: list[Any] = field(default_factory=list)
    owned_select: SqlTemplate | None = None


@dataclass(eq=False)
class Update(ModifyRows):
    pass


@dataclass(eq=False)
class Delete(ModifyRows):
    pass


@dataclass(eq=False)
class ReferenceWrite(ModifyRows):
    """A write to a reference table: the same statement on every shard of its keyspace
    (each holds a full copy), answered with one copy's affected rows. ``verb``: the
    statement's kind, for VEXPLAIN."""

    verb: str = "Update"


@dataclass(eq=False)
class VExplain(Plan):
    """``VEXPLAIN PLAN <q>``: answered by the proxy as one row with the JSON."""

    json: str


@dataclass(eq=False)
class VExplainRun(Plan):
    """``VEXPLAIN QUERIES|ALL <q>``: runs ``inner`` while logging every query sent to a
    shard. QUERIES answers the log (``#``, keyspace, shard, query); ALL answers
    ``plan`` (the VEXPLAIN PLAN description) with each node's ``mysql_explain_json``:
    the shards' ``EXPLAIN FORMAT=JSON`` of the queries it sent, keyed by shard."""

    kind: str  # "queries" | "all"
    inner: Plan
    plan: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TempReduction:
    """Fetch the input through ``source`` instead when input ``from_input`` produced at
    most a bounded number of distinct values in ``from_column``: they are bound as the
    list ``var`` (a semi-join reduction, Vitess's batched join variables)."""

    var: str
    from_input: int
    from_column: int
    source: Plan


@dataclass(eq=False)
class TempInput:
    """Rows materialised as temporary table ``name`` on the compute connection.

    ``create`` makes the (empty) table there when the compute shard holds the table
    itself (exact column types); otherwise the table is made from the fetched fields.
    ``local_query``: the fetch as that shard would run it, so its own rows are copied
    in place (``INSERT ... SELECT``) rather than through the proxy."""

    name: str
    table: str  # keyspace.table the rows come from, for VEXPLAIN and metadata
    columns: list[str]
    source: Plan
    create: SqlTemplate | None = None
    indexes: list[str] = field(default_factory=list)
    local_query: SqlTemplate | None = None
    reductions: list[TempReduction] = field(default_factory=list)
    # every reduction at once (their variables all bound), when there are several
    all_reduced: Plan | None = None


@dataclass(eq=False)
class Compute(Plan):
    """Finish a statement on one shard's server over temporary copies of its inputs.

    What no route can answer alone (joins, subqueries, CTEs, windows, aggregation
    across shards) runs where MySQL's own semantics are exact: each input's rows
    (filtered and projected at the shards) are loaded into a temporary table on a
    connection of ``shard`` of ``keyspace``, then ``query`` (the client's statement
    over those tables) runs there. ``output_names``: result column names to set
    (the client's own text of unaliased select items), None to keep."""

    keyspace: str
    shard: str
    inputs: list[TempInput]
    query: SqlTemplate
    output_names: list[SqlTemplate | None] = field(default_factory=list)
    original_tables: dict[str, str] = field(default_factory=dict)  # temp name -> table name


@dataclass(eq=False)
class DMLWithInput(Plan):
    """Vitess's ``DMLWithInput``: an UPDATE/DELETE whose rows depend on other tables
    (joins, subqueries across shards). ``input`` reads the target rows' primary key
    (its first ``key_count`` columns), then the values of SET expressions that read
    other tables; ``dml`` then changes those rows by key: once with the keys bound as
    the list ``keys_var`` (one key column, no per-row values), else once per row with
    ``row_vars`` (keys, then values) bound."""

    input: Plan
    dml: Plan
    key_count: int
    keys_var: str = ""
    row_vars: list[str] = field(default_factory=list)
