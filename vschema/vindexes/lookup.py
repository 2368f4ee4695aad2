"""The lookup vindex family: keyspace ids read from a lookup table.

The lookup table (``params["table"]``, usually ``keyspace.table`` in another keyspace)
holds one row per (from-columns value, keyspace id). These classes are pure: they build
the SQL the engine runs against the lookup table's keyspace and interpret the rows it
gets back. Placeholders are ``%s`` (the PyMySQL / aiomysql paramstyle), in the order
documented on each builder. Table and column names are used as written in the vschema,
unqualified: the engine sends the statement to the lookup table's keyspace
(``table_keyspace``), whose database holds ``table_name``.

Types:
- ``lookup`` / ``lookup_unique``: the ``to`` column holds the keyspace id bytes.
- ``lookup_hash`` / ``lookup_hash_unique``: the ``to`` column holds a uint64 whose
  ``hash`` is the keyspace id.
- ``consistent_lookup`` / ``consistent_lookup_unique`` (``consistent = True``): rows
  are written before the owner row in a separate pre-commit connection; a duplicate on
  insert is resolved by locking the lookup row and the owner row (see the builders).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from vschema.vindexes.base import Vindex
from vschema.vindexes.hash import hash_uint64, unhash_keyspace_id
from vschema.vindexes.values import ValueConversionError, is_integral, to_bytes, to_uint64


def _bool_param(vindex: Vindex, key: str) -> bool:
    raw = vindex.params.get(key)
    if raw is None:
        return False
    if raw == "true":
        return True
    if raw == "false":
        return False
    raise vindex.error(f"{key} value must be 'true' or 'false': '{raw}'")


def _placeholders(n: int) -> str:
    return ", ".join(["%s"] * n)


class LookupVindex(Vindex):
    """Base of every lookup vindex: parameters and the SQL it needs."""

    needs_lookup = True
    consistent: ClassVar[bool] = False
    # lookup_hash stores a uint64 in the ``to`` column instead of the keyspace id.
    stores_hashed_id: ClassVar[bool] = False
    known_params = frozenset(
        {
            "table",
            "from",
            "to",
            "autocommit",
            "write_only",
            "ignore_nulls",
            "no_verify",
            "batch_lookup",
            "multi_shard_autocommit",
            "read_lock",
        }
    )

    def __init__(
        self, name: str, params: Mapping[str, str] | None = None, owner: str | None = None
    ) -> None:
        super().__init__(name, params, owner)
        for required in ("table", "from", "to"):
            if not self.params.get(required, "").strip():
                raise self.error(f"missing required parameter '{required}'")
        self.table: str = self.params["table"].strip()
        if self.table.count(".") > 1:
            raise self.error(f"invalid table {self.table!r}: expected 'table' or 'keyspace.table'")
        self.from_columns: list[str] = [c.strip() for c in self.params["from"].split(",")]
        if any(not c for c in self.from_columns):
            raise self.error(f"invalid from columns {self.params['from']!r}")
        self.to_column: str = self.params["to"].strip()
        self.autocommit: bool = _bool_param(self, "autocommit")
        self.write_only: bool = _bool_param(self, "write_only")
        self.ignore_nulls: bool = _bool_param(self, "ignore_nulls")
        self.no_verify: bool = _bool_param(self, "no_verify")
        if self.consistent and self.autocommit:
            raise self.error("autocommit is not supported by consistent lookup vindexes")
        # Vitess: a non-unique lookup with autocommit upserts its rows.
        self.upsert: bool = self.autocommit and not self.unique and not self.consistent
        # Set by the loader for owned vindexes (consistent lookups lock the owner row).
        self.owner_keyspace: str | None = None
        self.owner_columns: list[str] = []

    # -- naming -----------------------------------------------------------------------
    @property
    def table_keyspace(self) -> str | None:
        """Keyspace of the lookup table when ``table`` is qualified, else None."""
        return self.table.split(".", 1)[0] if "." in self.table else None

    @property
    def table_name(self) -> str:
        return self.table.rsplit(".", 1)[-1]

    def set_owner_info(self, keyspace: str, table: str, columns: Sequence[str]) -> None:
        """Record the owner table's columns feeding this vindex (done by the loader)."""
        if len(columns) != len(self.from_columns):
            raise self.error(
                f"owner table column count does not match vindex {self.name}: "
                f"{list(columns)} vs from columns {self.from_columns}"
            )
        self.owner_keyspace = keyspace
        self.owner = table
        self.owner_columns = list(columns)

    # -- reading ----------------------------------------------------------------------
    def lookup_query(self, n_values: int, for_update: bool = False) -> str:
        """``select from, to from tbl where from in (%s, ...)``: params are the values.

        Only the first from column takes part in reads, as in Vitess.
        """
        if n_values < 1:
            raise self.error("lookup_query needs at least one value")
        frm = self.from_columns[0]
        sql = (
            f"select {frm}, {self.to_column} from {self.table_name} "
            f"where {frm} in ({_placeholders(n_values)})"
        )
        return sql + " for update" if for_update else sql

    def batchable(self, values: Sequence[object]) -> bool:
        """Whether ``values`` can be looked up in one IN query.

        Vitess batches only integral values; other values are looked up one query per
        value, because the database compares them under its collation while the proxy
        could not reliably match returned rows to inputs.
        """
        return all(is_integral(v) for v in values)

    def ksid_from_row_value(self, to_value: object) -> bytes:
        """The keyspace id a ``to`` column value read from the lookup table stands for."""
        if self.stores_hashed_id:
            try:
                return hash_uint64(to_uint64(to_value, wrap_negative=False))
            except ValueConversionError as exc:
                raise self.error(f"lookup row has a non-numeric id {to_value!r}") from exc
        return to_bytes(to_value)

    def row_value_for_ksid(self, ksid: bytes) -> object:
        """What to store in the ``to`` column for a keyspace id."""
        if self.stores_hashed_id:
            return unhash_keyspace_id(ksid)
        return ksid

    def ksids_from_rows(
        self, values: Sequence[object], rows: Iterable[Sequence[object]]
    ) -> list[list[bytes]]:
        """Group ``(from, to)`` rows of a batched lookup by input value.

        Rows are matched to values by their raw bytes, as Vitess matches them by string
        form. For one-value queries every row belongs to that value.
        """
        by_key: dict[bytes, list[bytes]] = {}
        for row in rows:
            by_key.setdefault(to_bytes(row[0]), []).append(self.ksid_from_row_value(row[1]))
        if len(values) == 1:
            return [[k for ks in by_key.values() for k in ks]]
        return [list(by_key.get(to_bytes(v), [])) for v in values]

    def destinations(self, ksids_per_value: Sequence[Sequence[bytes]]) -> list[list[bytes] | None]:
        """Per value: its keyspace ids, or None when nothing is found (no shard).

        A unique lookup returning more than one keyspace id for a value is an error.
        """
        out: list[list[bytes] | None] = []
        for ksids in ksids_per_value:
            if not ksids:
                out.append(None)
                continue
            if self.unique and len(ksids) > 1:
                raise self.error(f"unexpected multiple results from lookup table {self.table}")
            out.append(list(ksids))
        return out

    def verify_query(self) -> str:
        """``select from from tbl where from = %s and to = %s``: params value, to-value."""
        frm = self.from_columns[0]
        return f"select {frm} from {self.table_name} where {frm} = %s and {self.to_column} = %s"

    # -- writing (owned vindexes) -----------------------------------------------------
    def insert_query(self, n_rows: int, ignore: bool = False) -> str:
        """Insert ``n_rows`` lookup rows; params per row: from columns..., to-value.

        Rows should be ordered by ``insert_rows`` (sorted like Vitess, NULL rows dropped).
        """
        if n_rows < 1:
            raise self.error("insert_query needs at least one row")
        cols = ", ".join([*self.from_columns, self.to_column])
        row = f"({_placeholders(len(self.from_columns) + 1)})"
        verb = "insert ignore into" if ignore else "insert into"
        sql = f"{verb} {self.table_name}({cols}) values " + ", ".join([row] * n_rows)
        if self.upsert:
            updates = ", ".join(f"{c}=values({c})" for c in [*self.from_columns, self.to_column])
            sql += f" on duplicate key update {updates}"
        return sql

    def insert_rows(
        self, rows_from_values: Sequence[Sequence[object]], ksids: Sequence[bytes]
    ) -> list[tuple[object, ...]]:
        """Parameter tuples for ``insert_query``: one per owner row, NULL rows handled.

        A row with a NULL from-value is skipped when ``ignore_nulls`` is set and is an
        error otherwise (Vitess's ``lookup.Create: input has null values``).
        """
        out: list[tuple[object, ...]] = []
        for i, (row, ksid) in enumerate(zip(rows_from_values, ksids, strict=True)):
            if len(row) != len(self.from_columns):
                raise self.error(
                    f"column vindex count does not match the columns in the lookup: "
                    f"{len(row)} vs {self.from_columns}"
                )
            null_col = next((j for j, v in enumerate(row) if v is None), None)
            if null_col is not None:
                if self.ignore_nulls:
                    continue
                raise self.error(f"input has null values: row: {i}, col: {null_col}")
            out.append((*row, self.row_value_for_ksid(ksid)))
        out.sort(key=lambda r: tuple(to_bytes(v) for v in r))
        return out

    def delete_query(self) -> str:
        """Delete one lookup row; params: from columns..., to-value.

        With ``autocommit`` Vitess never deletes lookup rows (it is not safe), so the
        engine should skip deletes when ``deletes_rows`` is False.
        """
        where = " and ".join(f"{c} = %s" for c in [*self.from_columns, self.to_column])
        return f"delete from {self.table_name} where {where}"

    @property
    def deletes_rows(self) -> bool:
        return not self.autocommit


class LookupNonUniqueVindex(LookupVindex):
    type_name = "lookup"
    cost = 20
    unique = False


class LookupUniqueVindex(LookupVindex):
    type_name = "lookup_unique"
    cost = 10
    unique = True


class LookupHashVindex(LookupVindex):
    type_name = "lookup_hash"
    cost = 20
    unique = False
    stores_hashed_id = True


class LookupHashUniqueVindex(LookupVindex):
    type_name = "lookup_hash_unique"
    cost = 10
    unique = True
    stores_hashed_id = True
