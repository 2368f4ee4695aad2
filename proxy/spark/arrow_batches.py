"""Rows fetched as raw text -> Arrow record batches, one whole column at a time.

The drivers run with conversions off, so a value is str (text columns) or bytes (binary
columns, and everything under mysqlclient). Arrow parses a whole column of text in one cast,
which is both faster than per-value Python conversion and exact for DECIMAL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from proxy.spark.column_types import ColumnSpec


def record_batch(columns: Sequence[ColumnSpec], rows: Sequence[Sequence[Any]]) -> pa.RecordBatch:
    values = list(zip(*rows, strict=True)) if rows else [() for _ in columns]
    arrays = [column_array(spec, list(col)) for spec, col in zip(columns, values, strict=True)]
    schema = pa.schema([pa.field(c.name, c.arrow_type, nullable=c.nullable) for c in columns])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def column_array(spec: ColumnSpec, values: list[Any]) -> pa.Array:
    target = spec.arrow_type
    if pa.types.is_binary(target):
        return pa.array(values, type=pa.binary())
    raw = pa.array(values, type=pa.binary() if values and _has_bytes(values) else pa.string())
    text = raw.cast(pa.string()) if pa.types.is_binary(raw.type) else raw
    if pa.types.is_string(target):
        return text
    if pa.types.is_timestamp(target) or pa.types.is_date32(target):
        # MySQL's zero date (allowed outside strict mode) has no Spark value: read it as NULL,
        # as Connector/J does with zeroDateTimeBehavior=convertToNull.
        text = pc.if_else(pc.starts_with(text, "0000-00-00"), pa.scalar(None, pa.string()), text)
    return text.cast(target)


def _has_bytes(values: list[Any]) -> bool:
    for v in values:
        if v is not None:
            return isinstance(v, bytes | bytearray)
    return False

