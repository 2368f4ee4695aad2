"""Aggregate (``Scalar``) and OrderedAggregate (``Ordered``): combine shard partials.

The route below returns, per shard, partial aggregates grouped and ordered by the
group keys (plus the DISTINCT column for COUNT/SUM(DISTINCT)), merged in that order,
so one group's rows arrive consecutively and the primitive streams with memory for
one group. Results have MySQL's types and text:

- COUNT -> sum of partial counts (LONGLONG); SUM -> sum of partial sums with the
  shard's SUM type (DECIMAL for integers, DOUBLE for floats), NULL if all were NULL;
- MIN/MAX -> the smallest/largest partial under the column's collation, column type kept;
- AVG -> total SUM / total COUNT (never an average of averages), DECIMAL with the
  argument's scale + 4 (``div_precision_increment``), or DOUBLE for float arguments;
- COUNT(DISTINCT x) / SUM(DISTINCT x) -> over the distinct x values of the group.
A scalar aggregate over no rows still returns one row (COUNT 0, others NULL).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine import dispatch
from proxy.engine.compare import columns_key_fn, value_key_fn
from proxy.engine.result import (
    BINARY_CHARSET,
    BINARY_FLAG,
    NOT_NULL_FLAG,
    NUM_FLAG,
    Field,
    Result,
    Row,
    decode_value,
    encode_value,
)
from proxy.engine.stream_util import CHUNK_ROWS, collect
from proxy.engine.vcursor import VCursor
from rewriter import nodes as P
from rewriter.sqltemplate import SqlTemplate, parse_template

_FLOAT = {ColumnType.FLOAT, ColumnType.DOUBLE}
_DECIMALS = {ColumnType.DECIMAL, ColumnType.NEWDECIMAL}


def count_field(name: str) -> Field:
    return Field(name=name, type=ColumnType.LONGLONG, charset=BINARY_CHARSET, length=21,
                 flags=NOT_NULL_FLAG | BINARY_FLAG | NUM_FLAG)


def _output_fields(node: P.Aggregate, inp: list[Field], bindvars: Mapping[str, Any]) -> list[Field]:
    out = []
    for spec, name in zip(node.aggregates, node.output_names, strict=True):
        text = column_name(name, bindvars)
        if spec.kind == P.AGG_COMPUTED:
            out.append(Field(name=text, type=ColumnType.NULL, charset=BINARY_CHARSET))
            continue
        out.append(aggregate_field(spec.kind, inp[spec.column], text))
    return out


def column_name(name: SqlTemplate | str, bindvars: Mapping[str, Any]) -> str:
    """A computed column's name as the client wrote it: the normalized literals
    (``:vtg1``) put back."""
    text = name if isinstance(name, str) else name.render(bindvars)
    return parse_template(text).render(bindvars) if ":" in text else text


def aggregate_field(kind: str, src: Field, text: str) -> Field:
    """The result column of aggregate ``kind`` (an AGG_* name) over column ``src``, typed
    as MySQL types it (also the window aggregates' columns)."""
    if kind in (P.AGG_COUNT_DISTINCT, P.AGG_SUM_COUNT_STAR, P.AGG_SUM_COUNT):
        return count_field(text)
    if kind == P.AGG_AVG:
        if src.type in _FLOAT:
            return Field(name=text, type=ColumnType.DOUBLE, charset=BINARY_CHARSET, length=23,
                         flags=BINARY_FLAG | NUM_FLAG, decimals=31)
        scale = min(src.decimals + 4, 30)
        return Field(name=text, type=ColumnType.NEWDECIMAL, charset=BINARY_CHARSET,
                     length=src.length + 4, flags=BINARY_FLAG | NUM_FLAG, decimals=scale)
    if kind == P.AGG_SUM_DISTINCT:
        if src.type in _FLOAT:
            return Field(name=text, type=ColumnType.DOUBLE, charset=BINARY_CHARSET, length=23,
                         flags=BINARY_FLAG | NUM_FLAG, decimals=31)
        return Field(name=text, type=ColumnType.NEWDECIMAL, charset=BINARY_CHARSET,
                     length=src.length + 21, flags=BINARY_FLAG | NUM_FLAG, decimals=src.decimals)
    if kind == P.AGG_SUM and src.type not in _FLOAT and src.type not in _DECIMALS:
        # SUM of integers is DECIMAL in MySQL (rows of a cross-shard join arrive raw)
        return Field(name=text, type=ColumnType.NEWDECIMAL, charset=BINARY_CHARSET,
                     length=src.length + 21, flags=BINARY_FLAG | NUM_FLAG, decimals=0)
    return Field(name=text, type=src.type, charset=src.charset, length=src.length,
                 flags=src.flags & ~1, decimals=src.decimals, table=src.table,
                 org_table=src.org_table, db=src.db, org_name=src.org_name)


def average_text(total: Any, count: int, f: Field) -> bytes | None:
    """AVG as MySQL prints it: ``total / count`` at ``f``'s scale (DECIMAL, rounded half
    up) or as a DOUBLE; NULL over no values."""
    if total is None or count == 0:
        return None
    if isinstance(total, float):
        return encode_value(total / count)
    q = (Decimal(total) / Decimal(count)).quantize(Decimal(1).scaleb(-f.decimals), rounding=ROUND_HALF_UP)
    return format(q, "f").encode()


class _Group:
    """Accumulators of one group."""

    __slots__ = ("node", "fields", "out_fields", "acc", "keyfns")

    def __init__(self, node: P.Aggregate, fields: list[Field], out_fields: list[Field], keyfns: list[Any]) -> None:
        self.node = node
        self.fields = fields
        self.out_fields = out_fields
        self.keyfns = keyfns
        self.acc: list[Any] = [None] * len(node.aggregates)
        for i, spec in enumerate(node.aggregates):
            if spec.kind in (P.AGG_SUM_COUNT_STAR, P.AGG_SUM_COUNT):
                self.acc[i] = 0
            elif spec.kind == P.AGG_AVG:
                self.acc[i] = [None, 0]
            elif spec.kind in (P.AGG_COUNT_DISTINCT, P.AGG_SUM_DISTINCT):
                self.acc[i] = {}
            elif spec.kind == P.AGG_ANY_VALUE:
                self.acc[i] = _UNSET

    def add(self, row: Row) -> None:
        fields = self.fields
        for i, spec in enumerate(self.node.aggregates):
            kind = spec.kind
            raw = row[spec.column]
            if kind in (P.AGG_SUM_COUNT_STAR, P.AGG_SUM_COUNT):
                if raw is not None:
                    self.acc[i] += int(raw)
            elif kind == P.AGG_SUM:
                if raw is not None:
                    v = decode_value(fields[spec.column], raw)
                    self.acc[i] = v if self.acc[i] is None else self.acc[i] + v
            elif kind in (P.AGG_MIN, P.AGG_MAX):
                if raw is None:
                    continue
                cur = self.acc[i]
                if cur is None:
                    self.acc[i] = raw
                else:
                    k = self.keyfns[i]
                    if (kind == P.AGG_MIN and k(raw) < k(cur)) or (kind == P.AGG_MAX and k(raw) > k(cur)):
                        self.acc[i] = raw
            elif kind == P.AGG_AVG:
                s = row[spec.column]
                c = row[spec.column2]
                if s is not None:
                    v = decode_value(fields[spec.column], s)
                    a = self.acc[i]
                    a[0] = v if a[0] is None else a[0] + v
                if c is not None:
                    self.acc[i][1] += int(c)
            elif kind in (P.AGG_COUNT_DISTINCT, P.AGG_SUM_DISTINCT):
                if raw is not None:
                    self.acc[i].setdefault(self.keyfns[i](raw), raw)
            elif kind == P.AGG_ANY_VALUE:
                if self.acc[i] is _UNSET:
                    self.acc[i] = raw

    def row(self) -> Row:
        # AGG_COMPUTED columns stay NULL here; the Projection above fills them
        out: list[bytes | None] = []
        for i, spec in enumerate(self.node.aggregates):
            kind = spec.kind
            a = self.acc[i]
            if kind in (P.AGG_SUM_COUNT_STAR, P.AGG_SUM_COUNT):
                out.append(str(a).encode())
            elif kind == P.AGG_SUM:
                out.append(None if a is None else number_text(a, self.out_fields[i]))
            elif kind in (P.AGG_MIN, P.AGG_MAX):
                out.append(a)
            elif kind == P.AGG_AVG:
                out.append(average_text(a[0], a[1], self.out_fields[i]))
            elif kind == P.AGG_COUNT_DISTINCT:
                out.append(str(len(a)).encode())
            elif kind == P.AGG_SUM_DISTINCT:
                if not a:
                    out.append(None)
                else:
                    f = self.fields[spec.column]
                    total = sum(decode_value(f, raw) for raw in a.values())
                    out.append(number_text(total, self.out_fields[i]))
            elif kind == P.AGG_COMPUTED:
                out.append(None)
            else:
                out.append(None if a is _UNSET else a)
        return tuple(out)


_UNSET = object()


def number_text(v: Any, f: Field) -> bytes:
    if isinstance(v, float):
        return encode_value(v)  # type: ignore[return-value]  # a float encodes to bytes, never None
    if f.type == ColumnType.NEWDECIMAL or f.type == ColumnType.DECIMAL:
        d = Decimal(v)
        if f.decimals and f.decimals < 31:
            d = d.quantize(Decimal(1).scaleb(-f.decimals))
        return format(d, "f").encode()
    return str(v).encode()


async def execute(node: P.Aggregate, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    return await collect(stream(node, vcursor, bindvars))


async def stream(node: P.Aggregate, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    source = dispatch.stream(node.input, vcursor, bindvars)
    fields: list[Field] | None = None
    out_fields: list[Field] = []
    group: _Group | None = None
    group_key: Any = None
    group_keyfn = None
    keyfns: list[Any] = []
    pending: list[Row] = []
    sent_fields = False
    try:
        async for chunk in source:
            if fields is None and chunk.fields:
                fields = chunk.fields
                out_fields = _output_fields(node, fields, bindvars)
                keyfns = [value_key_fn(fields[s.column], ordering=s.kind in (P.AGG_MIN, P.AGG_MAX))
                          for s in node.aggregates]
                group_keyfn = columns_key_fn(fields, node.group_by)
            for row in chunk.rows:
                if node.group_by:
                    k = group_keyfn(row)  # type: ignore[misc]
                    if group is None or k != group_key:
                        if group is not None:
                            pending.append(group.row())
                        group = _Group(node, fields, out_fields, keyfns)  # type: ignore[arg-type]
                        group_key = k
                elif group is None:
                    group = _Group(node, fields, out_fields, keyfns)  # type: ignore[arg-type]
                group.add(row)
            if len(pending) >= CHUNK_ROWS:
                yield Result(fields=[] if sent_fields else out_fields, rows=pending)
                sent_fields = True
                pending = []
    finally:
        await source.aclose()
    if group is not None:
        pending.append(group.row())
    elif not node.group_by and fields is not None:
        pending.append(_Group(node, fields, out_fields, keyfns).row())
    yield Result(fields=[] if sent_fields else out_fields, rows=pending)
