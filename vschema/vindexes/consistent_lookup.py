"""``consistent_lookup`` and ``consistent_lookup_unique``.

Vitess keeps these lookup tables consistent with their owner table without 2PC: lookup
rows are inserted (and deleted) through a separate connection *before* the owner row is
written, and a duplicate-key error on insert is resolved like this:

1. ``lock_lookup_query``: ``select to from lkp where from = %s ... for update``;
2. if the row already points to the new keyspace id, nothing to do;
3. otherwise ``lock_owner_query`` on the shard of the existing keyspace id: if the
   owner row still exists the insert is a real duplicate (error); if it does not, the
   lookup row is stale and ``update_lookup_query`` repoints it to the new keyspace id.
"""

from __future__ import annotations

from vschema.vindexes.lookup import LookupVindex


class ConsistentLookupBase(LookupVindex):
    consistent = True

    def _where(self, columns: list[str]) -> str:
        return " and ".join(f"{c} = %s" for c in columns)

    def lock_lookup_query(self) -> str:
        """Params: the from-column values."""
        return (
            f"select {self.to_column} from {self.table_name} "
            f"where {self._where(self.from_columns)} for update"
        )

    def lock_owner_query(self) -> str:
        """Params: the owner columns' values (same as the from-column values)."""
        if not self.owner_columns or self.owner is None:
            raise self.error("has no owner table: cannot build the owner lock query")
        return (
            f"select {self.owner_columns[0]} from {self.owner} "
            f"where {self._where(self.owner_columns)} lock in share mode"
        )

    def update_lookup_query(self) -> str:
        """Params: the new to-value, then the from-column values."""
        return (
            f"update {self.table_name} set {self.to_column} = %s "
            f"where {self._where(self.from_columns)}"
        )


class ConsistentLookupVindex(ConsistentLookupBase):
    type_name = "consistent_lookup"
    cost = 20
    unique = False


class ConsistentLookupUniqueVindex(ConsistentLookupBase):
    type_name = "consistent_lookup_unique"
    cost = 10
    unique = True
