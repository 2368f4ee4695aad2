"""Online resharding (Vitess's Reshard workflow): split or merge a keyspace's shards while it serves.

Serving side (what every proxy process and the workflow's switch call): ``topology`` (the serving
shards of a keyspace, persisted), ``denied_writes`` (writes stopped on source shards at the
switch), ``journal`` (the record written into the sources' binlogs). The workflow itself (copy,
catch-up, vdiff, switch orchestration, CLI) lives in the other modules of this package.
"""
