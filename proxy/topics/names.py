"""Topic names, where a topic lives, and the names of its tables on that shard.

A topic ``t`` of keyspace ``ks`` lives on one shard of ``ks``: in a sharded keyspace the
shard whose key range holds md5(name) (as Vitess's ``binary_md5`` vindex would place a row
keyed by the name), so a keyspace's topics spread over its shards; in an unsharded keyspace
its only shard. Every proxy computes the same placement from the name alone.

On that shard the topic is three things:

* ``_tms_topics``: one metadata row per topic ever created there (generation, TTL, CDAP
  properties, and the sequencer's high-water mark, which survives drop and re-create so ids
  never go backwards);
* ``_tms_<t>``: the log, every message row, sequenced or not;
* the view ``<t>``: what clients read and insert into — sequenced, unexpired rows only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from proxy.errors import ER_WRONG_TABLE_NAME, ProxyError
from vschema.internal_tables import PREFIX
from vschema.keyrange import shard_for_keyspace_id

LOG_PREFIX = PREFIX  # the proxy's own tables, hidden from users (vschema.internal_tables)
META_TABLE = LOG_PREFIX + "topics"
MAX_NAME = 48
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")


def check_name(name: str) -> str:
    """A valid topic name (CDAP's characters: letters, digits, ``_`` and ``-``)."""
    if not name or len(name) > MAX_NAME or not _NAME.match(name) or name.lower().startswith(LOG_PREFIX):
        raise ProxyError(
            ER_WRONG_TABLE_NAME,
            f"Incorrect topic name '{name}': use 1-{MAX_NAME} letters, digits, '_' or '-', not starting"
            f" with '-' or '{LOG_PREFIX}'",
            "42000",
        )
    return name


def log_table(name: str) -> str:
    return LOG_PREFIX + name


def keyspace_id(name: str) -> bytes:
    """The keyspace id a topic is placed by (the planner pins the topic's table to it)."""
    return hashlib.md5(name.encode()).digest()


def place(keyspace: str, shards: Sequence[str], sharded: bool, name: str) -> str:
    """The shard of ``keyspace`` that holds topic ``name``."""
    if not sharded or len(shards) == 1:
        return shards[0]
    return shard_for_keyspace_id(keyspace, shards, keyspace_id(name))
