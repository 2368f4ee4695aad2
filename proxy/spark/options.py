"""The options of the `shardgate` data source, parsed once on the driver."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

DEFAULT_PORT = 15306
DEFAULT_FETCH_SIZE = 10_000
DEFAULT_BATCH_SIZE = 500
DEFAULT_MAX_MESSAGES_PER_TRIGGER = 10_000


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


def qualified_table(value: str, what: str = "table") -> tuple[str, str]:
    """`keyspace.table` -> (keyspace, table)."""
    keyspace, dot, table = value.strip().strip("`").partition(".")
    if not dot or not keyspace or not table:
        raise OptionError(f"{what} must be keyspace.{what}, got {value!r}")
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
    startingPosition  streaming: "current" (default), "beginning" or a VGTID JSON; with topic:
                 "earliest" (batch default), "latest" (stream default) or a message id (read
                 after it); "beginning"/"current" are accepted too
    topic        keyspace.topic: read a topic (batch), follow it (streaming) or publish to it
                 (append), instead of a table or the change stream (proxy.spark.topic_reader)
    startingTimestamp with topic: the first publish time to read, in ms (wins over startingPosition)
    maxMessagesPerTrigger  with topic: messages per micro-batch at most (default 10,000)
    """

    proxy: ProxyAddress
    table: tuple[str, str] | None
    stream_tables: tuple[str, ...]
    config: Path | None
    fetch_size: int
    batch_size: int
    starting_position: str
    topic: tuple[str, str] | None = None
    starting_position_given: bool = False
    starting_timestamp: int | None = None
    max_messages_per_trigger: int = DEFAULT_MAX_MESSAGES_PER_TRIGGER

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        # Spark hands options over case-insensitively; look them up in lower case.
        lowered = {k.lower(): v for k, v in options.items()}
        table = lowered.get("table") or lowered.get("dbtable")
        stream_tables = tuple(
            t.strip() for t in (lowered.get("tables") or "").split(",") if t.strip()
        )
        config = lowered.get("config")
        topic = qualified_table(lowered["topic"], "topic") if lowered.get("topic") else None
        if topic is not None and (table or stream_tables):
            raise OptionError("give the topic option or the table/tables option, not both")
        return cls(
            proxy=ProxyAddress.parse(lowered.get("url", f"mysql://127.0.0.1:{DEFAULT_PORT}")),
            table=qualified_table(table) if table else None,
            stream_tables=stream_tables,
            config=Path(config) if config else None,
            fetch_size=_positive(lowered, "fetchsize", DEFAULT_FETCH_SIZE),
            batch_size=_positive(lowered, "batchsize", DEFAULT_BATCH_SIZE),
            starting_position=lowered.get("startingposition", "current"),
            topic=topic,
            starting_position_given="startingposition" in lowered,
            starting_timestamp=_positive(lowered, "startingtimestamp", 0) or None,
            max_messages_per_trigger=_positive(lowered, "maxmessagespertrigger", DEFAULT_MAX_MESSAGES_PER_TRIGGER),
        )

    def require_topic(self) -> tuple[str, str]:
        if self.topic is None:
            raise OptionError("the topic option (keyspace.topic) is required")
        return self.topic

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
