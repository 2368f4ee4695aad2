"""Python values -> MySQL literals, for the few values the data source writes into SQL text
(pushed-down filter values, rows of multi-row INSERTs): ``sqltext.quoting.sql_literal``,
the one literal renderer, with a row's dict or list value (a JSON column) as JSON text."""

from __future__ import annotations

import json
from typing import Any

from sqltext.quoting import sql_literal as render_literal


def sql_literal(value: Any) -> str:
    if isinstance(value, dict | list):
        return render_literal(json.dumps(value))
    return render_literal(value)
