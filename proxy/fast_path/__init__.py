"""The fast path: point selects, single-row INSERTs and explicit transactions of such statements
answered at the protocol level.

- ``protocol``: the client side (``install_fast_path``, ``ClientFastPath``), in front of the
  connection's StreamReader once mysql-mimic has finished the handshake;
- ``routing``: which statements qualify (cached plan, one shard) and their shard query;
- ``shard_link``: the fast path's own shard connections, which frame a response and
  hand it over in one block, and ``PinnedLink``: the same over a transaction's pooled
  shard connection.

What the fast path does not serve goes to the normal path unchanged.
"""
