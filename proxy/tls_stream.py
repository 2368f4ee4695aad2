"""TLS upgrade of a MySQL connection without losing the client's first TLS bytes.

A client sends the SSLRequest packet and its TLS ClientHello back to back; the
StreamReader may already hold the ClientHello when the upgrade starts, and
``loop.start_tls`` never sees those bytes, so the handshake stalls (mysql-mimic
hung on 88 of 300 PyMySQL connects). This upgrade hands the already-buffered
bytes to the TLS protocol first.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from asyncio import sslproto

from mysql_mimic.stream import MysqlStream

from proxy.mysql_mimic_internals import buffered_input, replace_write_buffer, write_buffer


class TlsUpgradableStream:
    """mysql-mimic's ``MysqlStream`` (a compiled class, so wrapped, not subclassed)
    with a lossless ``start_tls``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.inner = MysqlStream(reader, writer)
        self.reader = reader
        self.writer = writer
        self.read = self.inner.read
        self.write = self.inner.write
        self.write_many = self.inner.write_many
        self.write_text_rows = self.inner.write_text_rows
        self.drain = self.inner.drain
        self.reset_seq = self.inner.reset_seq

    # mysql-mimic's write buffer: the connection appends forwarded row packets to it and
    # flushes it itself.
    @property
    def buffer(self) -> bytearray:
        return write_buffer(self.inner)

    @buffer.setter
    def buffer(self, value: bytearray) -> None:
        replace_write_buffer(self.inner, value)

    @property
    def seq(self):  # type: ignore[no-untyped-def]
        return self.inner.seq

    async def start_tls(self, ctx: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        transport = self.writer.transport
        app_protocol = transport.get_protocol()
        # bytes read past the SSLRequest packet
        unread = buffered_input(self.reader)
        pending = bytes(unread)
        unread.clear()
        waiter = loop.create_future()
        tls = sslproto.SSLProtocol(loop, app_protocol, ctx, waiter, server_side=True, call_connection_made=False)
        transport.pause_reading()  # type: ignore[attr-defined]  # a read transport's pause (not on WriteTransport's type)
        transport.set_protocol(tls)

        def connection_made() -> None:
            tls.connection_made(transport)
            if pending:
                buf = tls.get_buffer(len(pending))
                buf[: len(pending)] = pending
                tls.buffer_updated(len(pending))

        made = loop.call_soon(connection_made)
        resume = loop.call_soon(transport.resume_reading)  # type: ignore[attr-defined]  # a read transport's pause (not on WriteTransport's type)
        try:
            await waiter
        except BaseException:
            made.cancel()
            resume.cancel()
            transport.close()
            raise
        new_transport = tls._app_transport
        self.writer._transport = new_transport  # type: ignore[attr-defined]
        self.reader._transport = new_transport  # type: ignore[attr-defined]


class _EofOverSslNoise(logging.Filter):
    """asyncio warns on every TLS close that StreamReaderProtocol's half-close is
    ignored under SSL; that is expected here and would flood the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "eof_received() has no effect when using ssl" not in record.getMessage()


logging.getLogger("asyncio").addFilter(_EofOverSslNoise())
