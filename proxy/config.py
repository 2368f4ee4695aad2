"""Cluster configuration: the YAML file that `shardgate up` / `shardgate serve` read.

The names in the file are an interface users script against (see issue 2)::

    listen: {host: 127.0.0.1, port: 15306, tls: {cert: ..., key: ...}}
    users: [{user: root, password: ""}]
    local: {data_dir: .shardgate/data, base_port: 17100}  # shard_transport: unix (default) | tcp
    routing_rules: {rules: []}
    schema_tracking: {refresh_seconds: 60}  # re-read the shards' columns this often; 0: off
    http: {host: 127.0.0.1, port: 15001}    # optional HTTP listener: /metrics, /debug/*, topics' REST API
    topics: {poll_seconds: 0.5, purge_seconds: 1, max_poll_bytes: 4194304}  # optional topic settings (proxy/topics)
    transaction_mode: multi             # sessions' default: single | multi | twopc (Vitess's names)
    twopc: {resolver_interval_seconds: 1}  # how often each proxy looks for in-doubt 2PC transactions
    vschema_store: {keyspace: commerce, shard: "-80", poll_seconds: 0.25}  # the live vschema's shard (default: first)
    transaction_timeout: 30             # seconds a session may idle inside a transaction; 0/absent: no limit
    resharding: {write_hold_seconds: 10, copy_chunk_rows: 2000}  # a write waits out a switch this long;
                                        # rows per chunk of a Reshard copy (lastpk saved after each)
    vschema_ddl_authorized_users: "%"   # who may run ALTER VSCHEMA / CREATE QUEUE: "%", "a,b" or [a, b]; absent: nobody
    keyspaces:
      commerce:
        vschema: commerce_vschema.json
        schema: commerce_schema.sql
        shards: ["-80", "80-"]           # local shards, or {shard: "mysql://user:pw@host:port/db"}
                                         # or {shard: {dsn: "mysql://...", socket: /run/mysqld/mysqld.sock}}
        reshard_targets: {"-40": "mysql://..."}  # dsn shards only: where `shardgate reshard create` puts new shards

Every relative path is resolved against the directory of the YAML file, so the same file works
from any working directory. Errors are raised as :class:`ConfigError` naming the file and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

DEFAULT_LISTEN_HOST = "127.0.0.1"
DEFAULT_LISTEN_PORT = 15306
DEFAULT_MYSQL_PORT = 3306
SHARD_TRANSPORTS = ("unix", "tcp")

# Shard names become directory names and appear in `USE ks:shard`; key ranges ("-80", "80-",
# "40-80"), "0" and "-" are the Vitess conventions, anything else is rejected early.
_SHARD_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_KEYSPACE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """An invalid cluster configuration; the message names the file and the offending field."""

    def __init__(self, path: Path | str, field_name: str, message: str) -> None:
        self.path = Path(path)
        self.field = field_name
        self.reason = message
        super().__init__(f"{self.path}: {field_name}: {message}")


@dataclass(frozen=True, slots=True)
class ShardEndpoint:
    """Where one shard's MySQL/MariaDB server listens and how to log in to it."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    database: str
    # The server's Unix socket when it runs on this machine: the proxy's own connections use it
    # (pools.ShardAddress.socket, falling back to host:port when it does not answer); anything
    # that must reach the shard over the network (Spark executors, clients) keeps host:port.
    socket: str | None = None

    @property
    def dsn(self) -> str:
        """The endpoint as a `mysql://` URL (password omitted)."""
        return f"mysql://{self.user}@{self.host}:{self.port}/{self.database}"


@dataclass(frozen=True, slots=True)
class TlsConfig:
    cert: Path
    key: Path


@dataclass(frozen=True, slots=True)
class ListenConfig:
    host: str
    port: int
    tls: TlsConfig | None = None


@dataclass(frozen=True, slots=True)
class UserConfig:
    user: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class LocalConfig:
    """Managed MariaDB instances: one per local shard, on `base_port + i`."""

    data_dir: Path
    base_port: int
    # How the proxy reaches the shards it starts: "unix" (their socket in the data dir) or "tcp".
    shard_transport: str = "unix"


