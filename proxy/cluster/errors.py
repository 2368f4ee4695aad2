"""Errors raised while managing local MariaDB shard instances."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """The local cluster could not be started, stopped or prepared."""


class MariaDBNotInstalled(ClusterError):
    """`mariadbd` or `mariadb-install-db` is missing from this machine."""


class ShardStartError(ClusterError):
    """One shard's `mariadbd` exited or never became ready; the message quotes its error log."""

    def __init__(self, keyspace: str, shard: str, message: str) -> None:
        self.keyspace = keyspace
        self.shard = shard
        super().__init__(f"shard {keyspace}/{shard}: {message}")


class PortInUse(ClusterError):
    """A port the cluster needs is already taken by another process."""


class SchemaError(ClusterError):
    """A statement of a keyspace's schema file failed on a shard."""
