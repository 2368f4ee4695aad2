"""How the worker processes of one ``shardgate up/serve --workers N`` reach each other's
client sessions (SHOW PROCESSLIST, KILL).

Why unix sockets in a run directory: the workers share one TCP port through
SO_REUSEPORT, so a client lands on any of them, and its SHOW PROCESSLIST or KILL must
see every worker's sessions. The parent creates a private run directory (mode 0700,
removed when it exits) and gives each worker its index and that directory; each
worker answers requests on ``worker-<index>.sock`` there. That needs no shared
memory, no extra TCP port and no broker; a worker that died leaves a socket nobody
answers, which is skipped. A single process (no ``--workers``) needs none of it.

Connection ids carry the worker index in their high ``WORKER_ID_SHIFT`` bits (and
still fit MySQL's 32-bit thread id), so a KILL goes straight to the worker holding
the session.

Protocol: one JSON request line, one JSON answer line:
``{"op": "list"}`` -> ``{"rows": [[id, user, host, db, command, time, state, info], ...]}``;
``{"op": "kill", "id": n, "query": bool}`` -> ``{"found": bool}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

WORKER_ID_SHIFT = 24  # up to 256 workers, 16M connection ids each before the sequence wraps
MAX_WORKERS = 1 << (32 - WORKER_ID_SHIFT)
RUN_DIR_ENV = "SHARDGATE_RUN_DIR"
WORKER_INDEX_ENV = "SHARDGATE_WORKER_INDEX"
PEER_TIMEOUT_S = 5.0
_MAX_LINE = 64 * 1024 * 1024  # a list answer of many long statements


@dataclass(frozen=True, slots=True)
class WorkerSlot:
    """Which worker this process is, and where the workers' sockets are."""

    index: int
    run_dir: Path

    @classmethod
    def from_environment(cls) -> WorkerSlot | None:
        run_dir, index = os.environ.get(RUN_DIR_ENV), os.environ.get(WORKER_INDEX_ENV)
        if not run_dir or index is None:
            return None
        return cls(int(index), Path(run_dir))

    def environment(self) -> dict[str, str]:
        return {RUN_DIR_ENV: str(self.run_dir), WORKER_INDEX_ENV: str(self.index)}

    def socket_path(self, index: int | None = None) -> Path:
        return self.run_dir / f"worker-{self.index if index is None else index}.sock"


def worker_of(connection_id: int) -> int:
    return connection_id >> WORKER_ID_SHIFT


ListRows = Callable[[], list[list[Any]]]
KillLocal = Callable[[int, bool], Awaitable[bool]]


class WorkerPeers:
    """This worker's socket server, and requests to the other workers."""

    def __init__(self, slot: WorkerSlot, list_rows: ListRows, kill_local: KillLocal) -> None:
        self.slot = slot
        self._list_rows = list_rows
        self._kill_local = kill_local
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        path = self.slot.socket_path()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # left by a worker of this index that died
        self._server = await asyncio.start_unix_server(self._serve, path=str(path), limit=_MAX_LINE)
        logger.info("worker peer socket listening", extra={"worker": self.slot.index, "socket": str(path)})

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.slot.socket_path().unlink()

    # -- answering ------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = json.loads(await asyncio.wait_for(reader.readline(), PEER_TIMEOUT_S))
            if request.get("op") == "list":
                answer: dict[str, Any] = {"rows": self._list_rows()}
            elif request.get("op") == "kill":
                answer = {"found": await self._kill_local(int(request["id"]), bool(request.get("query")))}
            else:
                answer = {"error": f"unknown op {request.get('op')!r}"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (OSError, ValueError, KeyError, TimeoutError) as e:
            logger.warning("worker peer request failed", extra={"worker": self.slot.index, "error": str(e)})
        finally:
            writer.close()

    # -- asking ---------------------------------------------------------------------
    def _peer_indexes(self) -> list[int]:
        out = []
        for p in self.slot.run_dir.glob("worker-*.sock"):
            try:
                index = int(p.stem.removeprefix("worker-"))
            except ValueError:
                continue
            if index != self.slot.index:
                out.append(index)
        return sorted(out)

    async def _ask(self, index: int, request: dict[str, Any]) -> dict[str, Any] | None:
        """One worker's answer, or None if it does not answer (gone, stuck)."""
        path = self.slot.socket_path(index)
        try:
            async with asyncio.timeout(PEER_TIMEOUT_S):
                reader, writer = await asyncio.open_unix_connection(str(path), limit=_MAX_LINE)
                try:
                    writer.write(json.dumps(request).encode() + b"\n")
                    await writer.drain()
                    line = await reader.readline()
                finally:
                    writer.close()
            answer = json.loads(line)
        except (OSError, ValueError, TimeoutError) as e:
            logger.warning("worker did not answer", extra={"worker": index, "op": request.get("op"), "error": str(e)})
            return None
        return answer if isinstance(answer, dict) else None

    async def list_others(self) -> list[list[Any]]:
        """The sessions of every other worker that answers."""
        answers = await asyncio.gather(*(self._ask(i, {"op": "list"}) for i in self._peer_indexes()))
        return [row for a in answers if a is not None for row in a.get("rows", [])]

    async def kill(self, index: int, connection_id: int, query: bool) -> bool:
        """Ask worker ``index`` to kill one of its sessions; False if it has none by that id."""
        if index == self.slot.index:
            return await self._kill_local(connection_id, query)
        answer = await self._ask(index, {"op": "kill", "id": connection_id, "query": query})
        return bool(answer and answer.get("found"))