@dataclass(frozen=True, slots=True)
class KeyspaceConfig:
    name: str
    vschema: dict[str, Any]
    vschema_path: Path
    schema_path: Path | None
    # shard name -> endpoint; None marks a local shard whose endpoint the launcher assigns.
    shards: dict[str, ShardEndpoint | None]
    # Servers for the new shards of a reshard (proxy/resharding), by shard name; a cluster with
    # local shards starts new local instances instead.
    reshard_targets: dict[str, ShardEndpoint] = field(default_factory=dict)

    @property
    def sharded(self) -> bool:
        return bool(self.vschema.get("sharded", False))

    @property
    def local_shards(self) -> list[str]:
        return [name for name, endpoint in self.shards.items() if endpoint is None]


@dataclass(frozen=True, slots=True)
class MessagingConfig:
    # Follow message tables' binlogs so rows written around the proxy are delivered at
    # once (otherwise at the next poll); costs throughput, as every insert is decoded.
    binlog_watch: bool = True


@dataclass(frozen=True, slots=True)
class SchemaTrackingConfig:
    # Re-read every keyspace's columns this often (catches DDL made directly on the shards);
    # 0 turns the timer off (DDL through the proxy is still seen at once).
    refresh_seconds: float = 60.0


TRANSACTION_MODES = ("single", "multi", "twopc")


@dataclass(frozen=True, slots=True)
class TwoPCConfig:
    # Every proxy process looks for in-doubt distributed transactions (prepared on a shard, coordinator
    # gone) this often, and once at start-up.
    resolver_interval_seconds: float = 1.0


@dataclass(frozen=True, slots=True)
class HttpConfig:
    # The proxy's HTTP listener (proxy/http_listener.py: /metrics and /debug/* pages, topics' REST
    # API); beyond loopback it requires HTTP Basic authentication with the users above, as the
    # MySQL port requires passwords.
    host: str = DEFAULT_LISTEN_HOST
    port: int = 15001


@dataclass(frozen=True, slots=True)
class TopicsConfig:
    # Ordered topics (proxy/topics): how often each topic's sequencer probes for rows committed
    # around this process (other proxies, direct inserts), faster while STREAM followers wait;
    # the TTL purge interval; the registry refresh; the lifetime of REST-stored payloads.
    poll_seconds: float = 0.5
    follow_poll_seconds: float = 0.05
    purge_seconds: float = 1.0
    refresh_seconds: float = 5.0
    pending_max_age_seconds: int = 3600
    # Payload bytes one read hands out at most (a REST/client poll, a STREAM follower's batch),
    # at least one message whatever its size (CDAP's messaging.max.poll.size, in bytes).
    max_poll_bytes: int = 4 * 1024 * 1024  # proxy.topics.schema.DEFAULT_MAX_POLL_BYTES
    # An autocommit publish (or REST publish without a pointer) of at least this many messages
    # takes its ids in the write (proxy.topics.direct); smaller ones keep NULL ids and a pass.
    # Measured (BENCHMARKS.md, "topicdirect"; 4 publishers, one topic, A/B): 100 messages per
    # INSERT, shard CPU 42-44 -> 27-29 us per message, visible at the OK; 1 message per INSERT
    # (all direct, first version), shard CPU 160-190 -> 350-380 us and 0.30-0.35 -> 0.17-0.23 of
    # raw: the mark's lock and UPDATE per publish, against a pass's ~450 us shared by many. Per
    # publish the script costs the shard ~200 us more, per message it saves ~15-34 us. With
    # concurrent direct publishes batched (proxy.topics.batch), 1 message per INSERT all direct
    # still lost: 0.19-0.20 of raw, proxy 285-355 / shard 360-400 us per message, against the
    # deferred path's 0.32-0.40, 105-130 / 155-215 us (BENCHMARKS.md, "topicbatch").
    direct_min_rows: int = 8


@dataclass(frozen=True, slots=True)
class VSchemaStoreConfig:
    # Where the cluster's live vschema is kept (proxy/live_vschema.py): a shard of the cluster
    # (None: the first shard of the first keyspace), and how often every proxy polls it for changes.
    keyspace: str | None = None
    shard: str | None = None
    poll_seconds: float = 0.25


