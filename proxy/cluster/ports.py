"""Checking and finding free TCP ports on the loopback interface."""

from __future__ import annotations

import random
import socket

LOOPBACK = "127.0.0.1"


def port_is_free(port: int, host: str = LOOPBACK) -> bool:
    """True when nothing listens on host:port (a bind succeeds).

    SO_REUSEADDR as servers set it: connections of a stopped server lingering in
    TIME_WAIT do not make the port busy for its restart."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def find_free_port_range(
    count: int, host: str = LOOPBACK, *, low: int = 20000, high: int = 32000, attempts: int = 200
) -> int:
    """Return a port p such that p .. p+count-1 are all free right now.

    Chosen at random inside [low, high) so parallel test sessions rarely race for the same range;
    the default range stays below Linux's ephemeral ports (32768+), which outgoing connections
    take without asking.
    """
    if count < 1:
        raise ValueError("count must be at least 1")
    rng = random.Random()
    for _ in range(attempts):
        start = rng.randrange(low, high - count)
        if all(port_is_free(p, host) for p in range(start, start + count)):
            return start
    raise RuntimeError(f"no run of {count} free ports found in {low}..{high} on {host}")
