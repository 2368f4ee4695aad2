"""Window: window functions computed at the proxy over the merged rows of a scatter.

All rows are kept (a window needs its whole partition; ``MemorySort`` keeps as much).
The route below reads each shard's rows whole and merges them by their sort keys
(``route.execute_sorted``), keyed once: a window whose partition and order keys are a
prefix of the route's order reuses those keys and sorts nothing (its partitions are
contiguous ranges); another window's rows are keyed under the columns' collations
(``compare``) and sorted. Partitions are then walked in order: ROW_NUMBER, RANK /
DENSE_RANK (peers: equal on the order keys), PERCENT_RANK, CUME_DIST, NTILE (the first
``rows % n`` buckets one row larger, as MySQL), LAG/LEAD (offset, default), and over
the frame of each row FIRST_VALUE/LAST_VALUE/NTH_VALUE and SUM/COUNT/AVG/MIN/MAX, typed
and printed as the aggregate primitives print them (``ordered_aggregate``): SUM of
integers is DECIMAL, AVG keeps 4 more digits. SUM/COUNT/AVG use prefix sums and
MIN/MAX a sliding deque, so any frame costs O(rows).

Frames: ROWS with UNBOUNDED / n PRECEDING / CURRENT ROW / n FOLLOWING ends; RANGE with
UNBOUNDED, CURRENT ROW (reaching the peers) and numeric n PRECEDING / FOLLOWING ends
over one numeric ORDER BY key. Without a frame a
window with ORDER BY ends at the current row's last peer, one without at the
partition's end. The planner sends other frames to Compute.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from decimal import Decimal
from typing import Any

from mysql_mimic.types import ColumnType

from proxy.engine import dispatch, route
from proxy.engine.compare import resolve_index, row_key_fn, value_key_fn
from proxy.engine.ordered_aggregate import (
    aggregate_field,
    average_text,
    column_name,
    count_field,
    number_text,
)
from proxy.engine.result import (
    BINARY_CHARSET,
    BINARY_FLAG,
    DECIMAL_TYPES,
    INT_TYPES,
    NOT_NULL_FLAG,
    NUM_FLAG,
    Field,
    Result,
    Row,
    decode_value,
    is_numeric,
)
from proxy.engine.stream_util import from_result
from proxy.engine.vcursor import VCursor
from proxy.errors import ER_NOT_SUPPORTED_YET, ER_WRONG_ARGUMENTS, ProxyError
from rewriter import nodes as P
from sqltext.quoting import sql_literal

_AGG_KIND = {P.WIN_SUM: P.AGG_SUM, P.WIN_COUNT: P.AGG_SUM_COUNT, P.WIN_COUNT_STAR: P.AGG_SUM_COUNT_STAR,
             P.WIN_AVG: P.AGG_AVG, P.WIN_MIN: P.AGG_MIN, P.WIN_MAX: P.AGG_MAX}
_DIRECT_SUM_ROWS = 64
_RATIO_DECIMALS = 10  # PERCENT_RANK / CUME_DIST as MariaDB prints them
_NUMBERING = (P.WIN_ROW_NUMBER, P.WIN_RANK, P.WIN_DENSE_RANK, P.WIN_NTILE)


def _field(fn: P.WindowFunc, fields: list[Field], bindvars: Mapping[str, Any]) -> Field:
    name = column_name(fn.name, bindvars)
    if fn.kind in _NUMBERING or fn.kind == P.WIN_COUNT_STAR:
        return count_field(name)
    if fn.kind in (P.WIN_PERCENT_RANK, P.WIN_CUME_DIST):
        # as the shards' MariaDB types and prints them (and Compute returns them): DOUBLE
        # with 10 decimals, ``0.3333333333`` (MySQL 8 prints the whole double)
        return Field(name=name, type=ColumnType.DOUBLE, charset=BINARY_CHARSET, length=23,
                     flags=NOT_NULL_FLAG | BINARY_FLAG | NUM_FLAG, decimals=_RATIO_DECIMALS)
    # LAG/LEAD/FIRST_VALUE/LAST_VALUE: the argument's column, NULL allowed
    return aggregate_field(_AGG_KIND.get(fn.kind, P.AGG_ANY_VALUE), fields[fn.arg], name)


def _count(v: P.Val | None, bindvars: Mapping[str, Any], what: str, zero_ok: bool) -> int:
    if v is None:
        return 1
    try:
        n = int(v.resolve(bindvars))
    except (TypeError, ValueError) as e:
        raise ProxyError(ER_WRONG_ARGUMENTS, f"Incorrect arguments to {what}") from e
    if n < 0 or (n == 0 and not zero_ok):
        raise ProxyError(ER_WRONG_ARGUMENTS, f"Incorrect arguments to {what}")
    return n


def _default_text(v: P.Val | None, f: Field, bindvars: Mapping[str, Any]) -> bytes | None:
    """LAG/LEAD's default as the text of the result column ``f`` (a number at a DECIMAL
    column's scale, as the column's own values)."""
    value = v.resolve(bindvars) if v is not None else None
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if f.type in (ColumnType.DECIMAL, ColumnType.NEWDECIMAL) and isinstance(value, int | Decimal):
        return number_text(Decimal(value), f)
    return sql_literal(value).encode()


def _frames(fn: P.WindowFunc, peers: list[tuple[int, int]], order_keys: list[Any], fields: list[Field],
            bindvars: Mapping[str, Any]) -> list[tuple[int, int]]:
    """The frame of each row of a partition, as ``[lo, hi)``; ``peers[i]`` is the
    ``[first, last+1)`` of row i's peer group, ``order_keys`` the rows' ORDER BY keys."""
    size = len(peers)

    def ends(b: P.FrameBound, start: bool) -> list[int]:
        if b.kind == "unbounded":
            return [0 if b.preceding else size] * size
        if b.kind == "current":
            if fn.frame_rows:
                return list(range(size)) if start else list(range(1, size + 1))
            return [p[0] if start else p[1] for p in peers]
        if not fn.frame_rows:
            return _range_ends(fn, b, start, order_keys, fields, bindvars)
        n = _count(b.distance, bindvars, "the window frame", zero_ok=True)
        step = (-n if b.preceding else n) + (0 if start else 1)
        return [min(max(i + step, 0), size) for i in range(size)]

    return [(lo, max(lo, hi)) for lo, hi in zip(ends(fn.start, True), ends(fn.end, False), strict=True)]


def _range_ends(fn: P.WindowFunc, b: P.FrameBound, start: bool, order_keys: list[Any], fields: list[Field],
                bindvars: Mapping[str, Any]) -> list[int]:
    """``RANGE n PRECEDING / FOLLOWING`` ends over the one numeric ORDER BY key: the rows
    whose value lies within n of the current row's. The keys are ``compare.sort_part_fn``
    scalars, ascending in the window's order (a DESC column's values negated), so n
    PRECEDING is ``key - n`` whatever the direction; a NULL's key is an infinity, which
    n does not move: NULLs frame their peers only, as MySQL."""
    src = fields[fn.order[0].column]
    if not is_numeric(src):
        raise ProxyError(ER_NOT_SUPPORTED_YET, "VT12001: unsupported: RANGE frame with an offset over the "
                                               f"non-numeric column {src.name} across shards")
    raw = b.distance.resolve(bindvars) if b.distance is not None else None
    try:
        n = Decimal(str(raw))
    except ArithmeticError as e:
        raise ProxyError(ER_WRONG_ARGUMENTS, "Incorrect arguments to the window frame") from e
    if raw is None or not n.is_finite() or n < 0:
        raise ProxyError(ER_WRONG_ARGUMENTS, "Incorrect arguments to the window frame")
    keys = [k[0] for k in order_keys]
    step = -n if b.preceding else n
    fstep = float(step)
    targets = [k + fstep if isinstance(k, float) else k + step for k in keys]
    # the first row at or past the target (a frame's start), or the first past it (its end)
    find = bisect_left if start else bisect_right
    return [find(keys, t) for t in targets]


def _peer_groups(order_keys: list[Any]) -> list[tuple[int, int]]:
    """For each row of a partition, the ``[first, last+1)`` of its peers (rows with
    equal order keys)."""
    out: list[tuple[int, int]] = []
    i, size = 0, len(order_keys)
    while i < size:
        k = order_keys[i]
        j = i + 1
        while j < size and order_keys[j] == k:
            j += 1
        out.extend([(i, j)] * (j - i))
        i = j
    return out


# A window's partitions: each as its rows' input indexes in window order, with their
# sort keys (PARTITION BY then ORDER BY keys, maybe followed by more of the input's)
_Partitions = list[tuple[list[int] | range, list[Any]]]
# A window's sort: (column, descending) of its PARTITION BY (ascending) then ORDER BY keys
_Spec = tuple[tuple[int, bool], ...]


def _spec(fn: P.WindowFunc) -> _Spec:
    return tuple((c, False) for c in fn.partition) + tuple((k.column, k.desc) for k in fn.order)


def _partitions(fn: P.WindowFunc, rows: list[Row], fields: list[Field],
                input_order: _Spec, input_keys: list[tuple[Any, ...]] | None) -> _Partitions:
    """The partitions of ``fn``'s window. When the input already arrives in an order the
    window's sort is a prefix of (the route merged it so, ``input_keys`` its keys), those
    keys serve and nothing is sorted; otherwise one key per row (collation keys are the
    cost: ~5 us a row), sorted once."""
    n = len(fn.partition)
    spec = _spec(fn)
    size = len(rows)
    if not spec:
        return [(range(size), [()] * size)]
    if input_keys is not None and input_order[:len(spec)] == spec:
        keys = input_keys
        indexes: list[int] | range = range(size)
    else:
        key_of = row_key_fn(fields, [P.OrderKey(c) for c in fn.partition] + list(fn.order))
        keys = [key_of(r) for r in rows]
        indexes = sorted(range(size), key=keys.__getitem__)
    if n == 0:
        return [(indexes, keys if isinstance(indexes, range) else [keys[i] for i in indexes])]
    out: _Partitions = []
    start = 0
    while start < size:
        end = start + 1
        if n == 1:  # (the usual case: no slice a row)
            head = keys[indexes[start]][0]
            while end < size and keys[indexes[end]][0] == head:
                end += 1
        else:
            heads = keys[indexes[start]][:n]
            while end < size and keys[indexes[end]][:n] == heads:
                end += 1
        part = indexes[start:end]  # a range when nothing was sorted: the partition's rows are contiguous
        out.append((part, keys[start:end] if isinstance(part, range) else [keys[i] for i in part]))
        start = end
    return out


def _order_keys(fn: P.WindowFunc, part_keys: list[Any]) -> list[Any]:
    """The ORDER BY keys (peers compare equal) out of a partition's sort keys."""
    n, m = len(fn.partition), len(fn.partition) + len(fn.order)
    if not part_keys or (n == 0 and len(part_keys[0]) == m):
        return part_keys
    return [k[n:m] for k in part_keys]


