"""The fast path: point selects, single-row INSERTs and explicit transactions of such statements
answered at the protocol level; autocommit writes reaching several shards (an INSERT's rows split
per shard, an UPDATE / DELETE by an IN-list) run in their implicit transaction without the
command loop.

- ``protocol``: the client side (``install_fast_path``, ``ClientFastPath``), in front of the
  connection's StreamReader once mysql-mimic has finished the handshake;
- ``routing``: which statements qualify (cached plan, one shard, or an autocommit write's
  several) and their shard queries;
- ``several``: an autocommit write to several shards, in the session's implicit transaction;
- ``shard_link``: the fast path's own shard connections, which frame a response and
  hand it over in one block, and ``PinnedLink``: the same over a transaction's pooled
  shard connection.

What the fast path does not serve goes to the normal path unchanged.
"""
