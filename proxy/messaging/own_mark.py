"""The comment that marks this proxy process's own INSERTs into a message table.

The binlog watch (``change_watch``) exists for rows written *around* the proxy. Rows the proxy
inserted itself are cached from the INSERT's values or polled at its COMMIT
(``ProxySession.wrote``, ``proxy.messaging.inserted``), yet the shards' binlogs showed them to
the watch too: a transaction's row events decoded and sent to the proxy only to be matched
with a cached commit and dropped (in ``bench_messaging`` ~15% of a decoder, 4-7% of the proxy).

Every INSERT into a message table that this process learns of by itself is sent with a leading
``/*shardgate-own <token> <table>*/`` comment (``token``: random per process). MariaDB writes
the statement's text in the ``ANNOTATE_ROWS`` event before its row events; the watch's
decoders ask for those events and drop the row events under an annotate holding this
process's mark for the watched table (``proxy.cdc.group_skipper``). Another proxy's mark, a
statement without one, a trigger's or a stored function's rows written into another table
(the mark names the table): all read as before.

What is marked is what the proxy learns of exactly: a planned or fast-path INSERT ... VALUES
whose success is reported to messaging (``ProxySession.wrote``), in a ``multi`` or ``single``
session (a ``twopc`` commit may be finished later by the resolver: not marked). When such a
statement's outcome is unknown (an error, a lost shard) the table's managers poll
(``MessagingService.in_doubt``); a COMMIT that fails polls its inserts' shards as well.
"""

from __future__ import annotations

import functools
import os
import re
import secrets

PREFIX = "/*shardgate-own "
_NAME = re.compile(r"^\w+$")
# Per process: a forked worker (``serve``'s SO_REUSEPORT workers) draws its own at the fork, so
# each process's watch skips only the rows that process learns of.
_token = secrets.token_hex(16)


@functools.cache
def mark(table: str) -> str:
    """The comment put before an own INSERT into ``table`` ("" for a name a comment cannot hold);
    made once per table (it goes before every such INSERT), anew in a forked child."""
    name = table.lower()
    return f"{PREFIX}{_token} {name}*/ " if _NAME.match(name) else ""


def _drawn_anew() -> None:
    global _token
    _token = secrets.token_hex(16)
    mark.cache_clear()


os.register_at_fork(after_in_child=_drawn_anew)


def needle(table: str) -> bytes:
    """What the watch of ``table`` looks for in an ``ANNOTATE_ROWS`` event."""
    return mark(table).rstrip().encode()


def is_marked(statement: str) -> bool:
    """Whether ``statement`` was sent with this process's mark (its rows skipped by the watch)."""
    return statement.startswith(PREFIX) and statement.startswith(_token, len(PREFIX))