def _compute(fn: P.WindowFunc, parts: _Partitions, rows: list[Row], fields: list[Field], out_field: Field,
             bindvars: Mapping[str, Any]) -> list[bytes | None]:
    """The function's value for each row of ``rows`` (all the input), in input order."""
    values: list[bytes | None] = [None] * len(rows)
    offset = _count(fn.offset, bindvars, fn.kind, zero_ok=fn.kind in (P.WIN_LAG, P.WIN_LEAD))
    default = _default_text(fn.default, out_field, bindvars)
    for part, part_keys in parts:
        if isinstance(part, range):
            values[part.start:part.stop] = _partition_values(fn, rows[part.start:part.stop], part_keys, fields,
                                                              out_field, offset, default, bindvars)
            continue
        computed = _partition_values(fn, [rows[i] for i in part], part_keys, fields, out_field, offset, default,
                                     bindvars)
        for i, v in zip(part, computed, strict=True):
            values[i] = v
    return values


_NUMBER_TEXT: list[bytes | None] = []  # (never None: typed as the result columns' values)


def _numbers(size: int) -> list[bytes | None]:
    """The texts of 1..size (ROW_NUMBER, RANK), made once for the process."""
    while len(_NUMBER_TEXT) < size:
        _NUMBER_TEXT.extend(str(i).encode() for i in range(len(_NUMBER_TEXT) + 1, len(_NUMBER_TEXT) + 1025))
    return _NUMBER_TEXT


