"""The proxy process: shared state (vschema, shard pools, plan cache) and the
listening socket(s).

One ``Proxy`` per process. ``serve`` can fork several worker processes that all
listen on the same port with SO_REUSEPORT, because one Python process tops out
near one core.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import ssl
import sys
import tempfile
from collections.abc import Iterable, Mapping
from hashlib import sha1
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mysql_mimic.auth import (
    AuthInfo,
    Forbidden,
    IdentityProvider,
    NativePasswordAuthPlugin,
    Success,
    User,
)
from mysql_mimic.server import MysqlServer

from proxy import twopc
from proxy.addresses import is_loopback
from proxy.connection import SERVER_CAPABILITIES, ProxyConnection
from proxy.engine.result import Result, is_numeric, local_result
from proxy.engine.sequence import SequenceAllocator
from proxy.errors import ER_NO_DB_ERROR, ER_UNKNOWN_ERROR, ProxyError
from proxy.http_listener import HttpListener, start_http_listener
from proxy.live_vschema import LiveVSchema
from proxy.messaging.dml import MessageDml, message_dml
from proxy.messaging.service import MessagingService
from proxy.observability import process_group
from proxy.observability.service import Observability
from proxy.pools import ShardAddress, ShardPools
from proxy.processlist import ProcessList
from proxy.schema_tracker import SchemaTracker
from proxy.session import Outcome, ProxySession
from proxy.tls_stream import TlsUpgradableStream
from proxy.topics.service import TopicService, TopicWrite
from proxy.worker_peers import MAX_WORKERS, WorkerSlot
from rewriter.sqltemplate import sql_literal

if TYPE_CHECKING:
    from proxy.config import ClusterConfig, ShardEndpoint
    from vschema.model import VSchema
    from vschema.tracked_schema import TrackedSchema

logger = logging.getLogger(__name__)

# Statement kinds whose result is read as a stream (rows flow as the shard sends them).
_STREAMED = {"select", "with", "show", "explain", "describe", "desc", "table", "values", "("}
_DDL = {"create", "drop", "alter", "truncate", "rename"}


class ProxyAuthPlugin(NativePasswordAuthPlugin):
    async def auth(self, auth_info: AuthInfo | None = None) -> Any:  # type: ignore[override]
        inner = super().auth(auth_info)
        decision = await inner.__anext__()
        while True:
            if isinstance(decision, Forbidden):
                user = auth_info.user.name if auth_info else "?"
                using = "YES" if auth_info and auth_info.data else "NO"
                yield Forbidden(f"Access denied for user '{user}'@'localhost' (using password: {using})")
                return
            if isinstance(decision, Success):
                yield decision
                return
            auth_info = yield decision
            decision = await inner.asend(auth_info)


class ConfigIdentityProvider(IdentityProvider):
    """Users from the cluster configuration (mysql_native_password)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.users = dict(users)
        self._plugin = ProxyAuthPlugin()

    def get_plugins(self) -> list[Any]:
        return [self._plugin]

    async def get_user(self, username: str) -> User | None:
        if username in self.users:
            pw = self.users[username]
            auth = sha1(sha1(pw.encode()).digest()).hexdigest() if pw else None
            return User(name=username, auth_string=auth, auth_plugin=ProxyAuthPlugin.name)
        # Unknown users fail exactly like a wrong password (MySQL's 1045), not 3162.
        return User(name=username, auth_string="00" * 20, auth_plugin=ProxyAuthPlugin.name)


