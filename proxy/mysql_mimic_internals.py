"""mysql-mimic's private API, used from here only (checked against mysql-mimic 3.0.5, the
version pyproject.toml pins; a different installed version is logged at import).

The proxy runs on mimic's handshake, authentication and stream, but replaces three things mimic
offers no public hook for:
- the per-client callback of ``MysqlServer`` (``_client_connected_cb``): ours builds the
  connection with the TLS-upgradable stream and the executor (``MimicServer.serve_client``);
- the body of ``Connection.start`` (``_start``, run by ``start`` in the task ``kill`` cancels):
  ours closes a connection whose login failed and installs the fast path
  (``MimicConnection.run``);
- ``MysqlStream``'s write buffer (``_buffer``): forwarded row packets are appended to it and
  flushed per chunk (``write_buffer``/``replace_write_buffer``).

Beside those, what the proxy reads of the asyncio ``StreamReader`` under mimic's stream (no
public API either): the bytes it holds unread and whether it has seen the end of file.

tests/proxy/test_import_layers.py fails on a mimic private name used anywhere else.
"""

from __future__ import annotations

import asyncio
import logging
from importlib import metadata

from mysql_mimic.connection import Connection
from mysql_mimic.server import MysqlServer
from mysql_mimic.stream import MysqlStream

logger = logging.getLogger(__name__)

MYSQL_MIMIC_CHECKED = "3.0.5"

_installed = metadata.version("mysql-mimic")
if _installed != MYSQL_MIMIC_CHECKED:
    logger.warning(
        "mysql-mimic version differs from the one its private API was checked against",
        extra={"installed": _installed, "checked": MYSQL_MIMIC_CHECKED},
    )


class MimicServer(MysqlServer):
    """``MysqlServer`` whose per-client callback is ``serve_client``."""

    async def _client_connected_cb(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.serve_client(reader, writer)

    async def serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class MimicConnection(Connection):
    """mimic's ``Connection`` whose life (handshake, then commands) is ``run``; ``start``
    still runs it in the task mimic's ``kill`` cancels."""

    async def _start(self) -> None:
        await self.run()

    async def run(self) -> None:
        raise NotImplementedError


def write_buffer(stream: MysqlStream) -> bytearray:
    """The packets ``stream`` has buffered and not yet written to its socket."""
    buffer: bytearray = stream._buffer
    return buffer


def replace_write_buffer(stream: MysqlStream, buffer: bytearray) -> None:
    stream._buffer = buffer


def buffered_input(reader: asyncio.StreamReader) -> bytearray:
    """The bytes ``reader`` received and nobody has read yet (the live buffer)."""
    buffer: bytearray = reader._buffer  # type: ignore[attr-defined]
    return buffer


def take_buffered_input(reader: asyncio.StreamReader) -> bytes:
    """The bytes ``reader`` holds unread, taken out of it (b"": none, or not to be taken: the
    reader paused its transport, which only its own reads resume, or saw the end of file,
    which its reader must see)."""
    buffer = buffered_input(reader)
    if not buffer or reader._paused or saw_eof(reader):  # type: ignore[attr-defined]
        return b""
    data = bytes(buffer)
    buffer.clear()
    return data


def saw_eof(reader: asyncio.StreamReader) -> bool:
    """Whether the peer's end of file has arrived, even with unread bytes before it
    (``at_eof`` is true only once those are read)."""
    eof: bool = reader._eof  # type: ignore[attr-defined]
    return eof


__all__ = [
    "MYSQL_MIMIC_CHECKED", "MimicConnection", "MimicServer", "buffered_input", "replace_write_buffer",
    "saw_eof", "take_buffered_input", "write_buffer",
]