@dataclass(frozen=True, slots=True)
class ReshardingConfig:
    # A write refused by a source shard at a resharding switch (denied writes) is held this
    # long for the topology to change, then run on the new shards (past it: an error).
    write_hold_seconds: float = 10.0
    # Rows per chunk of a Reshard workflow's table copy; its last primary key is saved after each
    # chunk, so a crash repeats at most one chunk (Vitess's vreplication_copy_phase_max_rows).
    copy_chunk_rows: int = 2000


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    path: Path
    listen: ListenConfig
    users: list[UserConfig]
    local: LocalConfig | None
    routing_rules: dict[str, Any]
    keyspaces: dict[str, KeyspaceConfig]
    messaging: MessagingConfig = field(default_factory=MessagingConfig)
    schema_tracking: SchemaTrackingConfig = field(default_factory=SchemaTrackingConfig)
    # The sessions' default transaction_mode (SET transaction_mode changes a session's).
    transaction_mode: str = "multi"
    twopc: TwoPCConfig = field(default_factory=TwoPCConfig)
    http: HttpConfig | None = None
    topics: TopicsConfig = field(default_factory=TopicsConfig)
    vschema_store: VSchemaStoreConfig = field(default_factory=VSchemaStoreConfig)
    # Seconds a session may stay idle inside a transaction before it is rolled back
    # (proxy.timeouts); 0: no limit.
    transaction_timeout: float = 0.0
    resharding: ReshardingConfig = field(default_factory=ReshardingConfig)
    # Vitess's --vschema_ddl_authorized_users: the users who may change the vschema through
    # SQL (ALTER VSCHEMA, CREATE QUEUE); None: every user ('%'). Default, as Vitess: nobody.
    vschema_ddl_authorized_users: frozenset[str] | None = frozenset()

    @property
    def has_local_shards(self) -> bool:
        return any(ks.local_shards for ks in self.keyspaces.values())

    @property
    def vschema_store_location(self) -> tuple[str, str]:
        """(keyspace, shard) holding the live vschema table."""
        keyspace = self.vschema_store.keyspace or next(iter(self.keyspaces))
        shard = self.vschema_store.shard or next(iter(self.keyspaces[keyspace].shards))
        return keyspace, shard


