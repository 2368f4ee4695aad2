"""JSON forms of the Python values the binlog decoder produces.

Chosen to match Debezium's JSON converter where a consumer would notice: DECIMAL as a
string (``decimal.handling.mode=string``), binary strings as base64
(``binary.handling.mode=base64``); temporal values are ISO-8601 strings (Debezium's
``time.precision.mode=adaptive`` would give epoch integers — documented difference).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any


def json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(json_value(v) for v in value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    raise TypeError(f"no JSON form for {type(value).__name__}")


def json_row(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    return {name: json_value(value) for name, value in row.items()}


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=json_value)
