"""Rows for SQL ``VSTREAM * FROM t [WHERE pos > '<vgtid>'] [LIMIT n]``.

Each row change becomes ``(op, <table columns...>, vgtid)`` as Vitess streams it: op
``+`` insert (after image), ``*`` update (after image), ``-`` delete (before image).
The trailing ``vgtid`` column (ours, not Vitess's) is the JSON position after the row's
transaction, so a SQL client can resume with ``WHERE pos > '<that value>'``. Rows of a
``snapshot`` start's table copy have none, except the copy's very last row.

Column order comes from the table's FIELD event, which a stream sends only before the
table's first row; the formatter remembers it across groups, so use one formatter per
stream and table.
"""

from __future__ import annotations

from typing import Any

from proxy.cdc.events import EventGroup, FieldEvent, RowEvent, RowOp

OP_COLUMN = "op"
VGTID_COLUMN = "vgtid"

_OP_SIGNS = {RowOp.INSERT: "+", RowOp.UPDATE: "*", RowOp.DELETE: "-"}


class VStreamRowFormatter:
    def __init__(self, table_name: str) -> None:
        """``table_name`` is ``keyspace.table`` as the stream names it."""
        self.table_name = table_name
        self.columns: list[str] | None = None
        self.column_types: list[str] | None = None

    @property
    def column_names(self) -> list[str]:
        """``op``, the table's columns, ``vgtid`` (known once the table's FIELD was seen)."""
        if self.columns is None:
            raise LookupError(f"no FIELD event seen yet for {self.table_name}")
        return [OP_COLUMN, *self.columns, VGTID_COLUMN]

    def rows(self, group: EventGroup) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        copied = False
        vgtid = group.vgtid.to_json() if group.vgtid is not None else None
        for event in group.events:
            if isinstance(event, FieldEvent) and event.table_name == self.table_name:
                self.columns = [f.name for f in event.fields]
                self.column_types = [f.type for f in event.fields]
            elif isinstance(event, RowEvent) and event.table_name == self.table_name:
                if self.columns is None:
                    raise LookupError(f"ROW before FIELD for {self.table_name}")
                sign = _OP_SIGNS[event.op]
                columns = self.columns
                for change in event.changes:
                    image = change.before if event.op is RowOp.DELETE else change.after
                    assert image is not None
                    out.append((sign, *(image.get(c) for c in columns), vgtid))
                copied = copied or event.copied
        if copied and vgtid is not None:
            # A copied group is no transaction: only its last row is a resume point.
            out[:-1] = [(*row[:-1], None) for row in out[:-1]]
        return out