def load_config(
    path: str | Path,
    *,
    data_dir: str | Path | None = None,
    base_port: int | None = None,
    listen_host: str | None = None,
    listen_port: int | None = None,
) -> ClusterConfig:
    """Read and validate a cluster YAML file.

    The keyword arguments override the file's values (tests use them so they never collide with a
    running `make run`); a relative `data_dir` override is taken relative to the working directory.
    """
    path = Path(path).resolve()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(path, "<file>", f"cannot read: {e.strerror or e}") from e
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(path, "<file>", f"invalid YAML: {e}") from e
    if raw is None:
        raw = {}
    reader = _Reader(path)
    doc = reader.mapping(raw, "<top level>")
    reader.no_unknown_keys(
        doc,
        "<top level>",
        {
            "listen", "users", "local", "routing_rules", "keyspaces", "messaging", "schema_tracking",
            "transaction_mode", "twopc", "http", "topics", "vschema_store", "transaction_timeout",
            "resharding",
            "vschema_ddl_authorized_users",
        },
    )

    listen = reader.listen(doc.get("listen"))
    if listen_host is not None or listen_port is not None:
        listen = ListenConfig(
            host=listen_host if listen_host is not None else listen.host,
            port=reader.port(listen_port, "listen.port")
            if listen_port is not None
            else listen.port,
            tls=listen.tls,
        )
    users = reader.users(doc.get("users"))
    local = reader.local(doc.get("local"))
    if data_dir is not None or base_port is not None:
        if local is None and (data_dir is None or base_port is None):
            raise ConfigError(
                path, "local", "is missing; overriding data_dir/base_port needs both values"
            )
        local = LocalConfig(
            data_dir=Path(data_dir).resolve() if data_dir is not None else local.data_dir,  # type: ignore[union-attr]
            base_port=(
                reader.port(base_port, "local.base_port")
                if base_port is not None
                else local.base_port  # type: ignore[union-attr]
            ),
            shard_transport=local.shard_transport if local is not None else "unix",
        )
    routing_rules = reader.routing_rules(doc.get("routing_rules"))
    messaging = reader.messaging(doc.get("messaging"))
    schema_tracking = reader.schema_tracking(doc.get("schema_tracking"))
    transaction_mode = reader.transaction_mode(doc.get("transaction_mode"))
    twopc = reader.twopc(doc.get("twopc"))
    keyspaces = reader.keyspaces(doc.get("keyspaces"))
    http = reader.http(doc.get("http"))
    topics = reader.topics(doc.get("topics"))
    vschema_store = reader.vschema_store(doc.get("vschema_store"), keyspaces)
    transaction_timeout = reader.transaction_timeout(doc.get("transaction_timeout"))
    resharding = reader.resharding(doc.get("resharding"))
    vschema_ddl_authorized_users = reader.authorized_users(
        doc.get("vschema_ddl_authorized_users"), "vschema_ddl_authorized_users"
    )

    config = ClusterConfig(
        path=path,
        listen=listen,
        users=users,
        local=local,
        routing_rules=routing_rules,
        messaging=messaging,
        schema_tracking=schema_tracking,
        keyspaces=keyspaces,
        transaction_mode=transaction_mode,
        twopc=twopc,
        http=http,
        topics=topics,
        vschema_store=vschema_store,
        transaction_timeout=transaction_timeout,
        resharding=resharding,
        vschema_ddl_authorized_users=vschema_ddl_authorized_users,
    )
    if config.has_local_shards and local is None:
        first = next(ks for ks in keyspaces.values() if ks.local_shards)
        raise ConfigError(
            path,
            "local",
            f"is required: keyspace {first.name!r} lists local shards "
            "(give `local: {data_dir, base_port}` or a dsn per shard)",
        )
    if local is not None:
        count = sum(len(ks.local_shards) for ks in keyspaces.values())
        if local.base_port + count - 1 > 65535:
            raise ConfigError(
                path, "local.base_port", f"{local.base_port} + {count} shards exceeds port 65535"
            )
    return config


def parse_dsn(dsn: str, *, default_database: str) -> ShardEndpoint:
    """Parse `mysql://user:password@host:port/database` (user and password percent-decoded)."""
    parts = urlsplit(dsn)
    if parts.scheme not in ("mysql", "mariadb"):
        raise ValueError(f"expected a mysql:// URL, got scheme {parts.scheme!r}")
    if not parts.hostname:
        raise ValueError("the URL has no host")
    try:
        port = parts.port or DEFAULT_MYSQL_PORT
    except ValueError as e:
        raise ValueError(f"invalid port: {e}") from e
    database = unquote(parts.path.lstrip("/")) or default_database
    if "/" in database:
        raise ValueError(f"invalid database name {database!r}")
    return ShardEndpoint(
        host=parts.hostname,
        port=port,
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        database=database,
    )


