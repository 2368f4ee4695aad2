"""Host addresses: which ones stay on this machine, and whether a shard's Unix socket is there."""

from __future__ import annotations

import ipaddress
import logging
import os
import stat

logger = logging.getLogger(__name__)

# Sockets already reported as unusable: the warning is logged once per path and process.
_warned: set[str] = set()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address or ``localhost``) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def usable_socket(path: str | None, host: str, port: int) -> str | None:
    """``path`` when it is a Unix socket, else None: connect to ``host:port`` over TCP instead
    (a moved data dir or a wrong path must not take a shard away). Only the file is looked at:
    a connect would cost the server a session and an "Aborted connection" line in its log, so a
    socket nobody listens on is found by the first real connection (pools.ShardPool)."""
    if path is None:
        return None
    try:
        if stat.S_ISSOCK(os.stat(path).st_mode):
            return path
        error = "not a socket"
    except OSError as e:
        error = str(e)
    warn_unusable_socket(path, host, port, error)
    return None


def warn_unusable_socket(path: str, host: str, port: int, error: str) -> None:
    """The warning that ``path`` is not used (once per path and process)."""
    if path not in _warned:
        _warned.add(path)
        logger.warning(
            "shard socket unusable, using TCP",
            extra={"socket": path, "host": host, "port": port, "error": error},
        )


def socket_refused(error: BaseException) -> bool:
    """Whether a client library's connect error (aiomysql chains the OSError as the cause,
    PyMySQL raises inside its handler) says nothing listens on the socket or it is gone."""
    cause = error.__cause__ or error.__context__
    return isinstance(cause, ConnectionRefusedError | FileNotFoundError)
