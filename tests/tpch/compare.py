"""Run a TPC-H query on a PyMySQL connection and compare two answers.

Values are read as the server's text (no client conversion), so DECIMALs compare exactly,
scale included ("1.50" is not "1.5"), dates and strings as sent; DOUBLE/FLOAT compare to 9
significant digits (float sums depend on addition order).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pymysql
from pymysql.constants import FIELD_TYPE

_FLOATS = {FIELD_TYPE.DOUBLE, FIELD_TYPE.FLOAT}


@dataclass
class Answer:
    columns: list[str]
    types: list[int]
    rows: list[tuple]

    def normalised(self) -> list[tuple]:
        return [
            tuple(_norm(t, v) for t, v in zip(self.types, row, strict=True)) for row in self.rows
        ]


def _norm(type_code: int, value: str | None) -> object:
    if value is None:
        return None
    if type_code in _FLOATS:
        return float(f"{float(value):.9g}")
    return value


def run(conn: pymysql.connections.Connection, sql: str) -> Answer:
    with conn.cursor() as cur:
        cur.execute(sql)
        desc = cur.description or ()
        rows = [tuple(r) for r in cur.fetchall()]
    return Answer([d[0] for d in desc], [d[1] for d in desc], rows)


def raw_connect(**kw: object) -> pymysql.connections.Connection:
    """A PyMySQL connection returning every value as the server's text."""
    return pymysql.connect(conv={}, autocommit=True, **kw)


def differences(ours: Answer, theirs: Answer, order_keys: list[int]) -> list[str]:
    """Why `ours` is not `theirs` (empty when equal): column names, then the ORDER BY
    columns' sequence, then the rows as a multiset."""
    problems: list[str] = []
    if [c.lower() for c in ours.columns] != [c.lower() for c in theirs.columns]:
        problems.append(f"columns {ours.columns} != {theirs.columns}")
        return problems
    a, b = ours.normalised(), theirs.normalised()
    if len(a) != len(b):
        problems.append(f"{len(a)} rows != {len(b)} rows")
    keys_a = [tuple(r[k] for k in order_keys) for r in a]
    keys_b = [tuple(r[k] for k in order_keys) for r in b]
    if order_keys and keys_a != keys_b:
        first = next((i for i, (x, y) in enumerate(zip(keys_a, keys_b, strict=False)) if x != y),
                     min(len(keys_a), len(keys_b)))
        problems.append(f"ORDER BY columns differ from row {first}: "
                        f"{keys_a[first:first + 3]} != {keys_b[first:first + 3]}")
    ca, cb = Counter(a), Counter(b)
    if ca != cb:
        extra, missing = list((ca - cb).elements()), list((cb - ca).elements())
        problems.append(f"{len(extra)} rows not in the oracle's answer, e.g. {extra[:3]}; "
                        f"{len(missing)} of its rows missing, e.g. {missing[:3]}")
    return problems