def load_structured_file(path: Path) -> Any:
    """Load a JSON or YAML file (YAML is a superset of JSON, but JSON errors read better)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        return json.loads(text)
    return yaml.safe_load(text)


class _Reader:
    """Field-by-field validation that knows the file name for error messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.base = path.parent

    def error(self, field_name: str, message: str) -> ConfigError:
        return ConfigError(self.path, field_name, message)

    def mapping(self, value: Any, field_name: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(field_name, f"expected a mapping, got {_kind(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.error(field_name, f"keys must be strings, got {key!r}")
        return value

    def no_unknown_keys(self, value: dict[str, Any], field_name: str, allowed: set[str]) -> None:
        unknown = sorted(set(value) - allowed)
        if unknown:
            where = field_name if field_name != "<top level>" else ""
            name = f"{where}.{unknown[0]}" if where else unknown[0]
            raise self.error(name, f"unknown field (expected one of: {', '.join(sorted(allowed))})")

    def string(self, value: Any, field_name: str, *, allow_empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.error(field_name, f"expected a string, got {_kind(value)}")
        if not allow_empty and not value:
            raise self.error(field_name, "must not be empty")
        return value

    def port(self, value: Any, field_name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(field_name, f"expected a port number, got {_kind(value)}")
        if not 1 <= value <= 65535:
            raise self.error(field_name, f"port {value} is outside 1..65535")
        return value

    def file(self, value: Any, field_name: str) -> Path:
        resolved = (self.base / self.string(value, field_name)).resolve()
        if not resolved.is_file():
            raise self.error(field_name, f"file not found: {resolved}")
        return resolved

    def listen(self, value: Any) -> ListenConfig:
        if value is None:
            return ListenConfig(DEFAULT_LISTEN_HOST, DEFAULT_LISTEN_PORT)
        doc = self.mapping(value, "listen")
        self.no_unknown_keys(doc, "listen", {"host", "port", "tls"})
        host = self.string(doc.get("host", DEFAULT_LISTEN_HOST), "listen.host")
        port = self.port(doc.get("port", DEFAULT_LISTEN_PORT), "listen.port")
        tls = None
        if doc.get("tls") is not None:
            tls_doc = self.mapping(doc["tls"], "listen.tls")
            self.no_unknown_keys(tls_doc, "listen.tls", {"cert", "key"})
            for required in ("cert", "key"):
                if required not in tls_doc:
                    raise self.error(f"listen.tls.{required}", "is required")
            tls = TlsConfig(
                cert=self.file(tls_doc["cert"], "listen.tls.cert"),
                key=self.file(tls_doc["key"], "listen.tls.key"),
            )
        return ListenConfig(host=host, port=port, tls=tls)

    def users(self, value: Any) -> list[UserConfig]:
        if value is None:
            raise self.error("users", "is required (a list of {user, password})")
        if not isinstance(value, list) or not value:
            raise self.error("users", f"expected a non-empty list, got {_kind(value)}")
        users: list[UserConfig] = []
        seen: set[str] = set()
        for i, item in enumerate(value):
            where = f"users[{i}]"
            doc = self.mapping(item, where)
            self.no_unknown_keys(doc, where, {"user", "password"})
            if "user" not in doc:
                raise self.error(f"{where}.user", "is required")
            name = self.string(doc["user"], f"{where}.user")
            password = doc.get("password", "")
            if password is None:
                password = ""
            password = self.string(password, f"{where}.password", allow_empty=True)
            if name in seen:
                raise self.error(f"{where}.user", f"duplicate user {name!r}")
            seen.add(name)
            users.append(UserConfig(user=name, password=password))
        return users

    def local(self, value: Any) -> LocalConfig | None:
        if value is None:
            return None
        doc = self.mapping(value, "local")
        self.no_unknown_keys(doc, "local", {"data_dir", "base_port", "shard_transport"})
        for required in ("data_dir", "base_port"):
            if required not in doc:
                raise self.error(f"local.{required}", "is required")
        data_dir = (self.base / self.string(doc["data_dir"], "local.data_dir")).resolve()
        transport = self.string(doc.get("shard_transport", "unix"), "local.shard_transport")
        if transport not in SHARD_TRANSPORTS:
            raise self.error(
                "local.shard_transport",
                f"expected one of {', '.join(SHARD_TRANSPORTS)}, got {transport!r}",
            )
        return LocalConfig(
            data_dir=data_dir,
            base_port=self.port(doc["base_port"], "local.base_port"),
            shard_transport=transport,
        )

    def messaging(self, value: Any) -> MessagingConfig:
        if value is None:
            return MessagingConfig()
        doc = self.mapping(value, "messaging")
        self.no_unknown_keys(doc, "messaging", {"binlog_watch"})
        watch = doc.get("binlog_watch", True)
        if not isinstance(watch, bool):
            raise self.error("messaging.binlog_watch", "must be true or false")
        return MessagingConfig(binlog_watch=watch)

    def schema_tracking(self, value: Any) -> SchemaTrackingConfig:
        if value is None:
            return SchemaTrackingConfig()
        doc = self.mapping(value, "schema_tracking")
        self.no_unknown_keys(doc, "schema_tracking", {"refresh_seconds"})
        seconds = doc.get("refresh_seconds", SchemaTrackingConfig().refresh_seconds)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds != seconds:
            raise self.error("schema_tracking.refresh_seconds", f"expected a number of seconds, got {_kind(seconds)}")
        if seconds < 0:
            raise self.error("schema_tracking.refresh_seconds", f"must be 0 (off) or more, got {seconds}")
        return SchemaTrackingConfig(refresh_seconds=float(seconds))

    def authorized_users(self, value: Any, where: str) -> frozenset[str] | None:
        """Vitess's user-list flags: ``"%"`` (everyone: None), ``"a, b"`` or a list of
        names; absent or empty: nobody."""
        if value is None:
            return frozenset()
        if isinstance(value, str):
            names = [n.strip() for n in value.split(",")]
        elif isinstance(value, list) and all(isinstance(n, str) for n in value):
            names = [n.strip() for n in value]
        else:
            raise self.error(where, f"expected \"%\", a comma-separated string or a list of user names, got {_kind(value)}")
        if "%" in names:
            return None
        return frozenset(n for n in names if n)

    def transaction_mode(self, value: Any) -> str:
        if value is None:
            return "multi"
        mode = self.string(value, "transaction_mode").lower()
        if mode not in TRANSACTION_MODES:
            raise self.error("transaction_mode", f"expected one of {', '.join(TRANSACTION_MODES)}, got {value!r}")
        return mode

    def transaction_timeout(self, value: Any) -> float:
        if value is None:
            return 0.0
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
            raise self.error("transaction_timeout", f"expected a number of seconds (0: no limit), got {_kind(value)}")
        return float(value)

    def resharding(self, value: Any) -> ReshardingConfig:
        if value is None:
            return ReshardingConfig()
        doc = self.mapping(value, "resharding")
        self.no_unknown_keys(doc, "resharding", {"write_hold_seconds", "copy_chunk_rows"})
        defaults = ReshardingConfig()  # slots: the class has no default values to read
        seconds = doc.get("write_hold_seconds", defaults.write_hold_seconds)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds != seconds or seconds < 0:
            raise self.error("resharding.write_hold_seconds", f"expected a number of seconds (0: no hold), got {_kind(seconds)}")
        rows = doc.get("copy_chunk_rows", defaults.copy_chunk_rows)
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise self.error("resharding.copy_chunk_rows", f"expected a positive number of rows, got {_kind(rows)}")
        return ReshardingConfig(write_hold_seconds=float(seconds), copy_chunk_rows=rows)

    def twopc(self, value: Any) -> TwoPCConfig:
        if value is None:
            return TwoPCConfig()
        doc = self.mapping(value, "twopc")
        self.no_unknown_keys(doc, "twopc", {"resolver_interval_seconds"})
        seconds = doc.get("resolver_interval_seconds", TwoPCConfig().resolver_interval_seconds)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise self.error("twopc.resolver_interval_seconds", f"expected a number of seconds > 0, got {seconds!r}")
        return TwoPCConfig(resolver_interval_seconds=float(seconds))

    def http(self, value: Any) -> HttpConfig | None:
        if value is None:
            return None
        doc = self.mapping(value, "http")
        self.no_unknown_keys(doc, "http", {"host", "port"})
        return HttpConfig(
            host=self.string(doc.get("host", HttpConfig().host), "http.host"),
            port=self.port(doc.get("port", HttpConfig().port), "http.port"),
        )

    def topics(self, value: Any) -> TopicsConfig:
        if value is None:
            return TopicsConfig()
        doc = self.mapping(value, "topics")
        fields = {"poll_seconds", "follow_poll_seconds", "purge_seconds", "refresh_seconds", "pending_max_age_seconds"}
        self.no_unknown_keys(doc, "topics", fields | {"max_poll_bytes", "direct_min_rows"})
        values: dict[str, Any] = {}
        if "direct_min_rows" in doc:
            v = doc["direct_min_rows"]
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise self.error("topics.direct_min_rows", f"expected a positive number of messages, got {_kind(v)}")
            values["direct_min_rows"] = v
        if "max_poll_bytes" in doc:
            v = doc["max_poll_bytes"]
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise self.error("topics.max_poll_bytes", f"expected a positive number of bytes, got {_kind(v)}")
            values["max_poll_bytes"] = v
        for name in sorted(fields & set(doc)):
            v = doc[name]
            if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v <= 0:
                raise self.error(f"topics.{name}", f"expected a positive number of seconds, got {_kind(v)}")
            values[name] = int(v) if name == "pending_max_age_seconds" else float(v)
        return TopicsConfig(**values)

    def vschema_store(self, value: Any, keyspaces: dict[str, KeyspaceConfig]) -> VSchemaStoreConfig:
        if value is None:
            return VSchemaStoreConfig()
        doc = self.mapping(value, "vschema_store")
        self.no_unknown_keys(doc, "vschema_store", {"keyspace", "shard", "poll_seconds"})
        keyspace = self.string(doc["keyspace"], "vschema_store.keyspace") if "keyspace" in doc else None
        if keyspace is not None and keyspace not in keyspaces:
            raise self.error("vschema_store.keyspace", f"unknown keyspace {keyspace!r}")
        shard = self.string(str(doc["shard"]), "vschema_store.shard") if "shard" in doc else None
        shards = keyspaces[keyspace or next(iter(keyspaces))].shards
        if shard is not None and shard not in shards:
            raise self.error("vschema_store.shard", f"no shard {shard!r} in keyspace {keyspace or next(iter(keyspaces))!r}")
        seconds = doc.get("poll_seconds", VSchemaStoreConfig().poll_seconds)  # slots: no class default
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds != seconds or seconds <= 0:
            raise self.error("vschema_store.poll_seconds", f"expected a positive number of seconds, got {_kind(seconds)}")
        return VSchemaStoreConfig(keyspace=keyspace, shard=shard, poll_seconds=float(seconds))

    def routing_rules(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {"rules": []}
        if isinstance(value, str):
            # A path to a RoutingRules JSON/YAML file, like the keyspace vschema files.
            rules_path = self.file(value, "routing_rules")
            value = self._structured(rules_path, "routing_rules")
        doc = self.mapping(value, "routing_rules")
        rules = doc.get("rules", [])
        if not isinstance(rules, list):
            raise self.error("routing_rules.rules", f"expected a list, got {_kind(rules)}")
        for i, rule in enumerate(rules):
            rule_doc = self.mapping(rule, f"routing_rules.rules[{i}]")
            if not isinstance(rule_doc.get("from_table"), str):
                raise self.error(f"routing_rules.rules[{i}].from_table", "is required (a string)")
            to_tables = rule_doc.get("to_tables")
            if not isinstance(to_tables, list) or not all(isinstance(t, str) for t in to_tables):
                raise self.error(
                    f"routing_rules.rules[{i}].to_tables", "is required (a list of strings)"
                )
        return {**doc, "rules": rules}

    def keyspaces(self, value: Any) -> dict[str, KeyspaceConfig]:
        if value is None:
            raise self.error("keyspaces", "is required")
        doc = self.mapping(value, "keyspaces")
        if not doc:
            raise self.error("keyspaces", "must name at least one keyspace")
        return {name: self.keyspace(name, item) for name, item in doc.items()}

    def keyspace(self, name: str, value: Any) -> KeyspaceConfig:
        where = f"keyspaces.{name}"
        if not _KEYSPACE_NAME.match(name):
            raise self.error(where, "keyspace names must be identifiers ([A-Za-z_][A-Za-z0-9_]*)")
        doc = self.mapping(value, where)
        self.no_unknown_keys(doc, where, {"vschema", "schema", "shards", "reshard_targets"})
        if "vschema" not in doc:
            raise self.error(f"{where}.vschema", "is required")
        vschema_path = self.file(doc["vschema"], f"{where}.vschema")
        vschema = self.mapping(
            self._structured(vschema_path, f"{where}.vschema"), f"{where}.vschema"
        )
        sharded = vschema.get("sharded", False)
        if not isinstance(sharded, bool):
            raise self.error(
                f"{where}.vschema", f"`sharded` must be true or false, got {sharded!r}"
            )
        schema_path = None
        if doc.get("schema") is not None:
            schema_path = self.file(doc["schema"], f"{where}.schema")
        shards = self.shards(name, doc.get("shards"), f"{where}.shards")
        if not sharded and len(shards) != 1:
            raise self.error(
                f"{where}.shards",
                f"an unsharded keyspace has exactly one shard, got {len(shards)}",
            )
        reshard_targets: dict[str, ShardEndpoint] = {}
        if doc.get("reshard_targets") is not None:
            targets_where = f"{where}.reshard_targets"
            if not isinstance(doc["reshard_targets"], dict):
                raise self.error(targets_where, f"expected a mapping shard -> dsn, got {_kind(doc['reshard_targets'])}")
            for shard, endpoint in self.shards(name, doc["reshard_targets"], targets_where).items():
                if endpoint is None:
                    raise self.error(f"{targets_where}.{shard}", "needs a dsn")
                reshard_targets[shard] = endpoint
        return KeyspaceConfig(
            name=name,
            vschema=vschema,
            vschema_path=vschema_path,
            schema_path=schema_path,
            shards=shards,
            reshard_targets=reshard_targets,
        )

    def shards(self, keyspace: str, value: Any, where: str) -> dict[str, ShardEndpoint | None]:
        if value is None:
            raise self.error(where, "is required (a list of shard names or a mapping shard -> dsn)")
        shards: dict[str, ShardEndpoint | None] = {}
        if isinstance(value, list):
            items: list[tuple[Any, Any]] = [(item, None) for item in value]
        elif isinstance(value, dict):
            items = list(value.items())
        else:
            raise self.error(where, f"expected a list or a mapping, got {_kind(value)}")
        if not items:
            raise self.error(where, "must name at least one shard")
        for i, (shard, dsn) in enumerate(items):
            if not isinstance(shard, str):
                # YAML reads a bare `0` as an integer; shard names are strings.
                if isinstance(shard, int) and not isinstance(shard, bool):
                    shard = str(shard)
                else:
                    raise self.error(f"{where}[{i}]", f"expected a shard name, got {_kind(shard)}")
            if not _SHARD_NAME.match(shard):
                raise self.error(
                    f"{where}[{i}]",
                    f"invalid shard name {shard!r} (use key ranges like -80, 80-, 0)",
                )
            if shard in shards:
                raise self.error(f"{where}[{i}]", f"duplicate shard {shard!r}")
            if dsn is None:
                shards[shard] = None
                continue
            dsn_field = f"{where}.{shard}"
            socket: str | None = None
            if isinstance(dsn, dict):  # {dsn: "mysql://...", socket: /path/to/mysqld.sock}
                entry = self.mapping(dsn, dsn_field)
                self.no_unknown_keys(entry, dsn_field, {"dsn", "socket"})
                if "dsn" not in entry:
                    raise self.error(f"{dsn_field}.dsn", "is required")
                if entry.get("socket") is not None:
                    socket = self.string(entry["socket"], f"{dsn_field}.socket")
                    if not socket.startswith("/"):
                        raise self.error(
                            f"{dsn_field}.socket", f"must be an absolute path, got {socket!r}"
                        )
                dsn = entry["dsn"]
                dsn_field = f"{dsn_field}.dsn"
            try:
                endpoint = parse_dsn(self.string(dsn, dsn_field), default_database=keyspace)
            except ValueError as e:
                if isinstance(e, ConfigError):
                    raise
                raise self.error(dsn_field, f"invalid dsn: {e}") from e
            shards[shard] = replace(endpoint, socket=socket) if socket is not None else endpoint
        return shards

    def _structured(self, path: Path, field_name: str) -> Any:
        try:
            return load_structured_file(path)
        except (json.JSONDecodeError, yaml.YAMLError) as e:
            raise self.error(field_name, f"cannot parse {path.name}: {e}") from e
        except OSError as e:
            raise self.error(field_name, f"cannot read {path}: {e.strerror or e}") from e


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}"[:80]
