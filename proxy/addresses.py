"""Host addresses: which ones stay on this machine, and whether a shard's Unix socket answers."""

from __future__ import annotations

import ipaddress
import logging
import socket

logger = logging.getLogger(__name__)

# Sockets already reported as unusable: the warning is logged once per path and process.
_warned: set[str] = set()
_PROBE_TIMEOUT_S = 1.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address or ``localhost``) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def usable_socket(path: str | None, host: str, port: int) -> str | None:
    """``path`` when a server accepts connections on that Unix socket, else None: connect to
    ``host:port`` over TCP instead (a moved data dir, a stale socket file of a crashed server or a
    wrong path must not take a shard away). The probe is a bare connect, closed before the
    server's greeting is answered; callers probe when they open a pool or a binlog connection,
    not per statement."""
    if path is None:
        return None
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(_PROBE_TIMEOUT_S)
        probe.connect(path)
    except OSError as e:
        if path not in _warned:
            _warned.add(path)
            logger.warning(
                "shard socket unusable, using TCP",
                extra={"socket": path, "host": host, "port": port, "error": str(e)},
            )
        return None
    finally:
        probe.close()
    return path
