"""MySQL's functions in the proxy's one evaluator (``rewriter.functions``) answer as MariaDB
does, as the client sees them: each expression is evaluated over rows decoded from a real
MariaDB result (as the engine decodes them for the evaluator), its result type worked out
from the columns' types, and the value rendered as the proxy's Projection sends it; MariaDB
evaluates ``SELECT <expression> FROM fnrows`` over the same rows, and the texts must be
equal byte for byte (and the column types of the same family)."""

from __future__ import annotations

import pytest
import pytest_asyncio
import sqlglot
from sqlglot import exp

from proxy.engine.projection_compute import computed_text, field_kind
from proxy.engine.result import evaluator_value
from rewriter.dialect import DIALECT
from rewriter.errors import Unsupported
from rewriter.evaluate import compile_condition, compile_expr, compile_kind

pytestmark = pytest.mark.filterwarnings("ignore:.*(Truncated|Incorrect|Data truncated|Out of range)")

COLUMNS = "i, d, f, s, b, t, dt, ts, tm, ds, n"
DDL = """CREATE TABLE fnrows (id INT PRIMARY KEY, i INT, d DECIMAL(10,3), f DOUBLE,
s VARCHAR(30) COLLATE utf8mb4_general_ci, b VARBINARY(20), t VARCHAR(20), dt DATE, ts DATETIME,
tm TIME, ds VARCHAR(30), n INT)"""
ROWS = [
    "(1, 7, 2.500, 1.5, 'Apple', 'Apple', '12abc', '2024-02-29', '2024-02-29 23:59:59', '10:20:30',"
    " '2024-01-31', 3)",
    "(2, -7, -0.125, -2.25e3, 'apple  ', 'apple', ' 3.5e1z', '2023-12-31', '2023-12-31 00:00:00', '-01:02:03',"
    " '2024-1-5 7:08:09', -2)",
    "(3, 0, 0.000, 0, 'ÄPFEL straße', 'a%b', 'abc', '2024-01-31', '2024-03-31 12:30:00', '838:59:59',"
    " 'not a date', 0)",
    "(4, 12, 1234.567, 0.125, ' x,y,z ', 'x', '-5', '2000-01-01', '1999-12-31 23:59:59', '00:00:00',"
    " '2024-02-30', 13)",
    "(5, 15, 15.555, 2.5, '', '', '2.5', '2021-01-03', '2021-01-01 06:07:08', '100:00:01', '20240131', 1)",
    "(6, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]

CONTROL = [
    "CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' ELSE 'zero' END", "CASE i WHEN 7 THEN d WHEN 0 THEN 1 END",
    "CASE s WHEN 'apple' THEN 1 ELSE 0 END", "CASE WHEN t THEN f ELSE i END", "CASE WHEN i IS NULL THEN dt END",
    "CASE i WHEN NULL THEN 1 ELSE 2 END", "IF(i > 0, s, t)", "IF(i, d, f)", "IF(t, 1, 0)", "IF(NULL, 1, 2)",
    "IF(i > 0, dt, NULL)", "IF(i > 0, ts, dt)", "IFNULL(i, 'none')", "IFNULL(d, 0)", "IFNULL(dt, ts)",
    "COALESCE(NULL, i, d)", "COALESCE(s, t, 'z')", "NULLIF(i, 7)", "NULLIF(s, 'APPLE')", "NULLIF(d, 0)",
    "GREATEST(i, d)", "GREATEST(i, 3, n)", "LEAST(i, d, f)", "GREATEST(s, 'b')", "LEAST(s, t)", "GREATEST(i, NULL)",
    "GREATEST(t, 9)", "LEAST(dt, '2024-01-15')", "GREATEST(dt, ts)",
]
STRINGS = [
    "CONCAT(s, '-', i)", "CONCAT(s, NULL)", "CONCAT(d, f, dt)", "CONCAT(ts, '|', tm)", "CONCAT(b, 'z')",
    "CONCAT_WS(',', s, i, NULL, d)", "CONCAT_WS(NULL, s)", "LENGTH(s)", "CHAR_LENGTH(s)", "LENGTH(b)",
    "LENGTH(d)", "OCTET_LENGTH(s)", "UPPER(s)", "LOWER(s)", "UPPER(b)", "LCASE(t)", "SUBSTRING(s, 2)",
    "SUBSTRING(s, 2, 3)", "SUBSTRING(s, -3)", "SUBSTRING(s, -3, 2)", "SUBSTRING(s, 0)", "SUBSTRING(s, n)",
    "SUBSTRING(s FROM 2 FOR n)", "MID(s, 2, 2)", "SUBSTR(s, 1, 0)", "LEFT(s, 3)", "LEFT(s, n)", "RIGHT(s, 2)",
    "RIGHT(t, -1)", "TRIM(s)", "LTRIM(s)", "RTRIM(s)", "TRIM(LEADING 'A' FROM s)", "TRIM(BOTH 'x' FROM 'xxaxx')",
    "TRIM(TRAILING ' ' FROM s)", "REPLACE(s, 'p', 'P')", "REPLACE(s, '', 'x')", "REPLACE(t, 'a', NULL)",
    "LPAD(s, 8, '*')", "RPAD(s, 8, 'ab')", "LPAD(s, 2, '*')", "LPAD(i, 5, '0')", "RPAD(s, n, '.')",
    "LPAD(s, -1, '*')", "LPAD(s, 10, '')", "LOCATE('p', s)", "LOCATE('P', s, 3)", "LOCATE('', s)",
    "LOCATE('e', s, 0)", "INSTR(s, 'PL')", "INSTR(s, 'a')", "POSITION('x' IN s)", "LOCATE('b', b)",
    "LOCATE('A', b)", "REVERSE(s)", "REPEAT(s, 2)", "REPEAT('ab', n)", "SPACE(n)", "REPEAT(s, 100000000)", "LPAD(s, 20000000, 'x')", "CAST('1e100' AS DECIMAL(6,2))",
    "CAST(-1e100 AS DECIMAL(6,2))", "ROUND(f, 400)", "ROUND(f, -400)", "TIME('99999999999:00:00')",
    "HOUR('99999999999:00:00')", "TIME('1000:00:00')", "TIME(ds)", "TIME('10:00:00.12')", "HOUR('-4294967294:00:00')", "SUBSTRING_INDEX(s, ',', 2)",
    "SUBSTRING_INDEX(s, ',', -1)", "MD5(s)", "SHA1(b)", "CRC32(s)", "HEX(s)", "HEX(b)", "HEX(i)", "HEX(d)",
    "HEX(f)", "FIELD(s, 'x', 'apple', 'Apple')", "FIELD(i, 0, 7, 12)", "FIELD(t, 12, 'abc')", "FIELD(NULL, 1)",
    "ELT(n, 'a', 'b', 'c')", "ELT(n, s, t)", "SUBSTRING_INDEX(ds, '-', 2)", "ASCII(s)", "CONCAT(UPPER(LEFT(s, 1)), i + 1)",
]
NUMERIC = [
    "i & 5", "i | n", "i ^ 3", "~i", "i << 2", "i >> 1", "d & 3", "f | 0", "t & 7", "n << 64",
    "i > 0 XOR n > 0", "t XOR 0", "NULL XOR 1", "PI()", "PI() * 2", "PI() / 2", "PI() + d", "PI() * f", "ROUND(f, 1) * ROUND(d, 2)", "ROUND(f, 1) + t",
    "CONCAT(d / 3)", "CONCAT(i / 7)", "CONCAT(d * 2)", "CONCAT(i / 2, '|', d / 1)", "LENGTH(i / 3)", "CONCAT(d / 3 * 2)", "CONCAT(i / 7 + d)",
    "CONCAT(d / 3 / 2)", "CONCAT(i / 3 * 3)",
    "f * 1e20", "f / 1e9", "CONCAT(f * 1e20)", "CONCAT(f / 1e9)", "CONCAT(f * 3)", "CONCAT(1 / 3e0)",
    "ABS(i)", "ABS(d)", "ABS(f)", "ABS(t)", "ROUND(d)", "ROUND(d, 1)", "ROUND(d, 2)", "ROUND(d, -1)", "ROUND(i, -1)",
    "ROUND(f)", "ROUND(f, 1)", "ROUND(t)", "ROUND(d, 5)", "ROUND(i / 3, 2)", "ROUND(-2.5)", "ROUND(2.5)",
    "ROUND(1.235e0, 2)", "ROUND(d * 1.5, 1)", "TRUNCATE(d, 1)", "TRUNCATE(f, 0)", "TRUNCATE(i, -1)",
    "TRUNCATE(d, 0)", "FLOOR(d)", "FLOOR(f)", "FLOOR(i)", "FLOOR(t)", "CEIL(d)", "CEILING(f)", "CEIL(i / 2)",
    "MOD(i, 4)", "MOD(d, 1)", "MOD(i, 0)", "SIGN(i)", "SIGN(d)", "SIGN(t)", "POW(i, 2)", "POWER(2, n)",
    "SQRT(i)", "SQRT(d)", "EXP(n)", "LN(i)", "CAST(d AS SIGNED)", "CAST(f AS SIGNED)", "CAST(t AS SIGNED)",
    "CAST(s AS SIGNED)", "CAST(i AS UNSIGNED)", "CAST(d AS DECIMAL(10,1))", "CAST(t AS DECIMAL(5,2))",
    "CAST(f AS DECIMAL(6,2))", "CAST(d AS DECIMAL(3,1))", "CAST(i AS DECIMAL)", "CAST(i AS CHAR)",
    "CAST(s AS CHAR(3))", "CAST(d AS CHAR)", "CAST(dt AS CHAR)", "CAST(ds AS DATE)", "CAST(ts AS DATE)",
    "CAST(ds AS DATETIME)", "CAST(dt AS DATETIME)", "CAST(tm AS CHAR)", "CAST(ts AS TIME)", "CAST(t AS DOUBLE)",
    "CONVERT(d, SIGNED)", "CONVERT(ds, DATE)", "CAST(dt AS SIGNED)", "CAST(ds AS DATETIME(3))",
]
TEMPORAL = [
    "DATE(ts)", "DATE(ds)", "DATE(dt)", "TIME(ts)", "TIME(tm)", "YEAR(dt)", "YEAR(ds)", "MONTH(ts)",
    "DAY(dt)", "DAYOFMONTH(ds)", "HOUR(ts)", "HOUR(tm)", "MINUTE(tm)", "SECOND(ts)", "HOUR(ds)",
    "DAYOFWEEK(dt)", "DAYOFYEAR(dt)", "DAYOFYEAR(ds)", "WEEKDAY(dt)", "QUARTER(ts)", "WEEK(dt)", "WEEK(ts)",
    "YEARWEEK(dt)", "YEARWEEK(dt, 1)", "YEARWEEK(ds, 3)", "TIME_TO_SEC(tm)", "TIME_TO_SEC(ts)", "TIME_TO_SEC(ds)",
    "TIME_TO_SEC('10:00:00.5')", "TIME_TO_SEC('-01:02:03')", "SEC_TO_TIME(i * 1000)", "SEC_TO_TIME(d)",
    "SEC_TO_TIME(f * 1000)", "SEC_TO_TIME(4000000)", "SEC_TO_TIME(t)", "SEC_TO_TIME(1.5)",
    "FROM_DAYS(i * 100000)", "FROM_DAYS(TO_DAYS(dt) + n)", "FROM_DAYS(n)", "TIMESTAMP(dt)", "TIMESTAMP(ts)",
    "TIMESTAMP(ds)", "TIMESTAMP('2024-01-31 10:00:00.5')", "TIMESTAMP('2024-01-31')",
    "WEEK(dt, 1)", "WEEK(dt, 3)", "WEEK(ds)", "WEEKOFYEAR(dt)", "DAYNAME(dt)", "MONTHNAME(ts)",
    "EXTRACT(YEAR FROM dt)", "EXTRACT(MONTH FROM ds)", "EXTRACT(YEAR_MONTH FROM ts)", "EXTRACT(DAY_SECOND FROM ts)",
    "EXTRACT(HOUR FROM ts)", "EXTRACT(MINUTE FROM tm)", "EXTRACT(QUARTER FROM dt)", "EXTRACT(WEEK FROM dt)",
    "DATE_ADD(dt, INTERVAL 1 MONTH)", "DATE_ADD(dt, INTERVAL 1 YEAR)", "DATE_SUB(dt, INTERVAL 1 MONTH)",
    "DATE_ADD(dt, INTERVAL 1 DAY)", "DATE_ADD(dt, INTERVAL 2 HOUR)", "DATE_ADD(ts, INTERVAL 1 SECOND)",
    "DATE_ADD(ts, INTERVAL 1 MONTH)", "DATE_ADD(ds, INTERVAL 1 MONTH)", "DATE_ADD(ds, INTERVAL 1 HOUR)",
    "DATE_ADD(dt, INTERVAL n DAY)", "DATE_ADD(dt, INTERVAL n MONTH)", "DATE_SUB(ts, INTERVAL n WEEK)",
    "DATE_ADD(dt, INTERVAL 1 QUARTER)", "DATE_ADD(ts, INTERVAL '1:30' HOUR_MINUTE)",
    "DATE_ADD(dt, INTERVAL '1-2' YEAR_MONTH)", "DATE_ADD(ts, INTERVAL '1 2:3:4' DAY_SECOND)",
    "DATE_ADD(tm, INTERVAL 1 HOUR)", "tm + INTERVAL 1 DAY", "DATE_SUB(tm, INTERVAL 30 MINUTE)",
    "tm + INTERVAL 1 MONTH", "DATE_ADD(tm, INTERVAL '1:30' HOUR_MINUTE)",
    "dt + INTERVAL 1 DAY", "dt - INTERVAL 1 MONTH", "ts + INTERVAL 30 MINUTE", "INTERVAL 1 MONTH + dt",
    "ds + INTERVAL 1 DAY", "ADDDATE(dt, INTERVAL 1 MONTH)", "ADDDATE(dt, 3)", "SUBDATE(dt, 31)",
    "SUBDATE(ts, INTERVAL 1 YEAR)", "TIMESTAMPADD(MONTH, 1, dt)", "TIMESTAMPADD(MINUTE, n, ts)",
    "DATEDIFF(dt, '2024-01-01')", "TO_DAYS(dt)", "TO_DAYS(ds)", "DATEDIFF(ts, '0000-03-01')",
    "DATEDIFF('0000-02-29', dt)", "DATEDIFF(ts, dt)", "DATEDIFF(ds, dt)", "TIMESTAMPDIFF(DAY, dt, ts)",
    "TIMESTAMPDIFF(MONTH, dt, '2024-12-31')", "TIMESTAMPDIFF(MONTH, '2024-01-31', dt)",
    "TIMESTAMPDIFF(YEAR, ts, '2024-02-29')", "TIMESTAMPDIFF(HOUR, ts, dt)", "TIMESTAMPDIFF(SECOND, dt, ts)",
    "TIMESTAMPDIFF(QUARTER, dt, ts)", "TIMESTAMPDIFF(MINUTE, ds, ts)",
    "DATE_FORMAT(ts, '%Y-%m-%d %H:%i:%s')", "DATE_FORMAT(dt, '%d/%m/%y %W %M %a %b')",
    "DATE_FORMAT(ts, '%e %c %k %l %p %r %T %h %I %j %w %D')", "DATE_FORMAT(dt, '%U %u %V %v %X %x')",
    "DATE_FORMAT(ds, '%Y%m')", "DATE_FORMAT(ts, '%f %% %Q')", "LAST_DAY(dt)", "LAST_DAY(ts)", "LAST_DAY(ds)",
    "MAKEDATE(2024, n)", "MAKEDATE(i, 60)", "MAKEDATE(YEAR(dt), 1)",
    "STR_TO_DATE(ds, '%Y-%m-%d')", "STR_TO_DATE(ds, '%Y-%m-%d %H:%i:%s')", "STR_TO_DATE('31/01/2024', '%d/%m/%Y')",
    "STR_TO_DATE(CONCAT(n, '/02/2024'), '%d/%m/%Y')", "STR_TO_DATE('Jan 5 2024 3:04 PM', '%b %e %Y %l:%i %p')",
    "STR_TO_DATE(DATE_FORMAT(dt, '%M %d, %Y'), '%M %d, %Y')", "STR_TO_DATE(SUBSTRING(ds, 1, 7), '%Y-%m-%d')",
    "STR_TO_DATE(t, '%Y')", "STR_TO_DATE(s, '%d/%m/%Y')", "DATE_ADD(STR_TO_DATE(ds, '%Y-%m-%d'), INTERVAL 1 DAY)", "STR_TO_DATE('10:20:30', '%H:%i:%s')",
    "dt + 1", "ts + 1", "tm + 1", "ts - dt", "dt - dt", "dt * 1.5", "dt / 2", "-dt", "dt + i", "tm * 2",
    "dt LIKE '2024%'", "ts LIKE '%:59'", "dt = 20240229", "NOT dt", "dt AND tm", "dt = '2024-2-29'", "dt > '2024-1-5'", "ts < dt", "dt BETWEEN '2024-01-01' AND ts",
    "dt IN ('2024-02-29', '2023-12-31')", "DATE(ts) = dt", "YEAR(dt) * 100 + MONTH(dt)",
    "DATE_FORMAT(DATE_ADD(dt, INTERVAL -1 DAY), '%Y-%m')", "IF(DATEDIFF(ts, dt) > 0, 'later', 'same')",
]
EXPRESSIONS = CONTROL + STRINGS + NUMERIC + TEMPORAL

# MariaDB's column type -> the evaluator's kind family
_SAME_FAMILY = {("int", "decimal"), ("decimal", "int")}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def fnrows(oracle):
    await oracle("DROP TABLE IF EXISTS fnrows")
    await oracle(DDL)
    await oracle("INSERT INTO fnrows VALUES " + ", ".join(ROWS))
    res = await oracle(f"SELECT {COLUMNS} FROM fnrows ORDER BY id")
    names = [f.name for f in res.fields]
    kinds = [field_kind(f) for f in res.fields]
    decoded = [[evaluator_value(f, v) for f, v in zip(res.fields, row, strict=True)] for row in res.rows]
    return names, kinds, decoded


def _compile(expression: str, names: list[str]):
    tree = sqlglot.parse_one(f"SELECT {expression}", read=DIALECT).expressions[0]

    def resolve(e: exp.Expression) -> int | None:
        return names.index(e.name) if isinstance(e, exp.Column) else None

    return compile_expr(tree, resolve), compile_kind(tree, resolve)


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("expression", EXPRESSIONS)
async def test_function_answers_as_mariadb(oracle, fnrows, expression):
    names, kinds, rows = fnrows
    fn, kind_fn = _compile(expression, names)
    kind = kind_fn(kinds.__getitem__, {})
    res = await oracle(f"SELECT {expression} FROM fnrows ORDER BY id")
    theirs = [row[0] for row in res.rows]
    ours = [computed_text(fn(row, {}), kind) for row in rows]
    assert ours == theirs, (kind, field_kind(res.fields[0]))
    their_kind = field_kind(res.fields[0])[0]
    assert kind[0] == their_kind or (kind[0], their_kind) in _SAME_FAMILY, (kind, res.fields[0])


@pytest.mark.parametrize("expression", [
    "NOW()", "CURDATE()", "CURRENT_TIMESTAMP", "RAND()", "UUID()", "SYSDATE()", "UNIX_TIMESTAMP(ts)",
    "FROM_UNIXTIME(i)", "ROUND(d, i)", "DATE_ADD(dt, INTERVAL 1.5 DAY)", "CONVERT(s USING latin1)",
    "STR_TO_DATE(ds, s)", "DATE(NOW())", "LAST_INSERT_ID()", "WEEK(dt, i)",
])
def test_nondeterministic_or_inexact_functions_are_refused(expression):
    """Refused (1235), so the statement runs where MySQL evaluates it."""
    with pytest.raises(Unsupported):
        _compile(expression, COLUMNS.split(", "))


@pytest.mark.parametrize("expression", ["POW(10, 400)", "EXP(1000)", "POW(0, -1)", "POW(-8, 0.5)", "1e308 * 10",
                                        "f * 1e308"])
def test_a_double_out_of_range_is_an_error_not_a_value(expression):
    """MariaDB answers 1690 (DOUBLE value is out of range); the evaluator raises
    OverflowError, which the engine answers as that error."""
    fn, _ = _compile(expression, COLUMNS.split(", "))
    row = [None] * 11
    row[2] = 1e10
    with pytest.raises(OverflowError):
        fn(row, {})


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("condition", ["s", "t", "b", "IF(i > 0, 'no', '')", "CONCAT(i)", "dt", "tm", "d", "f",
                                       "n - 1", "DATE_FORMAT(dt, '%d')", "i > 0 AND t"])
async def test_a_condition_is_true_as_mariadb_filters(oracle, fnrows, condition):
    """As a WHERE/HAVING condition a value is true when it reads as a non-zero number:
    compile_condition keeps exactly the rows MariaDB keeps."""
    names, _, rows = fnrows
    tree = sqlglot.parse_one(f"SELECT {condition}", read=DIALECT).expressions[0]
    keep = compile_condition(tree, lambda e: names.index(e.name) if isinstance(e, exp.Column) else None)
    res = await oracle(f"SELECT id FROM fnrows WHERE {condition} ORDER BY id")
    assert [k + 1 for k, row in enumerate(rows) if keep(row, {})] == [int(r[0]) for r in res.rows]
