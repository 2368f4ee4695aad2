"""Vitess-compatible vschema: keyspaces, shards and key ranges, tables, vindexes.

Pure code: no networking, no I/O except reading a vschema file (``loader``) and, once,
the x/text collation table the ``unicode_loose_*`` vindexes need.

- ``vschema.loader``: ``build_vschema`` / ``load_keyspace`` from Vitess vschema JSON,
  ``vschema_to_json`` back.
- ``vschema.model``: ``VSchema`` (``find_table``, ``shard_for``, ``shards``),
  ``Keyspace``, ``Table``, ``ColumnVindex``.
- ``vschema.keyrange``: shard names as key ranges; keyspace id -> shard.
- ``vschema.vindexes``: every vindex type and ``create_vindex``.
- ``vschema.errors``: ``VSchemaError`` and its subclasses.
"""
