"""One running `mariadbd` process serving one local shard."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import aiomysql
import pymysql

from proxy.cluster.binaries import MariaDBBinaries
from proxy.cluster.errors import ShardStartError
from proxy.cluster.layout import LocalShardSpec
from proxy.cluster.server_options import mariadbd_command

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1


def _parent_death_wrapper() -> list[str]:
    """`setpriv --pdeathsig TERM --`: the shard gets SIGTERM if our process dies, even by SIGKILL.

    setpriv (util-linux) sets the flag between fork and exec without running Python in the child.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []


def _set_parent_death_signal() -> None:
    # Fallback when setpriv is missing: prctl(PR_SET_PDEATHSIG, SIGTERM) in the forked child.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def tail_of_file(path: os.PathLike[str] | str, lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines)).rstrip()
    except FileNotFoundError:
        return "<no error log written>"


def running_pid_from_file(pid_file: Path) -> int | None:
    """The pid recorded in a mariadbd pid file if that process is alive."""
    try:
        pid = int(pid_file.read_text(encoding="ascii").strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


class MariaDBInstance:
    """Starts, watches and stops the `mariadbd` of one shard."""

    def __init__(self, spec: LocalShardSpec, binaries: MariaDBBinaries) -> None:
        self.spec = spec
        self.binaries = binaries
        self._process: subprocess.Popen[bytes] | None = None
        self._terminating = False
        self._data_dir_names: set[Path] = set()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _error(self, message: str) -> ShardStartError:
        return ShardStartError(
            self.spec.keyspace,
            self.spec.shard,
            f"{message}; last lines of {self.spec.error_log}:\n{tail_of_file(self.spec.error_log)}",
        )

    async def start(self, ready_within_s: float = READY_TIMEOUT_S) -> float:
        """Launch mariadbd and wait until it accepts logins; returns the seconds it took."""
        if self.running:
            return 0.0
        started = time.monotonic()
        self._launch()
        try:
            await self._wait_ready(ready_within_s)
        except BaseException:
            await self.stop(kill=True)
            raise
        seconds = time.monotonic() - started
        logger.info(
            "mariadbd ready keyspace=%s shard=%s port=%d seconds=%.2f",
            self.spec.keyspace,
            self.spec.shard,
            self.spec.port,
            seconds,
            extra={"keyspace": self.spec.keyspace, "shard": self.spec.shard, "seconds": seconds},
        )
        return seconds

    def _launch(self) -> None:
        self._terminating = False
        # mariadbd may report the data dir as given or with symlinks resolved.
        self._data_dir_names = {self.spec.data_dir, self.spec.data_dir.resolve()}
        wrapper = _parent_death_wrapper()
        preexec: Callable[[], None] | None = None if wrapper else _set_parent_death_signal
        command = wrapper + mariadbd_command(self.binaries, self.spec)
        self.spec.tmp_dir.mkdir(exist_ok=True)
        # mariadbd reopens stderr onto --log-error; messages printed before that land there too.
        with open(self.spec.error_log, "ab") as early_log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=early_log,
                stderr=early_log,
                # Its own session: a Ctrl-C in the terminal reaches the proxy, which then stops
                # the shards in order, instead of killing them under open transactions.
                start_new_session=True,
                preexec_fn=preexec,
                cwd=self.spec.data_dir,
            )
        logger.info(
            "mariadbd launched keyspace=%s shard=%s port=%d pid=%d",
            self.spec.keyspace,
            self.spec.shard,
            self.spec.port,
            self._process.pid,
            extra={
                "keyspace": self.spec.keyspace,
                "shard": self.spec.shard,
                "port": self.spec.port,
            },
        )

    async def _wait_ready(self, within_s: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + within_s
        last_error: BaseException | None = None
        while True:
            code = self._process.poll()
            if code is not None:
                raise self._error(f"mariadbd exited with code {code} during start-up")
            try:
                conn = await aiomysql.connect(
                    host=self.spec.endpoint.host,
                    port=self.spec.port,
                    user=self.spec.endpoint.user,
                    password=self.spec.endpoint.password,
                    connect_timeout=2,
                )
            except (TimeoutError, pymysql.err.OperationalError, OSError) as e:
                last_error = e
            else:
                try:
                    if await self._serves_our_data_dir(conn):
                        return
                finally:
                    # COM_QUIT rather than a dropped socket, which the server logs as aborted.
                    await conn.ensure_closed()
            if time.monotonic() >= deadline:
                raise self._error(
                    f"not ready on port {self.spec.port} after {within_s:.0f}s "
                    f"(last connection error: {last_error})"
                )
            await asyncio.sleep(_POLL_S)

    async def _serves_our_data_dir(self, conn: aiomysql.Connection) -> bool:
        # Guards against a foreign server that took the port after the free-port check: ours
        # will exit with "address in use", theirs must not be mistaken for a ready shard.
        async with conn.cursor() as cur:
            await cur.execute("SELECT @@datadir")
            (datadir,) = await cur.fetchone()
        return Path(datadir) in self._data_dir_names

    def send_signal(self, signum: int) -> None:
        """Send a signal to mariadbd if it still runs (only the pid this object started)."""
        if self.running:
            assert self._process is not None
            self._process.send_signal(signum)
            if signum == signal.SIGTERM:
                self._terminating = True

    async def stop(self, *, kill: bool = False, grace_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (clean shutdown) or SIGKILL (crash) and wait; returns the exit code."""
        process = self._process
        if process is None:
            return None
        if kill:
            self.send_signal(signal.SIGKILL)
        elif not self._terminating:
            # A second SIGTERM adds nothing; shutdown is already under way.
            self.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while process.poll() is None:
            if time.monotonic() >= deadline:
                logger.warning(
                    "mariadbd ignored SIGTERM, killing keyspace=%s shard=%s pid=%d",
                    self.spec.keyspace,
                    self.spec.shard,
                    process.pid,
                )
                process.kill()
                deadline = time.monotonic() + grace_s
            await asyncio.sleep(_POLL_S)
        self._process = None
        logger.info(
            "mariadbd stopped keyspace=%s shard=%s pid=%d code=%s killed=%s",
            self.spec.keyspace,
            self.spec.shard,
            process.pid,
            process.returncode,
            kill,
        )
        return process.returncode
