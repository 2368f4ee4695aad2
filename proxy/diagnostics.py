"""The session's diagnostics area (the warnings and error of its last statement that used a
table: SHOW WARNINGS, SHOW ERRORS, SHOW COUNT(*) ..., @@warning_count, @@error_count) as MariaDB
keeps it, where the proxy's shard connections each keep their own.

MariaDB: "the list of messages is reset for each new statement that uses a table"; a statement
that uses none (SET, BEGIN, ``SELECT ROW_COUNT()``, ``SELECT 1 FROM DUAL``: measured on MariaDB 11,
``sqltext.lexer.reads_tables``) leaves them. The fast path keeps the link a statement warned or
failed on (``proxy.fast_path.protocol``); when the last statement that used a table left nothing
(``ProxySession.diagnostics_clean``), the reads are answered here: a pooled shard connection the
normal path would read them on holds whatever its last statement left (another session's
warnings, a statement's before the fast path's that cleared them on another connection)."""

from __future__ import annotations

import re

from proxy.engine.result import Result
from sqltext.lexer import reads_tables

# What reads the diagnostics area, as the command loop would send it to a shard.
DIAGNOSTICS_READ = re.compile(
    r"\s*(?:show\s+(?:warnings|errors)(?:\s+limit\s+\d+(?:\s*,\s*\d+)?)?"
    r"|show\s+count\s*\(\s*\*\s*\)\s+(?:warnings|errors)"
    r"|select\s+@@(?:session\.)?(?:warning|error)_count(?:\s*,\s*@@(?:session\.)?(?:warning|error)_count)*)\s*",
    re.I,
)
_LIST_READ = re.compile(r"\s*show\s+(?P<what>warnings|errors)\b", re.I)
_COUNT_READ = re.compile(r"\s*show\s+count\b", re.I)
# The first words of statements that use no table unless a FROM (a subquery's) names one:
# ``SET @a = (SELECT ... FROM t)`` clears them, as MariaDB does.
_WITHOUT_TABLES = frozenset(("begin", "start", "commit", "rollback", "set", "use", "savepoint", "release", "do"))


def leaves_diagnostics(kw: str, sql: str) -> bool:
    """Whether statement ``sql`` (first keyword ``kw``) leaves the diagnostics before it: it uses
    no table, or reads them."""
    if kw == "show":
        return DIAGNOSTICS_READ.fullmatch(sql) is not None
    return (kw in _WITHOUT_TABLES or kw == "select") and not reads_tables(sql)


def sets_found_rows(kw: str, sql: str) -> bool:
    """Whether statement ``sql`` (first keyword ``kw``) sets FOUND_ROWS() to the rows it sent: a
    SELECT, and SHOW COUNT(*) WARNINGS / ERRORS (MariaDB runs them as ``SELECT @@warning_count``:
    FOUND_ROWS() 1 after them, measured on MariaDB 11; SHOW WARNINGS leaves it)."""
    return kw in ("select", "with", "(") or (kw == "show" and _COUNT_READ.match(sql) is not None)


def empty_list_query(sql: str) -> str | None:
    """For ``SHOW WARNINGS`` / ``SHOW ERRORS`` (any LIMIT): the shard statement answering their
    columns and no row; None for another statement."""
    m = _LIST_READ.match(sql)
    return None if m is None else f"show {m.group('what').lower()} limit 0"


def zero_counts(res: Result) -> Result:
    """``SHOW COUNT(*) WARNINGS`` as a shard answered it, its count 0."""
    return Result(fields=res.fields, rows=[(b"0",) * len(res.fields)])


__all__ = ["DIAGNOSTICS_READ", "empty_list_query", "leaves_diagnostics", "sets_found_rows",
           "zero_counts"]
