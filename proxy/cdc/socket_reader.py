"""The binlog connection's read buffer, with its fill level in sight.

After each transaction the decoder must know whether its next read will return at once
(more of the binlog has already arrived: let the transaction wait for a batch) or block (send
what it holds now). PyMySQL reads through a ``BufferedReader``, whose fill level is hidden, so
the check had to ask the socket (``select``) every time: a syscall per transaction.
This reader replaces PyMySQL's ``_rfile`` on the connections the binlog library opens: it
reads the socket in large chunks and answers ``buffered`` from memory.
"""

from __future__ import annotations

import socket

from proxy import pymysql_internals

# Below glibc's mmap threshold: a larger recv buffer is mapped and unmapped on every call.
CHUNK = 32 * 1024


class BufferedSocketReader:
    __slots__ = ("_sock", "_buf", "_pos")

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buf = b""
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not read yet."""
        return len(self._buf) - self._pos

    def read(self, n: int) -> bytes:
        """``n`` bytes, fewer only if the connection closed first (as ``BufferedReader.read``)."""
        pos = self._pos
        end = pos + n
        if end <= len(self._buf):
            self._pos = end
            return self._buf[pos:end]
        parts = [self._buf[pos:]]
        have = len(parts[0])
        while have < n:
            chunk = self._sock.recv(max(CHUNK, n - have))
            if not chunk:
                self._buf, self._pos = b"", 0
                return b"".join(parts)
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self._buf, self._pos = data, n
        return data[:n]

    def close(self) -> None:
        self._buf, self._pos = b"", 0


def install(conn: object) -> BufferedSocketReader:
    """Make PyMySQL connection ``conn`` read through a BufferedSocketReader (right after it
    connected, when nothing is in flight)."""
    reader = BufferedSocketReader(pymysql_internals.raw_socket(conn))
    pymysql_internals.replace_reader(conn, reader)
    return reader
