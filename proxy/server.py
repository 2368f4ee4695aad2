"""The proxy process's front end: authentication and the listening socket(s), in front of
one ``Executor`` over the process's ``ClusterState``.

One ``ClusterState`` per process. ``serve`` can fork several worker processes that all
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
from collections.abc import Mapping
from hashlib import sha1
from pathlib import Path
from typing import Any

from mysql_mimic.auth import (
    AuthInfo,
    Forbidden,
    IdentityProvider,
    NativePasswordAuthPlugin,
    Success,
    User,
)

from proxy.addresses import is_loopback
from proxy.cluster_state import ClusterState
from proxy.config import ClusterConfig, ShardEndpoint
from proxy.connection import SERVER_CAPABILITIES, ProxyConnection
from proxy.errors import ER_ACCESS_DENIED, ER_UNKNOWN_ERROR, ProxyError
from proxy.executor import Executor
from proxy.mysql_mimic_internals import MimicServer
from proxy.observability import process_group
from proxy.session import ProxySession
from proxy.tls_stream import TlsUpgradableStream
from proxy.worker_cpus import worker_environments
from proxy.worker_peers import MAX_WORKERS, WorkerSlot

logger = logging.getLogger(__name__)

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


class ProxyServer(MimicServer):
    """mysql-mimic's server with our connection class and session factory."""

    def __init__(self, state: ClusterState, tls: ssl.SSLContext | None = None, **kw: Any) -> None:
        users = {u.user: u.password for u in state.config.users}
        super().__init__(
            session_factory=lambda: ProxySession(state),
            capabilities=SERVER_CAPABILITIES,
            identity_provider=ConfigIdentityProvider(users),
            ssl=tls,
            control=state.processlist,
            **kw,
        )
        self.state = state
        self.executor = Executor(state)

    async def serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = TlsUpgradableStream(reader, writer)
        session = self.session_factory()
        connection = ProxyConnection(
            self.executor,
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
            ER_ACCESS_DENIED,
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
    state = ClusterState(config, endpoints, worker=worker)
    await state.start()
    tls = tls_context(str(config.listen.tls.cert), str(config.listen.tls.key)) if config.listen.tls else None
    server = ProxyServer(state, tls=tls)
    await server.start_server(host=config.listen.host, port=config.listen.port, reuse_port=True)
    logger.info("proxy listening", extra={"host": config.listen.host, "port": config.listen.port, "pid": os.getpid()})
    if ready is not None:
        ready.set()
    try:
        await server.serve_forever()
    finally:
        server.close()
        await server.wait_closed()
        await state.close()


def endpoints_to_json(endpoints: Mapping[tuple[str, str], ShardEndpoint]) -> str:
    return json.dumps(
        [
            {"keyspace": ks, "shard": s, "host": e.host, "port": e.port, "user": e.user,
             "password": e.password, "database": e.database, "socket": e.socket}
            for (ks, s), e in endpoints.items()
        ]
    )


def endpoints_from_json(text: str) -> dict[tuple[str, str], ShardEndpoint]:
    return {
        (d["keyspace"], d["shard"]): ShardEndpoint(
            d["host"], d["port"], d["user"], d["password"], d["database"], d.get("socket")
        )
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
        cpus = worker_environments(workers)  # each worker on a CPU of its own (proxy/worker_cpus.py)
        for index in range(workers):
            slot = WorkerSlot(index, run_dir)
            procs.append(
                await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "proxy.cli", "worker", "-c", str(config.path),
                    "--port", str(config.listen.port), env={**env, **slot.environment(), **cpus[index]},
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


__all__ = ["ProxyServer", "serve_proxy"]