class Proxy:
    """Everything the sessions of one process share."""

    def __init__(
        self,
        config: ClusterConfig,
        endpoints: Mapping[tuple[str, str], ShardEndpoint],
        pool_size: int = 32,
        worker: WorkerSlot | None = None,
    ) -> None:
        self.config = config
        # The client sessions (SHOW PROCESSLIST, KILL); a worker reaches its siblings' too.
        self.processlist = ProcessList(worker, config.transaction_timeout)
        self.endpoints = dict(endpoints)
        self.vschema: VSchema = self._build_vschema()
        addresses = [
            ShardAddress(ks, shard, e.host, e.port, e.user, e.password, e.database)
            for (ks, shard), e in sorted(self.endpoints.items())
        ]
        self.pools = ShardPools(addresses, maxsize=pool_size)
        # The cluster's vschema lives in the cluster (the files only seed it): read at start,
        # changed by ALTER VSCHEMA / CREATE QUEUE, followed from every proxy process.
        self.live_vschema = LiveVSchema(
            self, *config.vschema_store_location, poll_seconds=config.vschema_store.poll_seconds
        )
        self.sequences = SequenceAllocator()
        self.messaging = MessagingService(
            self.pools,
            {ks: self.shard_names(ks) for ks in config.keyspaces},
            watch_changes=config.messaging.binlog_watch,
            on_ddl=self.ddl_seen,
        )
        self.schema_tracker = SchemaTracker(
            self.pools,
            {ks: self.shard_names(ks) for ks in config.keyspaces},
            {key: e.database for key, e in self.endpoints.items()},
            refresh_seconds=config.schema_tracking.refresh_seconds,
        )
        self.topics = TopicService(self, config.topics)
        self.observability = Observability(self)
        self.http: HttpListener | None = None  # when config.http is set
        self._global_vars: dict[str, Any] = {}
        self.planner: Any = None
        self._try_load_planner()

    def _build_vschema(self) -> VSchema:
        from vschema.loader import build_vschema

        return build_vschema(
            {name: (ks.vschema, list(ks.shards)) for name, ks in self.config.keyspaces.items()},
            self.config.routing_rules or None,
        )

    @property
    def schema(self) -> TrackedSchema:
        """The shards' tables and columns (schema tracking): immutable, replaced on change."""
        return self.schema_tracker.schema

    async def start(self) -> None:
        await self.live_vschema.start()
        await self.processlist.start()
        await self.schema_tracker.start()
        twopc.start_for_proxy(self)  # the in-doubt transaction resolver, from start-up on
        await self.messaging.start()
        await self.topics.start()
        self.observability.start()
        if self.config.http is not None:
            self.http = await start_http_listener(
                self.config.http, self.config.users, [self.topics.mount_http, self.observability.mount_http]
            )

    def _try_load_planner(self) -> None:
        from proxy.planning import Planner

        self.planner = Planner(self)

    # -- topology ------------------------------------------------------------------
    def shard_names(self, keyspace: str) -> list[str]:
        return list(self.config.keyspaces[keyspace].shards)

    def database_of(self, keyspace: str, shard: str) -> str:
        return self.endpoints[(keyspace, shard)].database

    def is_sharded(self, keyspace: str) -> bool:
        return bool(self.vschema.keyspaces[keyspace].sharded)

    def table_target(self, session: ProxySession, table: str, keyspace: str | None) -> tuple[str, str]:
        """Where to ask about a table's definition: its keyspace's first shard."""
        if session.target_shard is not None and keyspace in (None, session.keyspace):
            assert session.keyspace is not None
            return session.keyspace, session.target_shard
        t = self.vschema.find_table(table, keyspace or session.keyspace)
        ks = t.keyspace if isinstance(t.keyspace, str) else t.keyspace.name
        return ks, self.shard_names(ks)[0]

    # -- execution -------------------------------------------------------------------
    async def route(self, session: ProxySession, sql: str, kw: str, any_shard: bool = False) -> Outcome:
        topic_out = None if any_shard else await self.topics.route(session, sql, kw)
        if topic_out is not None:
            session.route = ("Topic", session.keyspace or "")
            return topic_out
        if session.target_shard is not None or any_shard:
            ks = session.keyspace or sorted(self.vschema.keyspaces)[0]
            shard = session.target_shard or self.shard_names(ks)[0]
            session.route = ("Targeted" if session.target_shard is not None else "AnyShard", ks)
            out = await self.send(session, ks, shard, sql, stream=kw in _STREAMED)
            if kw in _DDL:
                self.ddl_seen(ks)  # DDL on one shard: the tracker reads the keyspace again
            return out
        try:
            return await self.planner.run(session, sql, kw)
        except ProxyError as e:
            if e.code != 1146:
                raise
            retried = await self.topics.after_unknown_table(session, sql, kw)  # a topic made elsewhere?
            if retried is None:
                raise
            return retried

    async def send(self, session: ProxySession, keyspace: str, shard: str, sql: str, stream: bool) -> Outcome:
        """Send a statement verbatim to one shard."""
        if stream:
            return session.vcursor.stream_shard(keyspace, shard, sql)
        return await session.vcursor.execute_shard(keyspace, shard, sql)

    async def proxy_statement(self, session: ProxySession, sql: str) -> Outcome | None:
        if sql[:6].lower() == "stream":
            followed = await self.topics.stream(session, sql)
            if followed is not None:
                return followed
        return await self.planner.proxy_statement(session, sql)

    async def evaluate_setting(self, session: ProxySession, name: str, value_sql: str) -> str:
        """The value of ``SET name = <expression>`` as a SQL literal, evaluated on a shard
        connection carrying the session's current settings."""
        ks = session.keyspace or sorted(self.vschema.keyspaces)[0]
        shard = session.target_shard or self.shard_names(ks)[0]
        async with self.pools.get(ks, shard).connection() as sc:
            await sc.apply_settings(session.settings)
            await sc.execute(f"set @@session.{name} = {value_sql}")
            res = await sc.execute(f"select @@session.{name}")
            sc.broken = True  # its settings now differ from what it records; not worth tracking
        raw = res.rows[0][0]
        if raw is None:
            return "NULL"
        if is_numeric(res.fields[0]):
            return raw.decode()
        return sql_literal(raw.decode("utf-8", "surrogateescape"))

    async def global_variables(self, names: list[str]) -> dict[str, Any]:
        missing = [n for n in names if n.lower() not in self._global_vars]
        if missing:
            ks = sorted(self.vschema.keyspaces)[0]
            shard = self.shard_names(ks)[0]
            async with self.pools.get(ks, shard).connection() as sc:
                res = await sc.execute("select " + ", ".join(missing))
            from proxy.engine.result import decode_value

            for n, f, v in zip(missing, res.fields, res.rows[0], strict=True):
                self._global_vars[n.lower()] = decode_value(f, v)
        return {n.lower(): self._global_vars[n.lower()] for n in names}

    async def add_vschema_table(
        self, keyspace: str, table: str, entry: dict[str, Any], vindexes: dict[str, Any], change_sql: str
    ) -> None:
        """Add a table (and the vindexes it needs) to a keyspace's vschema, in the cluster's
        vschema store: every proxy process serving the cluster follows it within a second."""

        def add(doc: dict[str, Any]) -> dict[str, Any]:
            known = doc.setdefault("vindexes", {})
            known.update({k: v for k, v in vindexes.items() if k not in known})
            doc.setdefault("tables", {})[table] = entry
            return doc

        await self.live_vschema.change(keyspace, add, change_sql)

    async def schema_changed(self, keyspace: str, ddl: str) -> None:
        """DDL ran on every shard of ``keyspace``: refresh what depends on the schema
        (a changed message-table comment takes effect without a restart)."""
        logger.info("schema changed", extra={"keyspace": keyspace, "ddl": ddl[:200]})
        try:
            await self.schema_tracker.refresh(keyspace)
        except ProxyError as e:  # the DDL ran; the timer reads the keyspace again
            logger.warning("schema tracking: refresh after DDL failed", extra={"keyspace": keyspace, "error": e.message})
        await self.messaging.reload(keyspace)

    def ddl_seen(self, keyspace: str) -> None:
        """A DDL on ``keyspace`` not made through ``schema_changed`` (a binlog DDL event in a
        CDC stream this proxy runs, a shard-targeted DDL): re-read its schema in the background."""
        self.schema_tracker.ddl_seen(keyspace)

    def wrote(self, session: ProxySession, sql: str, reached: Iterable[tuple[str, str]] = ()) -> None:
        """A DML statement succeeded: tell messaging now, or at commit inside a transaction.
        ``reached``: the (keyspace, shard)s it was sent to (empty: unknown, every shard)."""
        topic = self.topics.written(session, sql)
        if topic is not None:
            if session.in_transaction:
                session.after_commit.append((topic.keyspace, topic))
            else:
                self.topics.committed(topic)
        dml = message_dml(sql)
        if dml is None:
            return
        ks = dml.keyspace or session.keyspace
        if ks is None:
            return
        if dml.kind == "insert":
            dml = dml.at_shards(s for k, s in reached if k == ks)
        if session.in_transaction:
            session.after_commit.append((ks, dml))
        else:
            self.committed(ks, dml)

    def committed(self, keyspace: str, dml: MessageDml | TopicWrite) -> None:
        if isinstance(dml, TopicWrite):
            self.topics.committed(dml)
        elif dml.kind == "insert":
            for shard in dml.shards or (None,):
                self.messaging.notify(keyspace, shard, dml.table)
        elif dml.kind == "ack":
            self.messaging.acked(keyspace, dml.table, dml.ids)

    async def show_messages(self, session: ProxySession) -> Result:
        return self.messaging.show_rows()

    async def close(self) -> None:
        await self.live_vschema.stop()
        if self.http is not None:
            await self.http.stop()
        await self.observability.stop()
        await self.topics.stop()
        await self.schema_tracker.close()
        await self.messaging.stop()
        await twopc.stop_for_proxy(self)
        await self.processlist.stop()
        await self.pools.close()


