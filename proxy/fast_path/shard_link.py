"""A shard connection of the fast path's own: an ``asyncio.Protocol`` that writes a
COM_QUERY and hands back the shard's response packets as they are, in one block.

aiomysql's connection reads a response one packet at a time through a StreamReader,
each read awaited, behind its pool's and cursor's layers; a response the proxy relays
byte for byte needs none of that. A link frames the response while it arrives (OK,
ERR, or column count + definitions + EOF + rows + EOF) and calls its ``Relay`` once,
from ``data_received``, when the response is complete: no task, no future. A result
larger than ``RELAY_CHUNK`` goes out in pieces as it arrives (the client's flow
control pauses the shard's socket), so memory stays bounded as on the normal path; rows
of a result still unfinished after ``FLUSH_AFTER_S`` go out then.

Links speak the text protocol without CLIENT_DEPRECATE_EOF (as the proxy's clients
do: the proxy never offers it) and with the pools' charset, so what a shard sends is
what the client expects, except the status flags of the OK and EOF packets, which the link
sets to the proxy's (``query(status=...)``: a statement inside a transaction carries the
session's).

A ``PinnedLink`` is a link over the socket of a pooled ``ShardConnection`` pinned to a
client's transaction (``proxy.transaction``): for one query it takes the place of the
aiomysql connection's protocol, so a transaction's statements run on the fast path and on
the normal path alike, on the one shard connection holding the transaction.

``ShardLinks`` keeps the idle links of one shard. ``take`` never waits: without an
idle link it starts opening one in the background and the statement takes the
normal path.

A link carries one set of session variables for its whole life (``Settings``: the
client session's ``settings``, what the normal path's ``ShardConnection.apply_settings``
would give a pooled connection), set once right after login; ``ShardLinks`` keeps idle
links by those settings and hands a session only a link with exactly its own. So a
statement never runs after a SET that might have failed: a link whose SET failed is
never used.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol, TypeAlias, cast

from pymysql._auth import scramble_native_password
from pymysql.charset import charset_by_name
from pymysql.constants import CLIENT

from proxy import aiomysql_wire
from proxy.errors import ProxyError, ShardError, ShardUnavailable
from proxy.pools import ShardConnection, ShardPool, ShardPools

logger = logging.getLogger(__name__)

# What the link announces: pymysql's capabilities with multi-statements (as the pools' aiomysql
# connections have them), without connection attributes. Multi-statements: ``begin;<statement>``
# (proxy/fast_path/several.py); a client's statement with a ";" never reaches a link (routing).
_CAPABILITIES = (CLIENT.CAPABILITIES | CLIENT.MULTI_STATEMENTS | CLIENT.CONNECT_WITH_DB) & ~CLIENT.CONNECT_ATTRS
_CHARSET_ID = charset_by_name("utf8mb4").id  # type: ignore[attr-defined]  # the stubs omit Charset.id
_MAX_PACKET = (1 << 24) - 1
_NATIVE_PASSWORD = b"mysql_native_password"
_CONNECT_TIMEOUT_S = 5.0
# The proxy's status flags in a fast-path answer's EOF packets: autocommit, no transaction
# (``ShardLink.query`` takes others for a statement inside a transaction).
STATUS_AUTOCOMMIT = 0x0002
# A multi-statement's answer that is not its last (``begin;<statement>``).
_MORE_RESULTS = 0x0008
# Errors after which the shard closes the connection (killed, shutting down).
_CONNECTION_ENDING = {1053, 1927}
# Links of one shard being opened at once (statements meanwhile take the normal path).
_OPENING_MAX = 4
# A response bigger than this goes to the client in pieces as it arrives.
RELAY_CHUNK = 256 * 1024
# Rows of an unfinished result wait at most this long to be relayed (one extra write per slow
# or multi-read result; a result complete in one read never arms it).
FLUSH_AFTER_S = 0.005

# A shard link's session variables: the session's ``settings`` (name, SQL literal), sorted.
Settings: TypeAlias = tuple[tuple[str, str], ...]
NO_SETTINGS: Settings = ()


def settings_key(settings: dict[str, str]) -> Settings:
    """The links a session with these ``settings`` may use."""
    return tuple(sorted(settings.items())) if settings else NO_SETTINGS


# Response framing states.
_IDLE, _FIRST, _COLUMNS, _COLUMNS_EOF, _ROWS = range(5)


class Relay(Protocol):
    """Who gets a link's response (the client connection's fast path)."""

    def response_part(self, link: ShardLink, data: bytes) -> None:
        """Complete packets of a large result, more to come."""

    def response_done(self, link: ShardLink, data: bytes, rows: int, error: ShardErr | None) -> None:
        """The rest of the response (``error``: it ended with this ERR packet)."""

    def link_lost(self, link: ShardLink, cause: str) -> None:
        """The shard connection failed before the response was complete."""


@dataclass(frozen=True, slots=True)
class ShardErr:
    """The ERR packet a response ended with: its code, message, and where it starts in the data."""

    code: int
    message: str
    start: int


class LinkError(Exception):
    """The link could not be opened (refused, failed login)."""


def lenenc(buf: bytes | bytearray, pos: int) -> tuple[int, int]:
    """A length-encoded integer at ``pos``: (value, position after it)."""
    first = buf[pos]
    if first < 0xFB:
        return first, pos + 1
    if first == 0xFC:
        return int.from_bytes(buf[pos + 1 : pos + 3], "little"), pos + 3
    if first == 0xFD:
        return int.from_bytes(buf[pos + 1 : pos + 4], "little"), pos + 4
    return int.from_bytes(buf[pos + 1 : pos + 9], "little"), pos + 9


def _packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes((seq,)) + payload


# What a fast-path protocol reads into (asyncio.BufferedProtocol): the transport then
# receives with recv_into instead of allocating a 256 KiB bytes object per read.
READ_BUFFER = 64 * 1024


class ReadBuffer:
    """A reusable receive buffer; ``take(n)`` is what the last read put there."""

    __slots__ = ("view",)

    def __init__(self) -> None:
        self.view = memoryview(bytearray(READ_BUFFER))

    def take(self, n: int) -> memoryview:
        return self.view[:n]


class ShardLink(asyncio.BufferedProtocol):
    """One connection to a shard's primary. What ``RunningStatement.kill`` needs of a
    shard connection (``pool``, ``thread_id``, ``keyspace``, ``shard``, ``broken``) it has."""

    def __init__(self, pool: ShardPool, settings: Settings = NO_SETTINGS, read: ReadBuffer | None = None) -> None:
        self.pool = pool
        self.settings = settings
        self.thread_id = 0
        self.broken = False
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._pos = 0  # where the next unframed packet starts in _buf
        self._last = 0  # where the last row packet framed starts
        self._state = _IDLE
        self._columns_left = 0
        self._rows = 0
        self._continued = False  # the next packet continues a packet of 2^24-1 bytes
        self._flush: asyncio.TimerHandle | None = None  # relays the rows framed so far (FLUSH_AFTER_S)
        self._relay: Relay | None = None
        # The sequence id the next packet of the response relayed so far would carry.
        self.next_seq = 1
        # The status flags the answer's OK / EOF packets carry to the client, and the shard's own
        # (those of the last OK or EOF packet framed).
        self.status = STATUS_AUTOCOMMIT
        self.shard_status = 0
        # The warning count of the statement's last OK / EOF packet (0 after an ERR): its
        # warnings are in this connection's diagnostics area until its next statement.
        self.warnings = 0
        # Its affected rows (-1: it answered rows, or failed), as ROW_COUNT() reads them.
        self.affected_rows = -1
        # ``begin;<statement>`` (``query(after_begin=True)``): the BEGIN's OK is left out of the
        # answer and the packets after it numbered one less; ``began``: that OK was there.
        self._skip_begin = False
        self._seq_shift = 0
        self.began = False
        self._login: asyncio.Future[None] | None = None
        self._login_seq = 0
        self._salt = b""
        self._read = read if read is not None else ReadBuffer()

    @property
    def keyspace(self) -> str:
        return self.pool.address.keyspace

    @property
    def shard(self) -> str:
        return self.pool.address.shard

    @property
    def busy(self) -> bool:
        return self._state != _IDLE

    # -- opening -------------------------------------------------------------------------
    @classmethod
    async def open(cls, pool: ShardPool, settings: Settings = NO_SETTINGS) -> ShardLink:
        """A logged-in link with ``settings`` applied."""
        a = pool.address
        loop = asyncio.get_running_loop()
        link = cls(pool, settings)
        link._login = loop.create_future()
        async with asyncio.timeout(_CONNECT_TIMEOUT_S):
            # asyncio sets TCP_NODELAY on TCP connections itself and leaves Unix ones alone.
            path = pool.unix_socket
            if path is not None:
                transport, _ = await loop.create_unix_connection(lambda: link, path)
            else:
                transport, _ = await loop.create_connection(lambda: link, a.host, a.port)
            try:
                await link._login
                if settings:
                    # The SET the normal path's apply_settings sends a pooled connection.
                    applied = _Applied(loop)
                    link.query(("set " + ", ".join(f"@@session.{n} = {v}" for n, v in settings)).encode(), applied)
                    error = await applied.done
                    if error is not None:
                        raise LinkError(f"({error.code}) {error.message}")
            except BaseException:
                link.broken = True
                transport.close()
                raise
        return link

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not asserted to be an asyncio.Transport: uvloop's transports are not subclasses of it.
        self.transport = cast(asyncio.Transport, transport)

    def _login_packet(self, payload: bytes) -> None:
        login = self._login
        assert login is not None
        seq = self._login_seq
        if seq == 0:  # the server's greeting (protocol 10)
            self._greeting(payload)
            return
        head = payload[:1]
        if head == b"\x00":
            self._login = None
            login.set_result(None)
        elif head == b"\xff":
            code = int.from_bytes(payload[1:3], "little")
            raise LinkError(f"({code}) {payload[9:].decode('utf-8', 'replace')}")
        elif head == b"\xfe":  # auth switch: a new salt for (we hope) the same plugin
            name, _, salt = payload[1:].partition(b"\x00")
            if name != _NATIVE_PASSWORD:
                raise LinkError(f"unsupported authentication plugin {name.decode(errors='replace')}")
            self._salt = salt.rstrip(b"\x00")
            self._send_login(scramble_native_password(self.pool.address.password.encode(), self._salt))
        else:
            raise LinkError(f"unexpected packet during login: {payload[:1].hex()}")

    def _greeting(self, p: bytes) -> None:
        i = p.index(b"\x00", 1) + 1  # protocol version, server version
        self.thread_id = int.from_bytes(p[i : i + 4], "little")
        salt = p[i + 4 : i + 12]
        i += 13 + 2 + 1 + 2 + 2  # salt part 1, filler, capabilities (low), charset, status, capabilities (high)
        auth_len = p[i]
        i += 11  # its length byte, reserved
        salt += p[i : i + max(13, auth_len - 8)].rstrip(b"\x00")
        self._salt = salt
        a = self.pool.address
        auth = scramble_native_password(a.password.encode(), salt) if a.password else b""
        self._send_login(
            _CAPABILITIES.to_bytes(4, "little") + _MAX_PACKET.to_bytes(4, "little") + bytes((_CHARSET_ID,))
            + bytes(23) + a.user.encode() + b"\x00" + bytes((len(auth),)) + auth
            + a.database.encode() + b"\x00" + _NATIVE_PASSWORD + b"\x00",
            handshake=True,
        )

    def _send_login(self, payload: bytes, handshake: bool = False) -> None:
        assert self.transport is not None
        if handshake:
            self.transport.write(_packet(1, payload))
            self._login_seq = 2
        else:
            self.transport.write(_packet(self._login_seq, payload))
            self._login_seq += 1

    # -- queries -------------------------------------------------------------------------
    def query(self, sql: bytes, relay: Relay, status: int = STATUS_AUTOCOMMIT, after_begin: bool = False) -> None:
        """Send COM_QUERY ``sql`` (shorter than 2^24 - 1 bytes); ``relay`` gets the response,
        its OK / EOF packets carrying ``status``. ``after_begin``: ``sql`` is ``begin;<statement>``
        and the response relayed is the statement's (the BEGIN's OK left out; an ERR first: the
        BEGIN failed, ``began`` stays False)."""
        assert self.transport is not None and self._state == _IDLE
        self._relay = relay
        self._state = _FIRST
        self._rows = 0
        self.next_seq = 1
        self.status = status
        self._skip_begin = after_begin
        self._seq_shift = 0
        self.began = False
        n = len(sql) + 1
        self.transport.write(n.to_bytes(3, "little") + b"\x00\x03" + sql)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._read.view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._read.take(nbytes))

    def data_received(self, data: bytes | memoryview) -> None:
        buf = self._buf
        buf += data
        if self._login is not None:
            self._read_login()
            return
        if self._state == _IDLE:
            logger.warning("shard sent data while no query ran; closing", extra={"shard": self.pool.name})
            self.close()
            return
        pos = self._pos
        n = len(buf)
        state = self._state
        while pos + 4 <= n:
            length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
            end = pos + 4 + length
            if end > n:
                break
            if self._seq_shift:
                buf[pos + 3] = (buf[pos + 3] - 1) & 0xFF
            if self._continued:  # the middle of a huge row: not a packet to interpret
                self._continued = length == 0xFFFFFF
                pos = end
                continue
            self._continued = length == 0xFFFFFF
            head = buf[pos + 4] if length else 0
            if state == _ROWS:
                if head == 0xFE and length < 9:  # EOF: the end of the result
                    self.shard_status = buf[pos + 7] | buf[pos + 8] << 8
                    # Its warning count goes to the client as MariaDB sends it (a point select's
                    # CAST or division by zero), only the status flags are the proxy's.
                    self.warnings = buf[pos + 5] | buf[pos + 6] << 8
                    self.affected_rows = -1
                    buf[pos + 7 : pos + 9] = self.status.to_bytes(2, "little")
                    self._done(end, None)
                    return
                if head == 0xFF:
                    self._done(end, self._error_of(pos, end))
                    return
                self._rows += 1
                self._last = pos
            elif state == _FIRST:
                if head == 0x00:  # OK
                    self.affected_rows, p = lenenc(buf, pos + 5)
                    _, p = lenenc(buf, p)
                    self.shard_status = buf[p] | buf[p + 1] << 8
                    if self._skip_begin:  # the BEGIN's OK: left out, the statement's answer follows
                        self._skip_begin = False
                        if not self.shard_status & _MORE_RESULTS:
                            self.broken = True
                            self._done(end, ShardErr(2027, "Malformed packet: no answer after BEGIN", pos))
                            return
                        self.began = True
                        self._seq_shift = 1
                        del buf[pos:end]
                        n = len(buf)
                        continue
                    buf[p : p + 2] = self.status.to_bytes(2, "little")
                    self.warnings = buf[p + 2] | buf[p + 3] << 8
                    self._done(end, None)
                    return
                if head == 0xFF:
                    self._done(end, self._error_of(pos, end))
                    return
                if head == 0xFB:  # LOCAL INFILE request: never from a statement the fast path sends
                    self.broken = True
                    self._done(end, ShardErr(2027, "Malformed packet: LOCAL INFILE request", pos))
                    return
                self._columns_left, _ = lenenc(buf, pos + 4)
                state = _COLUMNS
            elif state == _COLUMNS:
                self._columns_left -= 1
                if self._columns_left == 0:
                    state = _COLUMNS_EOF
            else:  # _COLUMNS_EOF
                buf[pos + 5 : pos + 9] = b"\x00\x00" + self.status.to_bytes(2, "little")
                state = _ROWS
            pos = end
        self._state = state
        self._pos = pos
        if state == _ROWS and self._rows:
            if pos >= RELAY_CHUNK:
                self._relay_rows()
            elif self._flush is None:
                # Rows the shard is slow to finish (SLEEP per row, a long scan) reach the client
                # soon, as on the normal path, which flushes whenever its shard makes it wait.
                self._flush = asyncio.get_running_loop().call_later(FLUSH_AFTER_S, self._flush_rows)

    def _relay_rows(self) -> None:
        """Hand the complete packets framed so far to the relay (more rows to come)."""
        buf = self._buf
        pos = self._pos
        self.next_seq = (buf[self._last + 3] + 1) & 0xFF
        part = bytes(buf[:pos])
        del buf[:pos]
        self._pos = 0
        assert self._relay is not None
        self._relay.response_part(self, part)

    def _flush_rows(self) -> None:
        self._flush = None
        if self._state == _ROWS and self._pos and self._relay is not None:
            self._relay_rows()

    def _cancel_flush(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None

    def _error_of(self, start: int, end: int) -> ShardErr:
        self.warnings = 0
        self.affected_rows = -1
        p = bytes(self._buf[start + 4 : end])
        code = int.from_bytes(p[1:3], "little")
        if code in _CONNECTION_ENDING:
            self.broken = True  # the shard closes the connection next: never reuse it
        message = p[9:] if p[3:4] == b"#" else p[3:]
        return ShardErr(code, message.decode("utf-8", "replace"), start)

    def _done(self, end: int, error: ShardErr | None) -> None:
        self._cancel_flush()
        buf = self._buf
        data = bytes(buf[:end])
        del buf[:end]
        self._pos = 0
        self._state = _IDLE
        self._continued = False
        relay, self._relay = self._relay, None
        if buf:  # more than one response: the connection is out of step
            self.broken = True
        self._response_over()
        assert relay is not None
        relay.response_done(self, data, self._rows, error)

    def _response_over(self) -> None:
        """The response is complete (or the connection lost), before the relay hears of it."""

    def _read_login(self) -> None:
        buf = self._buf
        try:
            while len(buf) >= 4 and self._login is not None:
                length = int.from_bytes(buf[:3], "little")
                if len(buf) < 4 + length:
                    return
                payload = bytes(buf[4 : 4 + length])
                self._login_seq = buf[3] + 1 if self._login_seq else 0
                del buf[: 4 + length]
                self._login_packet(payload)
        except (LinkError, IndexError, ValueError) as e:
            login = self._login
            self._login = None
            if login is not None and not login.done():
                login.set_exception(e if isinstance(e, LinkError) else LinkError(f"malformed greeting: {e}"))
            self.close()

    # -- the end ---------------------------------------------------------------------------
    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        self.transport = None
        login, self._login = self._login, None
        if login is not None and not login.done():
            login.set_exception(LinkError(str(exc) if exc else "connection closed during login"))
        relay, self._relay = self._relay, None
        self._state = _IDLE
        self._cancel_flush()
        self._response_over()
        if relay is not None:
            relay.link_lost(self, str(exc) if exc else "Lost connection to MySQL server during query")

    def close(self) -> None:
        self.broken = True
        if self.transport is not None:
            self.transport.close()

    def abandon(self) -> None:
        """Close the link, its response unread (the client it worked for is gone)."""
        self._relay = None
        self._cancel_flush()
        self.close()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


# One receive buffer for every PinnedLink: ``buffer_updated`` hands what a read put there on
# at once (ShardLink.data_received copies it), so no two reads ever share it.
_PINNED_READ = ReadBuffer()


class PinnedLink(ShardLink):
    """A link over the socket of a pooled ``ShardConnection`` (a transaction's, pinned to its
    session), for one query at a time: the fast path sends a statement of the transaction on
    the very connection the normal path uses for it, so either path can run the next one.

    ``attach`` puts the link in place of the aiomysql connection's protocol on its transport;
    the response over, the aiomysql protocol is back (and the connection's ``server_status``
    is the shard's, which the pool reads to close a connection released inside a
    transaction). A lost connection is the aiomysql connection's too: it hears of it."""

    def __init__(self, sc: ShardConnection) -> None:
        self.sc = sc
        super().__init__(sc.pool, read=_PINNED_READ)
        self.thread_id = sc.thread_id
        self._inner: asyncio.BaseProtocol | None = None

    @property  # type: ignore[override]
    def broken(self) -> bool:
        return self.sc.broken

    @broken.setter
    def broken(self, value: bool) -> None:
        if value:  # what breaks the link breaks the connection; a new link repairs nothing
            self.sc.broken = True

    def attach(self) -> bool:
        """Take the connection's socket for a query; False when it is not idle and clean."""
        transport = aiomysql_wire.transport_of(self.sc.conn)
        if transport is None or transport.is_closing() or self.sc.broken or aiomysql_wire.has_unread(self.sc.conn):
            return False
        inner = transport.get_protocol()
        if isinstance(inner, ShardLink):
            return False  # another link has it (never seen: each query detaches its link)
        self._inner = inner
        self.transport = transport
        self.shard_status = self.sc.conn.server_status
        transport.set_protocol(self)
        return True

    def detach(self) -> None:
        """Give the socket back without a query (attached, then not used)."""
        self._response_over()

    def _response_over(self) -> None:
        inner, self._inner = self._inner, None
        if inner is None:
            return
        aiomysql_wire.set_server_status(self.sc.conn, self.shard_status)
        if self.transport is not None:
            self.transport.set_protocol(inner)
        self.transport = None

    def connection_lost(self, exc: Exception | None) -> None:
        inner = self._inner
        super().connection_lost(exc)  # restores the aiomysql protocol, tells the relay
        if inner is not None:
            inner.connection_lost(exc)

    def close(self) -> None:
        self.sc.broken = True
        transport = aiomysql_wire.transport_of(self.sc.conn)
        if transport is not None:
            transport.close()

    # The connection's socket, attached or not: a read paused for a slow client is resumed
    # after the response (ClientFastPath._finish), when the aiomysql protocol has it back.
    def pause_reading(self) -> None:
        transport = aiomysql_wire.transport_of(self.sc.conn)
        if transport is not None and not transport.is_closing():
            transport.pause_reading()

    def resume_reading(self) -> None:
        transport = aiomysql_wire.transport_of(self.sc.conn)
        if transport is not None and not transport.is_closing():
            transport.resume_reading()


