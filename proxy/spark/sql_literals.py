"""Python values -> MySQL literals, for the few values the data source writes into SQL text
(pushed-down filter values, rows of multi-row INSERTs)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any


def sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"MySQL has no literal for {value!r}")
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return f"X'{data.hex()}'" if data else "''"
    if isinstance(value, dt.datetime):
        return _quote(value.replace(tzinfo=None).isoformat(sep=" ") if value.tzinfo is None else
                      value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" "))
    if isinstance(value, dt.date | dt.time):
        return _quote(value.isoformat())
    if isinstance(value, dt.timedelta):
        return _quote(_timedelta_text(value))
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, dict | list):
        return _quote(json.dumps(value))
    raise TypeError(f"no MySQL literal for {type(value).__name__} value {value!r}")


def _quote(text: str) -> str:
    # Backslashes and quotes escaped the way MySQL's default sql_mode reads them.
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0") + "'"


def _timedelta_text(value: dt.timedelta) -> str:
    total_us = value // dt.timedelta(microseconds=1)
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    seconds, micros = divmod(total_us, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{sign}{hours}:{minutes:02d}:{secs:02d}.{micros:06d}"
