"""Holding writes through a resharding switch (Vitess's vtgate buffering, for the switch).

Between the moment SwitchTraffic denies writes on the source shards
(:mod:`proxy.resharding.denied_writes`) and the moment the serving topology names the targets
(:mod:`proxy.resharding.topology`, followed by every proxy within the poll interval), a write
to a source shard is refused by the shard. The proxy does not pass that error on: it holds the
statement until the refusing shard no longer serves the keyspace, then plans it again and runs
it on the new shards. The hold is bounded by ``resharding.write_hold_seconds`` (10 s by
default, as Vitess's ``buffer_window``); past it the client gets Vitess's
``upstream shards are not available`` (1105, HY000) naming the keyspace. ``0`` turns holding
off (the denied error is passed on as it is).

Which writes are held (the session decides, :meth:`ProxySession.execute`):

- every autocommit DML statement of a ``multi`` or ``twopc`` session: it runs in an implicit
  transaction when it reaches several shards (Vitess's rule for a multi-shard autocommit DML),
  so a shard refusing it rolls it back on every shard it reached and running it again applies
  nothing twice; one reaching a single shard runs in plain autocommit and was refused whole;
- in ``single`` mode, an autocommit statement that reached only the refusing shard (one that
  also reached other shards may have committed there: it fails with the shard's error);
- in a ``multi``/``single`` transaction, a statement that opened the transaction's connection
  to the refusing shard (the transaction never used that shard before: that connection is
  rolled back and dropped, the transaction goes on with the new shard) and reached no other
  shard of the keyspace.

Any other transaction that meets a denied write — it read or wrote on the source shard before
the switch, or it is a twopc transaction — is rolled back by the proxy and answered
``1213 (40001) ... try restarting transaction``: Vitess fails such transactions too, and the
error is the one transaction-retry loops of drivers and ORMs already retry. Rolling it back at
once also releases the table metadata locks the switch's ``CREATE TRIGGER`` is waiting for.

Figures: ``shardgate_reshard_writes_held{keyspace,outcome}`` and
``shardgate_reshard_write_hold_seconds{keyspace}`` in /metrics.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from proxy.errors import ER_UNKNOWN_ERROR, ProxyError, ShardError
from proxy.observability.metrics import record_write_hold
from proxy.resharding.denied_writes import is_denied_write_error

logger = logging.getLogger(__name__)

T = TypeVar("T")

ER_LOCK_DEADLOCK = 1213  # "try restarting transaction": what retry loops recognise


class HoldTimedOut(ProxyError):
    def __init__(self, keyspace: str, seconds: float) -> None:
        super().__init__(
            ER_UNKNOWN_ERROR,
            f"upstream shards are not available: keyspace {keyspace} is switching shards (resharding) and the "
            f"write was held {seconds:g} s (resharding.write_hold_seconds) without the switch completing",
        )


def transaction_refused(error: ShardError) -> ProxyError:
    """The error for a transaction that met a denied write and cannot be held (rolled back)."""
    return ProxyError(
        ER_LOCK_DEADLOCK,
        f"transaction rolled back: keyspace {error.keyspace} switched shards (resharding) while the transaction "
        f"was using shard {error.shard} ({error.message}); try restarting transaction",
        "40001",
    )


def denied_shard_error(error: BaseException) -> ShardError | None:
    """``error`` if it is a shard refusing a write to a denied table."""
    return error if isinstance(error, ShardError) and is_denied_write_error(error) else None


class WriteHold:
    """The process's hold: waits for topology changes (``topology_changed`` is called by
    whoever installs a new topology) and runs held statements again."""

    def __init__(self, serving: Callable[[str], Sequence[str]], hold_seconds: float) -> None:
        self._serving = serving
        self.hold_seconds = hold_seconds
        self._change = asyncio.Event()
        self.waiting = 0  # statements held now

    @property
    def enabled(self) -> bool:
        return self.hold_seconds > 0

    def topology_changed(self) -> None:
        """A new topology is in force: every held statement looks again."""
        change, self._change = self._change, asyncio.Event()
        change.set()

    async def _until_retired(self, keyspace: str, shard: str, deadline: float) -> bool:
        """Wait until ``shard`` no longer serves ``keyspace``; False at the deadline."""
        while shard in self._serving(keyspace):
            change = self._change
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(change.wait(), remaining)
            except TimeoutError:
                pass
        return True

    async def hold(
        self,
        error: ShardError,
        run_again: Callable[[], Awaitable[T]],
        may_hold: Callable[[ShardError], Awaitable[bool]],
    ) -> T:
        """Hold a statement refused with ``error`` until its shard is retired, then
        ``run_again()`` (and again if a shard refuses it again, as in a second switch).
        ``may_hold(error)`` says whether the statement can be held, and prepares it (drops what
        it left on the refusing shard); it may raise instead (a transaction refused). When the
        statement cannot be held, ``error`` is raised as it is."""
        if not self.enabled or not await may_hold(error):
            raise error
        keyspace = error.keyspace
        started = time.monotonic()
        deadline = started + self.hold_seconds
        self.waiting += 1
        outcome = "released"
        try:
            while True:
                logger.info("write held for a resharding switch", extra={"keyspace": keyspace, "shard": error.shard})
                if not await self._until_retired(error.keyspace, error.shard, deadline):
                    outcome = "timed_out"
                    raise HoldTimedOut(keyspace, self.hold_seconds)
                try:
                    return await run_again()
                except ProxyError as e:
                    again = denied_shard_error(e)
                    if again is None:
                        raise
                    outcome = "refused"
                    if not await may_hold(again):
                        raise
                    outcome = "released"
                    error = again
        finally:
            self.waiting -= 1
            record_write_hold(keyspace, outcome, time.monotonic() - started)

__all__ = ["HoldTimedOut", "WriteHold", "denied_shard_error", "transaction_refused"]