class _Applied:
    """The relay of the SET a new link's settings are applied with."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.done: asyncio.Future[ShardErr | None] = loop.create_future()

    def response_part(self, link: ShardLink, data: bytes) -> None:
        """A SET answers one OK or ERR packet: never parts."""

    def response_done(self, link: ShardLink, data: bytes, rows: int, error: ShardErr | None) -> None:
        if not self.done.done():
            self.done.set_result(error)

    def link_lost(self, link: ShardLink, cause: str) -> None:
        if not self.done.done():
            self.done.set_exception(LinkError(cause))


class ShardLinks:
    """The fast path's idle links to one shard, by their settings; at most ``maxsize`` open."""

    def __init__(self, pool: ShardPool, maxsize: int) -> None:
        self.pool = pool
        self.maxsize = maxsize
        self.idle: dict[Settings, list[ShardLink]] = {}
        self.open = 0  # links open or opening
        self.served = 0  # statements sent (the shardgate_fast_path_statements metric)
        self._opening: set[asyncio.Task[None]] = set()
        # When opening a link failed, by settings: a shard that refused us, or a SET it refused
        # for one session's settings (which must not hold back the others'), is retried once a second.
        self._failed_at: dict[Settings, float] = {}

    def take(self, settings: Settings = NO_SETTINGS) -> ShardLink | None:
        """An idle link carrying ``settings``, or None (then one is opened in the background,
        if allowed: in place of an idle link of other settings when ``maxsize`` are open)."""
        idle = self.idle.get(settings)
        while idle:
            link = idle.pop()
            if link.transport is not None and not link.broken:
                return link
            self.open -= 1
        if len(self._opening) >= _OPENING_MAX:
            return None
        loop = asyncio.get_running_loop()
        if loop.time() - self._failed_at.get(settings, float("-inf")) < 1.0:
            return None
        if self.open >= self.maxsize and not self._close_other_idle(settings):
            return None
        self.open += 1
        task = loop.create_task(self._open(settings))
        self._opening.add(task)
        task.add_done_callback(self._opening.discard)
        return None

    def _close_other_idle(self, settings: Settings) -> bool:
        """Close an idle link of other settings than ``settings`` (sessions changed what they SET)."""
        for key in [key for key, links in self.idle.items() if not links and key != settings]:
            del self.idle[key]  # settings no idle link has: not kept forever
        for key, links in self.idle.items():
            if key != settings and links:
                links.pop(0).close()  # the longest idle
                self.open -= 1
                return True
        return False

    async def _open(self, settings: Settings) -> None:
        try:
            link = await ShardLink.open(self.pool, settings)
        except (LinkError, OSError, TimeoutError) as e:
            self.open -= 1
            if len(self._failed_at) > 1024:
                self._failed_at.clear()  # settings seen once: not kept forever
            self._failed_at[settings] = asyncio.get_running_loop().time()
            logger.info("fast path: shard link not opened", extra={"shard": self.pool.name, "error": str(e)})
            return
        self.idle.setdefault(settings, []).append(link)

    def give(self, link: ShardLink) -> None:
        """A link whose query is over: idle again, or closed if it may be out of step."""
        if link.broken or link.transport is None or link.busy:
            link.close()
            self.open -= 1
            return
        self.idle.setdefault(link.settings, []).append(link)

    async def close(self) -> None:
        for task in list(self._opening):
            task.cancel()
        await asyncio.gather(*self._opening, return_exceptions=True)
        for links in self.idle.values():
            for link in links:
                link.close()
        self.idle.clear()
        self.open = 0


