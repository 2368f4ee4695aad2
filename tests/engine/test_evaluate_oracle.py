"""The proxy's one expression evaluator (``rewriter.evaluate``) gives MariaDB's answers:
each expression is evaluated over rows decoded from a real MariaDB result, and MariaDB
itself evaluates ``SELECT <expression> FROM evalrows`` over the same rows."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal

import pytest
import sqlglot
from sqlglot import exp

from proxy.engine.result import decode_value
from rewriter.dialect import DIALECT
from rewriter.evaluate import compile_expr

pytestmark = [pytest.mark.asyncio(loop_scope="session"),
              pytest.mark.filterwarnings("ignore:.*Truncated incorrect")]  # MariaDB's, for '12abc' + 1

ROWS = [
    "(1, 7, 2.500, 1.5, 'Apple', 'Apple', '12abc', 'x')",
    "(2, -7, -0.125, -2.25e3, 'apple ', 'apple', ' 3.5e1z', 'X')",
    "(3, 0, 0.000, 0, 'ÄPFEL', 'a%b', 'abc', '')",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]

EXPRESSIONS = [
    # numeric coercion of strings: the longest numeric prefix, as DOUBLE
    "t + 1", "t * 2", "-t", "t = 12", "t > 10", "t < 36",
    # arithmetic: exact integers and DECIMALs, DOUBLE wins, NULL on division by zero
    "i + d", "i * d", "i - f", "i / 2", "d / 3", "i / 0", "i % 3", "-i % 3", "i DIV 2", "-i DIV 2", "d % 1",
    "i MOD 0", "f / 0", "i DIV 0", "d * d * d", "1 / 3", "1 / 3 * 3", "d / 7 * 7", "(i + d) / (d - 1)",
    # comparisons: collation-insensitive text, trailing spaces ignored, binary strings exact
    "s = 'apple'", "s = 'APPLE'", "s < 'b'", "s = 'apfel'", "b = 'apple'", "b = 'Apple'", "s = b",
    "s > b", "s <=> NULL", "NULL <=> NULL", "i <=> 7", "i = '7'", "d = 2.5", "f = 1.5", "i = d",
    "i BETWEEN -10 AND 0", "i BETWEEN NULL AND 0", "i BETWEEN 0 AND NULL", "s BETWEEN 'a' AND 'b'",
    "i IN (7, 0)", "i IN (1, NULL)", "i NOT IN (1, NULL)", "s IN ('APPLE', 'x')", "NULL IN (1)",
    # three-valued logic and truth of strings
    "i > 0 AND s = 'apple'", "i > 0 OR NULL", "i > 100 AND NULL", "NOT i", "NOT t", "t AND 1", "u OR 0",
    "i IS NULL", "i IS NOT NULL", "t IS TRUE", "u IS FALSE", "(i > 0) IS NOT TRUE",
    # LIKE: % _ and escapes, case-insensitive text, case-sensitive binary
    "s LIKE 'app%'", "s LIKE 'A_ple'", "b LIKE 'app%'", "b LIKE 'a\\\\%b'", "s LIKE '%'", "u LIKE 'x'",
    "s NOT LIKE '%e'", "s LIKE 'apple'", "s LIKE 'a%'", "s LIKE '_pf%'", "t NOT LIKE '1%'",
]

DDL = """CREATE TABLE evalrows (id INT PRIMARY KEY, i INT, d DECIMAL(10,3), f DOUBLE,
s VARCHAR(20) COLLATE utf8mb4_general_ci, b VARBINARY(20), t VARCHAR(20), u VARCHAR(5))"""


@pytest.fixture(scope="module")
async def evalrows(oracle):
    await oracle("DROP TABLE IF EXISTS evalrows")
    await oracle(DDL)
    await oracle("INSERT INTO evalrows VALUES " + ", ".join(ROWS))
    res = await oracle("SELECT i, d, f, s, b, t, u FROM evalrows ORDER BY id")
    names = [f.name for f in res.fields]
    decoded = [[decode_value(f, v) for f, v in zip(res.fields, row, strict=True)] for row in res.rows]
    return names, decoded


def _same(ours, theirs: Decimal | None) -> bool:
    """Equal as MariaDB shows the value: an exact result rounded (half up) to the
    shown scale, as the proxy's projection does; a DOUBLE to 1e-9."""
    if ours is None or theirs is None:
        return ours is None and theirs is None
    if isinstance(ours, int | Decimal):
        return Decimal(ours).quantize(theirs, rounding=ROUND_HALF_UP) == theirs
    return math.isclose(float(ours), float(theirs), rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("expression", EXPRESSIONS)
async def test_evaluator_answers_as_mariadb(oracle, evalrows, expression):
    names, rows = evalrows
    tree = sqlglot.parse_one(f"SELECT {expression}", read=DIALECT).expressions[0]
    fn = compile_expr(tree, lambda e: names.index(e.name) if isinstance(e, exp.Column) else None)
    res = await oracle(f"SELECT {expression} FROM evalrows ORDER BY id")
    theirs = [row[0] for row in res.rows]
    ours = [fn(row, {}) for row in rows]
    expected = [None if v is None else Decimal(v.decode()) for v in theirs]
    assert all(_same(o, t) for o, t in zip(ours, expected, strict=True)), (ours, expected)
