"""The options of the `shardgate` data source, parsed once on the driver."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

DEFAULT_PORT = 15306
DEFAULT_FETCH_SIZE = 10_000
DEFAULT_BATCH_SIZE = 500


class OptionError(ValueError):
    """An option is missing or malformed."""


@dataclass(frozen=True)
class ProxyAddress:
    """Where the proxy listens and who to log in as (`mysql://user:password@host:port`)."""

    host: str
    port: int
    user: str
    password: str

    @classmethod
    def parse(cls, url: str) -> ProxyAddress:
        parts = urlsplit(url if "://" in url else f"mysql://{url}")
        if parts.scheme not in ("mysql", "shardgate"):
            raise OptionError(f"url must be mysql://host:port, got {url!r}")
        if parts.path not in ("", "/"):
            raise OptionError(f"url names no database (use the table option): {url!r}")
        return cls(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or DEFAULT_PORT,
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
        )


def qualified_table(value: str) -> tuple[str, str]:
    """`keyspace.table` -> (keyspace, table)."""
    keyspace, dot, table = value.strip().strip("`").partition(".")
    if not dot or not keyspace or not table:
        raise OptionError(f"table must be keyspace.table, got {value!r}")
    return keyspace.strip("`"), table.strip("`")


@dataclass(frozen=True)
class SourceOptions:
    """Options shared by batch reads, writes and streams.

    url          mysql://user:password@host:port of the proxy (default 127.0.0.1:15306, root)
    table        keyspace.table (batch read and write)
    tables       comma-separated keyspace.table filter (streaming)
    config       the cluster YAML the proxy runs with: gives the vschema (shard pruning and
                 write routing) and the shard endpoints (streaming); optional for batch
    fetchSize    rows per Arrow batch when reading
    batchSize    rows per INSERT when writing
    startingPosition  streaming: "current" (default), "beginning" or a VGTID JSON
    """

    proxy: ProxyAddress
    table: tuple[str, str] | None
    stream_tables: tuple[str, ...]
    config: Path | None
    fetch_size: int
    batch_size: int
    starting_position: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        # Spark hands options over case-insensitively; look them up in lower case.
        lowered = {k.lower(): v for k, v in options.items()}
        table = lowered.get("table") or lowered.get("dbtable")
        stream_tables = tuple(
            t.strip() for t in (lowered.get("tables") or "").split(",") if t.strip()
        )
        config = lowered.get("config")
        return cls(
            proxy=ProxyAddress.parse(lowered.get("url", f"mysql://127.0.0.1:{DEFAULT_PORT}")),
            table=qualified_table(table) if table else None,
            stream_tables=stream_tables,
            config=Path(config) if config else None,
            fetch_size=_positive(lowered, "fetchsize", DEFAULT_FETCH_SIZE),
            batch_size=_positive(lowered, "batchsize", DEFAULT_BATCH_SIZE),
            starting_position=lowered.get("startingposition", "current"),
        )

    def require_table(self) -> tuple[str, str]:
        if self.table is None:
            raise OptionError("the table option (keyspace.table) is required")
        return self.table


def _positive(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"{name} must be a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"{name} must be a positive integer, got {raw!r}")
    return value
