"""Errors a change stream can end with; each names the shard it concerns."""

from __future__ import annotations


class CdcError(Exception):
    """Base class of every change-data-capture failure."""

    def __reduce__(self) -> tuple:
        # Errors cross from a shard's decoder process; the subclasses' constructors take
        # other arguments than ``args`` holds, so rebuild them without calling those.
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(cls: type[CdcError], args: tuple, state: dict) -> CdcError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class InvalidPositionError(CdcError):
    """A start position (VGTID, GTID, timestamp) that cannot be parsed or applied."""


class ShardStreamError(CdcError):
    """A failure of one shard's binlog stream."""

    def __init__(self, keyspace: str, shard: str, message: str) -> None:
        super().__init__(f"{keyspace}/{shard}: {message}")
        self.keyspace = keyspace
        self.shard = shard


class PositionPurgedError(ShardStreamError):
    """The shard no longer holds the binlogs needed to resume from the requested position."""

    def __init__(self, keyspace: str, shard: str, position: str, server_message: str) -> None:
        super().__init__(
            keyspace,
            shard,
            f"cannot resume from GTID position {position!r}: the shard's binlogs no longer "
            f"contain it (purged); restart from 'current' or 'beginning' "
            f"(server said: {server_message})",
        )
        self.position = position


class PositionUnknownError(ShardStreamError):
    """The requested position is not in the shard's binlog (e.g. ahead of the shard)."""

    def __init__(self, keyspace: str, shard: str, position: str, server_message: str) -> None:
        super().__init__(
            keyspace,
            shard,
            f"GTID position {position!r} is not in the shard's binlog "
            f"(server said: {server_message})",
        )
        self.position = position


class ShardUnavailableError(ShardStreamError):
    """The shard could not be reached after the allowed reconnection attempts."""


class XaBranchUnavailableError(ShardStreamError):
    """An XA branch was committed after the stream's position but its prepared rows
    (written to the binlog before that position, at XA PREPARE) can no longer be read:
    the stream stops rather than pass over the transaction's rows on this shard."""

    def __init__(self, keyspace: str, shard: str, xid: str, commit_gtid: str, reason: str) -> None:
        super().__init__(
            keyspace,
            shard,
            f"XA transaction {xid} committed at GTID {commit_gtid}, but its prepared rows "
            f"cannot be read from the binlog ({reason}); restart from a position before its "
            f"XA PREPARE, or from one including GTID {commit_gtid} (its rows on this shard are "
            f"then not streamed)",
        )
        self.xid = xid
        self.commit_gtid = commit_gtid


class SkewHoldTimeoutError(CdcError):
    """A shard was held back for skew longer than the allowed maximum."""

    def __init__(self, keyspace: str, shard: str, held_seconds: float) -> None:
        super().__init__(
            f"{keyspace}/{shard}: timed out while waiting for skew to reduce "
            f"(held {held_seconds:.1f} s)"
        )
        self.keyspace = keyspace
        self.shard = shard