class LinkPools:
    """The fast path's links to every shard of a proxy process."""

    def __init__(self, pools: ShardPools, maxsize: int = 32) -> None:
        self.links = {key: ShardLinks(pool, maxsize) for key, pool in pools.pools.items()}

    def get(self, keyspace: str, shard: str) -> ShardLinks | None:
        return self.links.get((keyspace, shard))

    async def close(self) -> None:
        await asyncio.gather(*(links.close() for links in self.links.values()))


class OkAnswer:
    """The relay of one statement answering OK or ERR (an INSERT, UPDATE, DELETE, BEGIN,
    COMMIT): ``done`` holds its OK packet and None, or the error to raise — the shard's
    (``ShardError``: the link stays in step), or ``ShardUnavailable`` for a lost link or a
    result set (the link is then out of step: marked broken)."""

    __slots__ = ("done",)

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.done: asyncio.Future[tuple[bytes, ProxyError | None]] = loop.create_future()

    def response_part(self, link: ShardLink, data: bytes) -> None:
        """Rows: never from a statement answering OK (a result set ends in ``response_done``)."""

    def response_done(self, link: ShardLink, data: bytes, rows: int, error: ShardErr | None) -> None:
        if self.done.done():
            return
        if error is not None:
            self.done.set_result((data, ShardError(link.keyspace, link.shard, error.code, error.message)))
        elif data[4:5] != b"\x00":  # a result set
            link.broken = True
            self.done.set_result((data, ShardUnavailable(link.keyspace, link.shard, "unexpected result set")))
        else:
            self.done.set_result((data, None))

    def link_lost(self, link: ShardLink, cause: str) -> None:
        if not self.done.done():
            self.done.set_result((b"", ShardUnavailable(link.keyspace, link.shard, cause)))