class ProxyServer(MysqlServer):
    """mysql-mimic's server with our connection class and session factory."""

    def __init__(self, proxy: Proxy, tls: ssl.SSLContext | None = None, **kw: Any) -> None:
        users = {u.user: u.password for u in proxy.config.users}
        super().__init__(
            session_factory=lambda: ProxySession(proxy),
            capabilities=SERVER_CAPABILITIES,
            identity_provider=ConfigIdentityProvider(users),
            ssl=tls,
            control=proxy.processlist,
            **kw,
        )
        self.proxy = proxy

    async def _client_connected_cb(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = TlsUpgradableStream(reader, writer)
        session = self.session_factory()
        connection = ProxyConnection(
            stream=stream,
            session=session,  # type: ignore[arg-type]
            control=self.control,
            server_capabilities=self.capabilities,
            identity_provider=self.identity_provider,
            ssl=self.ssl,
        )
        connection_id = await self.control.add(connection)
        connection.connection_id = connection_id
        try:
            await connection.start()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError) as e:
            logger.info("connection ended", extra={"connection_id": connection_id, "error": str(e)})
        finally:
            writer.close()
            await self.control.remove(connection_id)


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def check_listen_safety(host: str, users: list[Any]) -> None:
    """Refuse to expose a password-less proxy beyond loopback."""
    if not is_loopback(host) and not any(u.password for u in users):
        raise ProxyError(
            1045,
            f"refusing to listen on {host}: no user has a password (set one in 'users' or listen on 127.0.0.1)",
        )


