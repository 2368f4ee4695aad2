"""Replication ``server_id``s for binlog readers.

A binlog dump connection registers with a server id, and the server kicks off an
existing dump with the same id (error 4052), so every concurrent reader needs its own.
Ids are drawn from a per-process random base far above the small ids shards use, then
counted up, so readers of one process never collide and two processes almost never do.
"""

from __future__ import annotations

import itertools
import random
import threading

_FIRST_ID = 1 << 24
_LAST_ID = (1 << 32) - 1
_BLOCK = 1 << 16

_lock = threading.Lock()
_counter = itertools.count(random.randrange(_FIRST_ID, _LAST_ID - _BLOCK))


def next_replica_server_id() -> int:
    with _lock:
        return next(_counter)
