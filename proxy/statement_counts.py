"""ROW_COUNT() and FOUND_ROWS() of the session's statement before.

Both read the session of the shard connection they run on. The normal path sends a statement to
a pooled shard connection, rarely the one the session's statement before ran on (a fast-path
statement ran on a link of its own, ``proxy.fast_path``; SET, @@variables and SHOW COUNT(*) are the
proxy's answers; another statement took a connection of another session's last): after every
statement the session notes its ROW_COUNT() (``ProxySession.counts_before``, set by the fast path
and by ``ProxyConnection``) and the rows of its last SELECT (``ProxySession.found_rows``), and the
normal path's next statement is sent with those values written in, as Vitess writes its session's
row count in (``__vtrcount``)."""

from __future__ import annotations

import re

from proxy.user_variables import is_select_item
from sqltext.lexer import masked_code
from sqltext.quoting import quote_identifier

# A session's ROW_COUNT() (and rows sent) after a statement that failed (FOUND_ROWS() as it was),
# and after one that changed no row (BEGIN, COMMIT, ROLLBACK, an OK of the proxy's).
FAILED_COUNTS = (-1, None)
NO_ROWS = (0, None)

_COUNT_CALL = re.compile(r"\b(row_count|found_rows)\s*\(\s*\)", re.I)


def with_statement_counts(sql: str, row_count: int, found_rows: int | None) -> str:
    """``sql`` with ``ROW_COUNT()`` (and ``FOUND_ROWS()`` when known) replaced by the value."""
    lowered = sql.lower()
    if "row_count" not in lowered and "found_rows" not in lowered:  # the common case
        return sql
    code = masked_code(sql)
    out: list[str] = []
    at = 0
    for m in _COUNT_CALL.finditer(code):
        value = row_count if m.group(1).lower() == "row_count" else found_rows
        if value is None:
            continue
        out.append(sql[at:m.start()])
        out.append(f"({value})")
        if is_select_item(code, m):  # MySQL names the column by the client's text: ROW_COUNT()
            out.append(" AS " + quote_identifier(sql[m.start():m.end()]))
        at = m.end()
    out.append(sql[at:])
    return "".join(out)


__all__ = ["FAILED_COUNTS", "NO_ROWS", "with_statement_counts"]