async def serve_proxy(
    config: ClusterConfig,
    endpoints: Mapping[tuple[str, str], ShardEndpoint],
    *,
    workers: int = 1,
    ready: asyncio.Event | None = None,
    worker: WorkerSlot | None = None,
) -> None:
    """Serve until cancelled: in this process, or in ``workers`` child processes
    sharing the port through SO_REUSEPORT (``worker``: this process is one of those)."""
    check_listen_safety(config.listen.host, config.users)
    if workers > 1:
        await _serve_workers(config, endpoints, workers, ready)
        return
    proxy = Proxy(config, endpoints, worker=worker)
    await proxy.start()
    tls = tls_context(str(config.listen.tls.cert), str(config.listen.tls.key)) if config.listen.tls else None
    server = ProxyServer(proxy, tls=tls)
    await server.start_server(host=config.listen.host, port=config.listen.port, reuse_port=True)
    logger.info("proxy listening", extra={"host": config.listen.host, "port": config.listen.port, "pid": os.getpid()})
    if ready is not None:
        ready.set()
    try:
        await server.serve_forever()
    finally:
        server.close()
        await server.wait_closed()
        await proxy.close()


def endpoints_to_json(endpoints: Mapping[tuple[str, str], ShardEndpoint]) -> str:
    return json.dumps(
        [
            {"keyspace": ks, "shard": s, "host": e.host, "port": e.port, "user": e.user,
             "password": e.password, "database": e.database}
            for (ks, s), e in endpoints.items()
        ]
    )


def endpoints_from_json(text: str) -> dict[tuple[str, str], ShardEndpoint]:
    from proxy.config import ShardEndpoint

    return {
        (d["keyspace"], d["shard"]): ShardEndpoint(d["host"], d["port"], d["user"], d["password"], d["database"])
        for d in json.loads(text)
    }


async def _serve_workers(
    config: ClusterConfig,
    endpoints: Mapping[tuple[str, str], ShardEndpoint],
    workers: int,
    ready: asyncio.Event | None,
) -> None:
    if workers > MAX_WORKERS:
        raise ProxyError(ER_UNKNOWN_ERROR, f"at most {MAX_WORKERS} workers (connection ids carry the worker index)")
    env = dict(os.environ, SHARDGATE_ENDPOINTS=endpoints_to_json(endpoints))
    # The workers' sockets for each other's sessions (proxy.worker_peers); private to this user.
    run_dir = Path(tempfile.mkdtemp(prefix="shardgate-run-"))
    # The workers' metrics go to files in one directory, merged by whichever worker is
    # scraped (proxy.observability.process_group); it goes when they do.
    metrics_dir = process_group.create_metrics_dir()
    env[process_group.MULTIPROC_ENV] = str(metrics_dir)
    procs: list[asyncio.subprocess.Process] = []

    async def watch(p: asyncio.subprocess.Process) -> None:
        await p.wait()
        process_group.worker_exited(metrics_dir, p.pid)

    try:
        for index in range(workers):
            slot = WorkerSlot(index, run_dir)
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "proxy.cli", "worker", "-c", str(config.path),
                    "--port", str(config.listen.port), env={**env, **slot.environment()},
                )
            )
        if ready is not None:
            ready.set()
        await asyncio.gather(*(watch(p) for p in procs))
    finally:
        for p in procs:
            if p.returncode is None:
                p.terminate()
        for p in procs:
            await p.wait()
        shutil.rmtree(run_dir, ignore_errors=True)
        process_group.remove_metrics_dir(metrics_dir)


__all__ = ["Proxy", "ProxyServer", "serve_proxy", "local_result", "ER_NO_DB_ERROR"]