def _partition_values(fn: P.WindowFunc, rows: list[Row], part_keys: list[Any], fields: list[Field],
                      out_field: Field, offset: int, default: bytes | None,
                      bindvars: Mapping[str, Any]) -> list[bytes | None]:
    size = len(rows)
    kind = fn.kind
    if kind == P.WIN_ROW_NUMBER:
        return _numbers(size)[:size]
    if kind == P.WIN_NTILE:
        q, r = divmod(size, offset)
        big = r * (q + 1)
        return [str(i // (q + 1) + 1 if i < big else (i - big) // q + r + 1).encode() for i in range(size)]
    if kind in (P.WIN_LAG, P.WIN_LEAD):
        step = -offset if kind == P.WIN_LAG else offset
        return [rows[i + step][fn.arg] if 0 <= i + step < size else default for i in range(size)]
    order_keys = _order_keys(fn, part_keys)
    peers = _peer_groups(order_keys)
    if kind == P.WIN_PERCENT_RANK:
        return [b"%.*f" % (_RATIO_DECIMALS, first / (size - 1) if size > 1 else 0.0) for first, _ in peers]
    if kind == P.WIN_CUME_DIST:
        return [b"%.*f" % (_RATIO_DECIMALS, last / size) for _, last in peers]
    if kind in (P.WIN_RANK, P.WIN_DENSE_RANK):
        out: list[bytes | None] = []
        texts = _numbers(size)
        dense = 0
        for i, (first, _) in enumerate(peers):
            if first == i:
                dense += 1
            out.append(texts[first if kind == P.WIN_RANK else dense - 1])
        return out
    frames = _frames(fn, peers, order_keys, fields, bindvars)
    if kind == P.WIN_NTH_VALUE:
        return [rows[lo + offset - 1][fn.arg] if lo + offset - 1 < hi else None for lo, hi in frames]
    if kind in (P.WIN_FIRST_VALUE, P.WIN_LAST_VALUE):
        return [None if lo >= hi else rows[lo if kind == P.WIN_FIRST_VALUE else hi - 1][fn.arg]
                for lo, hi in frames]
    if kind == P.WIN_COUNT_STAR:
        return [str(hi - lo).encode() for lo, hi in frames]
    raw = [r[fn.arg] for r in rows]
    if kind in (P.WIN_MIN, P.WIN_MAX):
        return _extremes(raw, frames, value_key_fn(fields[fn.arg]), kind == P.WIN_MIN)
    # SUM / COUNT / AVG over prefix sums: each frame in O(1)
    src = fields[fn.arg]
    if kind != P.WIN_COUNT and not is_numeric(src):
        raise ProxyError(ER_NOT_SUPPORTED_YET,
                         f"VT12001: unsupported: {kind.upper()} OVER the non-numeric column {src.name} across shards")
    scale = out_field.decimals if kind == P.WIN_SUM else src.decimals if src.type in DECIMAL_TYPES else 0
    scaled = _scaled(raw, src, scale) if kind != P.WIN_COUNT else None
    if scaled is not None:
        return _scaled_sums(kind, scaled, frames, scale, out_field.decimals)
    values = [decode_value(src, v) if v is not None and kind != P.WIN_COUNT else None for v in raw]
    sums: list[Any] = [0]
    counts = [0]
    for v, x in zip(raw, values, strict=True):
        sums.append(sums[-1] + x if x is not None else sums[-1])
        counts.append(counts[-1] + (v is not None))
    out = []
    for lo, hi in frames:
        n = counts[hi] - counts[lo]
        if kind == P.WIN_COUNT:
            out.append(str(n).encode())
            continue
        if n == 0:
            out.append(None)
            continue
        total = sums[hi] - sums[lo]
        if lo and isinstance(total, float) and hi - lo <= _DIRECT_SUM_ROWS:
            # a difference of float prefix sums is not the sum MySQL adds up row by row
            # (windowing_use_high_precision); short frames are added up as it does,
            # longer ones keep O(1) a row (MySQL re-adds them: O(rows x frame))
            total = sum(x for x in values[lo:hi] if x is not None)
        out.append(number_text(total, out_field) if kind == P.WIN_SUM else average_text(total, n, out_field))
    return out


def _scaled(raw: list[bytes | None], src: Field, scale: int) -> list[int | None] | None:
    """Integer and DECIMAL values as integers in units of ``10**-scale`` (``12.50`` -> 1250
    at scale 2), or None when some value is not printed at exactly that scale. SUM and AVG
    then add integers: Decimal additions and the quantizing of every row's result were
    half the CPU of a running DECIMAL SUM over 20,000 rows."""
    if src.type in INT_TYPES and scale == 0:
        return [None if v is None else int(v) for v in raw]
    if src.type not in DECIMAL_TYPES or src.decimals != scale:
        return None
    out: list[int | None] = []
    if not scale:
        for v in raw:
            if v is not None and b"." in v:
                return None
            out.append(None if v is None else int(v))
        return out
    point = -scale - 1
    try:
        for v in raw:
            if v is None:
                out.append(None)
            elif v[point] == 46:  # "."
                out.append(int(v.replace(b".", b"")))
            else:
                return None
    except IndexError:  # shorter than the scale
        return None
    return out


def _scaled_text(units: int, scale: int) -> bytes:
    if not scale:
        return b"%d" % units
    digits = b"%0*d" % (scale + 1, abs(units))  # a digit before the point at least
    return (b"-" if units < 0 else b"") + digits[:-scale] + b"." + digits[-scale:]


def _scaled_sums(kind: str, values: list[int | None], frames: list[tuple[int, int]], scale: int,
                 out_scale: int) -> list[bytes | None]:
    """SUM (at ``scale``) or AVG (at ``out_scale``, rounded half away from zero as MySQL
    does) of each frame, from integer prefix sums: exact, as MySQL's DECIMAL arithmetic."""
    sums = [0]
    counts = [0]
    total = n = 0
    for x in values:
        if x is not None:
            total += x
            n += 1
        sums.append(total)
        counts.append(n)
    out: list[bytes | None] = []
    shift = 10 ** max(out_scale - scale, 0)
    for lo, hi in frames:
        n = counts[hi] - counts[lo]
        if n == 0:
            out.append(None)
            continue
        total = sums[hi] - sums[lo]
        if kind == P.WIN_SUM:
            out.append(_scaled_text(total, scale))
            continue
        q, r = divmod(abs(total) * shift, n)
        if 2 * r >= n:
            q += 1
        out.append(_scaled_text(-q if total < 0 else q, out_scale))
    return out


def _extremes(raw: list[bytes | None], frames: list[tuple[int, int]], key_of: Any,
              smallest: bool) -> list[bytes | None]:
    """MIN/MAX over each frame in O(rows): every supported frame's ends only move forward
    as the row does, so a deque of candidates (keys monotonic, the first of equals kept)
    slides with them (a scan of each frame is O(rows²) for a running MIN)."""
    keys = [key_of(v) if v is not None else None for v in raw]
    candidates: deque[int] = deque()
    added = 0
    out: list[bytes | None] = []
    for lo, hi in frames:
        while added < hi:
            k = keys[added]
            if k is not None:
                while candidates and (keys[candidates[-1]] > k if smallest else keys[candidates[-1]] < k):
                    candidates.pop()
                candidates.append(added)
            added += 1
        while candidates and candidates[0] < lo:
            candidates.popleft()
        out.append(raw[candidates[0]] if candidates else None)
    return out


async def execute(node: P.Window, vcursor: VCursor, bindvars: Mapping[str, Any]) -> Result:
    source = node.input
    input_keys: list[tuple[Any, ...]] | None = None
    input_order: _Spec = ()
    if isinstance(source, P.Route) and source.order_by and not source.truncate:
        # the merged rows with their keys: each row decoded and keyed once for the merge
        # and for every window whose sort is a prefix of the route's ORDER BY
        res, input_keys = await route.execute_sorted(source, vcursor, bindvars)
        input_order = tuple((resolve_index(k.column, len(res.fields)), k.desc) for k in source.order_by)
    else:
        res = await dispatch.execute(source, vcursor, bindvars)
    fields = list(res.fields)
    out_fields = [_field(fn, fields, bindvars) for fn in node.functions]
    rows = res.rows
    # windows with the same PARTITION BY / ORDER BY share one layout
    layouts: dict[tuple[tuple[int, ...], _Spec], _Partitions] = {}
    columns = []
    for fn, f in zip(node.functions, out_fields, strict=True):
        key = (tuple(fn.partition), _spec(fn))
        if key not in layouts:
            layouts[key] = _partitions(fn, rows, fields, input_order, input_keys)
        columns.append(_compute(fn, layouts[key], rows, fields, f, bindvars))
    out_rows = [row + extra for row, extra in zip(rows, zip(*columns, strict=True), strict=True)]
    return Result(fields=fields + out_fields, rows=out_rows)


async def stream(node: P.Window, vcursor: VCursor, bindvars: Mapping[str, Any]) -> AsyncGenerator[Result, None]:
    async for chunk in from_result(await execute(node, vcursor, bindvars)):
        yield chunk

