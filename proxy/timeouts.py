"""Time limits: on one statement (``SET max_execution_time = ms``, Vitess's
``/*vt+ QUERY_TIMEOUT_MS=n */``) and on a transaction left idle (``transaction_timeout``
in the cluster file).

A statement that runs out of time is stopped like a ``KILL QUERY`` (at the shards and
at the proxy, ``proxy.running_statement``) and answers MySQL's 3024. As in MySQL,
``max_execution_time`` limits SELECT statements only; the Vitess comment limits the
statement it is written in, whatever it is, and ``QUERY_TIMEOUT_MS=0`` lifts the
session's limit for that statement. The proxy times the statement itself (MariaDB has
no ``max_execution_time``, and its ``max_statement_time`` would not cover the time a
scatter spends merging at the proxy).

An idle transaction (one holding shard connections, between two statements of its
session) older than ``transaction_timeout`` seconds is rolled back and its shard
connections go back to their pools. Its session learns it at its next statement, which
fails with 1317 (SQLSTATE 70100, the code Vitess answers for a transaction its
transaction killer ended) and is not run; the session is out of the transaction from
then on, as after a deadlock rollback in MySQL. A ``ROLLBACK`` as that next statement
succeeds (it is what the client asked for); a ``COMMIT`` fails, so no client takes the
rolled-back writes as committed.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Protocol

from proxy.errors import ER_QUERY_INTERRUPTED, ProxyError
from sqltext.lexer import first_keyword, strip_leading_comments

logger = logging.getLogger(__name__)

_QUERY_TIMEOUT_MS = re.compile(r"/\*vt\+(?:(?!\*/).)*?\bQUERY_TIMEOUT_MS\s*=\s*(?P<ms>\d+)", re.I | re.S)
# Statements max_execution_time applies to (MySQL: read-only SELECT statements).
_SELECTS = {"select", "with", "("}
_ROLLBACK = re.compile(r"^rollback(?:\s+work)?\s*;?\s*$", re.I)


def statement_timeout_s(sql: str, max_execution_time_ms: int) -> float | None:
    """How long ``sql`` may run, in seconds; None: no limit."""
    if "/*vt+" in sql:
        m = _QUERY_TIMEOUT_MS.search(sql)
        if m:
            ms = int(m.group("ms"))
            return ms / 1000 if ms > 0 else None
    if max_execution_time_ms > 0 and first_keyword(sql) in _SELECTS:
        return max_execution_time_ms / 1000
    return None


class _Transaction(Protocol):
    @property
    def touched(self) -> bool: ...


class TransactionalSession(Protocol):
    """What the idle-transaction timer needs of a ``ProxySession``."""

    @property
    def tx(self) -> _Transaction | None: ...

    async def rollback(self) -> None: ...


class IdleTransactionTimeout:
    """One client session's ``transaction_timeout``: armed after each statement that
    leaves a transaction open, disarmed when the next statement begins."""

    def __init__(self, seconds: float, connection_id: int) -> None:
        self.seconds = seconds
        self.connection_id = connection_id
        self.expired = False
        self._timer: asyncio.TimerHandle | None = None
        self._rollback: asyncio.Task[None] | None = None

    @property
    def quiet(self) -> bool:
        """Nothing armed, running or to report: ``before_statement`` would do nothing."""
        return self._timer is None and self._rollback is None and not self.expired

    def disarm(self) -> bool:
        """Cancel an armed timer that has not fired (what ``before_statement`` does then, without
        waiting); False when a rollback runs or is to be reported: ``before_statement`` must."""
        if self._rollback is not None or self.expired:
            return False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        return True

    def arm(self, session: TransactionalSession) -> None:
        tx = session.tx
        if self.seconds > 0 and tx is not None and tx.touched:
            self._timer = asyncio.get_running_loop().call_later(self.seconds, self._expire, session)

    def _expire(self, session: TransactionalSession) -> None:
        self._timer = None
        self._rollback = asyncio.create_task(self._roll_back(session))  # awaited by before_statement/stop

    async def _roll_back(self, session: TransactionalSession) -> None:
        if session.tx is None:
            return
        self.expired = True
        logger.info(
            "idle transaction rolled back (transaction_timeout)",
            extra={"connection_id": self.connection_id, "transaction_timeout_s": self.seconds},
        )
        try:
            await session.rollback()
        except ProxyError as e:  # its connections are closed; the shards roll back then
            logger.warning("rollback of an idle transaction failed", extra={"error": e.message})

    async def before_statement(self, sql: str) -> None:
        """Disarm; raise if the session's transaction was rolled back while it was idle."""
        await self._settle()
        if not self.expired:
            return
        self.expired = False
        if _ROLLBACK.match(strip_leading_comments(sql).strip()):
            return
        raise ProxyError(
            ER_QUERY_INTERRUPTED,
            f"Query execution was interrupted: the transaction was rolled back after being idle "
            f"longer than transaction_timeout ({self.seconds:g}s)",
        )

    async def _settle(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        rollback, self._rollback = self._rollback, None
        if rollback is not None:
            await rollback

    async def stop(self) -> None:
        await self._settle()
