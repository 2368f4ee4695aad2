"""Build the vschema model from Vitess vschema JSON (what ``ApplyVSchema`` accepts).

Per keyspace the document looks like::

    {"sharded": true,
     "vindexes": {"hash": {"type": "hash"},
                  "name_keyspace_idx": {"type": "lookup", "owner": "customer",
                                        "params": {"table": "lookup.name_idx",
                                                   "from": "name", "to": "keyspace_id"}}},
     "tables": {"customer": {"column_vindexes": [{"column": "customer_id", "name": "hash"},
                                                 {"column": "name", "name": "name_keyspace_idx"}],
                             "auto_increment": {"column": "customer_id",
                                                "sequence": "customer_seq"}},
                "corder_seq": {"type": "sequence"}}}

Routing rules: ``{"rules": [{"from_table": "t" | "ks.t", "to_tables": ["ks2.t"]}]}``.

Errors name the keyspace, table and vindex concerned; the wording after the
``keyspace <ks>:`` prefix is Vitess's where Vitess has one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

from vschema.errors import InvalidVSchema, VindexError, VSchemaError
from vschema.keyrange import ShardMap
from vschema.model import (
    TABLE_TYPE_REFERENCE,
    TABLE_TYPE_SEQUENCE,
    TABLE_TYPES,
    AutoIncrement,
    Column,
    ColumnVindex,
    Keyspace,
    RoutingRule,
    Table,
    VSchema,
)
from vschema.vindexes.base import Vindex
from vschema.vindexes.lookup import LookupVindex
from vschema.vindexes.registry import create_vindex

logger = logging.getLogger(__name__)

_KEYSPACE_FIELDS = {
    "sharded",
    "vindexes",
    "tables",
    "require_explicit_routing",
    "foreign_key_mode",
    "multi_tenant_spec",
}
_VINDEX_FIELDS = {"type", "params", "owner"}
_TABLE_FIELDS = {
    "type",
    "column_vindexes",
    "auto_increment",
    "columns",
    "pinned",
    "column_list_authoritative",
    "source",
}
_COLUMN_VINDEX_FIELDS = {"column", "name", "columns"}
_AUTO_INCREMENT_FIELDS = {"column", "sequence"}
_COLUMN_FIELDS = {
    "name",
    "type",
    "invisible",
    "default",
    "collation_name",
    "size",
    "scale",
    "nullable",
    "values",
}


def load_vschema_file(path: str | PathLike[str]) -> dict[str, Any]:
    """Read a vschema (or routing rules) JSON document from a file."""
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict):
        raise InvalidVSchema(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def _check_fields(where: str, obj: object, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise InvalidVSchema(f"{where}: expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise InvalidVSchema(f"{where}: unknown field {unknown[0]!r}")
    return obj


def _string(where: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidVSchema(f"{where}: expected a string, got {json.dumps(value)}")
    return value


def _bool(where: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidVSchema(f"{where}: expected true or false, got {json.dumps(value)}")
    return value


def load_keyspace(name: str, vschema: Mapping[str, Any] | None, shards: Sequence[str]) -> Keyspace:
    """Build one keyspace from its vschema JSON and its shard names.

    References to other keyspaces (sequences, reference sources) are resolved by
    ``build_vschema``, as Vitess's per-keyspace validation also leaves them out.
    """
    where = f"keyspace {name}"
    doc = _check_fields(where, vschema or {}, _KEYSPACE_FIELDS)
    sharded = _bool(f"{where}: sharded", doc.get("sharded", False))
    shard_map = ShardMap(name, shards)
    if not sharded and len(shard_map.names) != 1:
        raise InvalidVSchema(
            f"{where}: an unsharded keyspace has exactly one shard, got {shard_map.names}"
        )

    vindex_docs = doc.get("vindexes") or {}
    if not isinstance(vindex_docs, Mapping):
        raise InvalidVSchema(f"{where}: vindexes: expected a JSON object")
    table_docs = doc.get("tables") or {}
    if not isinstance(table_docs, Mapping):
        raise InvalidVSchema(f"{where}: tables: expected a JSON object")

    vindexes = {vname: _load_vindex(where, vname, vdoc) for vname, vdoc in vindex_docs.items()}
    tables: dict[str, Table] = {}
    for tname, tdoc in table_docs.items():
        tables[tname] = _load_table(where, name, sharded, tname, tdoc, vindexes)

    for vname, vindex in vindexes.items():
        if vindex.owner is not None and vindex.owner not in tables:
            raise InvalidVSchema(
                f"{where}: owner table {vindex.owner} of vindex {vname} not found in keyspace"
            )
        if vindex.owner is not None and not isinstance(vindex, LookupVindex):
            logger.warning(
                "owner ignored on a functional vindex",
                extra={"keyspace": name, "vindex": vname, "owner": vindex.owner},
            )

    if "dual" not in tables:
        tables["dual"] = Table(name="dual", keyspace=name, type=TABLE_TYPE_REFERENCE, implicit=True)
    return Keyspace(
        name=name,
        sharded=sharded,
        vindexes=vindexes,
        tables=tables,
        shard_map=shard_map,
        require_explicit_routing=_bool(
            f"{where}: require_explicit_routing", doc.get("require_explicit_routing", False)
        ),
        foreign_key_mode=doc.get("foreign_key_mode"),
    )


def _load_vindex(where: str, vname: str, vdoc: object) -> Vindex:
    here = f"{where}: vindex {vname}"
    vdoc = _check_fields(here, vdoc, _VINDEX_FIELDS)
    vtype = _string(f"{here}: type", vdoc.get("type", ""))
    params = vdoc.get("params") or {}
    if not isinstance(params, Mapping):
        raise InvalidVSchema(f"{here}: params: expected a JSON object of strings")
    for key, value in params.items():
        _string(f"{here}: params: {key}", value)
    owner = vdoc.get("owner") or None
    if owner is not None:
        _string(f"{here}: owner", owner)
    try:
        vindex = create_vindex(vname, vtype, params, owner)
    except VindexError as exc:
        raise InvalidVSchema(f"{where}: {exc}") from exc
    if vindex.unknown_params:
        logger.warning(
            "vindex has parameters its type does not use",
            extra={"where": where, "vindex": vname, "params": vindex.unknown_params},
        )
    return vindex


def _load_table(
    where: str,
    ks_name: str,
    sharded: bool,
    tname: str,
    tdoc: object,
    vindexes: Mapping[str, Vindex],
) -> Table:
    here = f"{where}: table {tname}"
    tdoc = _check_fields(here, tdoc or {}, _TABLE_FIELDS)
    ttype = _string(f"{here}: type", tdoc.get("type", ""))
    if ttype not in TABLE_TYPES:
        raise InvalidVSchema(f"{here}: unidentified table type {ttype}")
    pinned_hex = _string(f"{here}: pinned", tdoc.get("pinned", ""))
    pinned = None
    if pinned_hex:
        try:
            pinned = bytes.fromhex(pinned_hex)
        except ValueError as exc:
            raise InvalidVSchema(
                f"{here}: could not decode the keyspace id for pin: {pinned_hex!r}"
            ) from exc
    if ttype == TABLE_TYPE_SEQUENCE and sharded and pinned is None:
        raise InvalidVSchema(
            f"{where}: sequence table has to be in an unsharded keyspace or must be pinned: {tname}"
        )
    source = tdoc.get("source") or None
    if source is not None:
        _string(f"{here}: source", source)
        if ttype != TABLE_TYPE_REFERENCE:
            raise InvalidVSchema(f"{here}: source is only allowed on reference tables")
        if source.count(".") != 1:
            raise InvalidVSchema(
                f"{where}: invalid source {source!r} for reference table: {tname}; it must be "
                f"of the qualified form <keyspace_name>.<table_name>"
            )
        if source.split(".")[0] == ks_name:
            raise InvalidVSchema(
                f"{where}: source {source!r} may not reference a table in the same keyspace "
                f"as table: {tname}"
            )

    cv_docs = tdoc.get("column_vindexes") or []
    if not isinstance(cv_docs, list):
        raise InvalidVSchema(f"{here}: column_vindexes: expected a JSON array")
    if sharded and ttype != TABLE_TYPE_REFERENCE and pinned is None and not cv_docs:
        raise InvalidVSchema(f"{where}: missing primary col vindex for table: {tname}")

    columns: list[Column] = []
    seen: set[str] = set()
    col_docs = tdoc.get("columns") or []
    if not isinstance(col_docs, list):
        raise InvalidVSchema(f"{here}: columns: expected a JSON array")
    for cdoc in col_docs:
        cdoc = _check_fields(f"{here}: columns", cdoc, _COLUMN_FIELDS)
        cname = _string(f"{here}: columns: name", cdoc.get("name", ""))
        if not cname:
            raise InvalidVSchema(f"{here}: columns: a column has no name")
        if cname.lower() in seen:
            raise InvalidVSchema(f"{where}: duplicate column name '{cname}' for table: {tname}")
        seen.add(cname.lower())
        ctype = cdoc.get("type")
        columns.append(Column(cname, ctype if isinstance(ctype, str) else None))

    column_vindexes = []
    for i, cvdoc in enumerate(cv_docs):
        cvdoc = _check_fields(f"{here}: column_vindexes[{i}]", cvdoc, _COLUMN_VINDEX_FIELDS)
        vname = _string(f"{here}: column_vindexes[{i}]: name", cvdoc.get("name", ""))
        vindex = vindexes.get(vname)
        if vindex is None:
            raise InvalidVSchema(f"{where}: vindex {vname} not found for table {tname}")
        column = cvdoc.get("column") or ""
        cols = cvdoc.get("columns") or []
        if column:
            if cols:
                raise InvalidVSchema(
                    f"{where}: can't use column and columns at the same time in vindex "
                    f"({vname}) and table ({tname})"
                )
            cols = [_string(f"{here}: column_vindexes[{i}]: column", column)]
        else:
            if not isinstance(cols, list) or not cols:
                raise InvalidVSchema(
                    f"{where}: must specify at least one column for vindex ({vname}) and "
                    f"table ({tname})"
                )
            cols = [_string(f"{here}: column_vindexes[{i}]: columns", c) for c in cols]
        owned = isinstance(vindex, LookupVindex) and vindex.owner == tname
        if i == 0:
            if not vindex.unique:
                raise InvalidVSchema(
                    f"{where}: primary vindex {vname} is not Unique for table {tname}"
                )
            if owned:
                raise InvalidVSchema(
                    f"{where}: primary vindex {vname} cannot be owned for table {tname}"
                )
        if owned:
            try:
                vindex.set_owner_info(ks_name, tname, cols)  # type: ignore[attr-defined]  # owned vindexes (lookups) define set_owner_info
            except VindexError as exc:
                raise InvalidVSchema(f"{where}: table {tname}: {exc}") from exc
        column_vindexes.append(ColumnVindex(columns=cols, name=vname, vindex=vindex, owned=owned))

    auto_increment = None
    if tdoc.get("auto_increment"):
        adoc = _check_fields(
            f"{here}: auto_increment", tdoc["auto_increment"], _AUTO_INCREMENT_FIELDS
        )
        acol = _string(f"{here}: auto_increment: column", adoc.get("column", ""))
        aseq = _string(f"{here}: auto_increment: sequence", adoc.get("sequence", ""))
        if not acol or not aseq:
            raise InvalidVSchema(f"{here}: auto_increment needs both column and sequence")
        auto_increment = AutoIncrement(column=acol, sequence=aseq)

    return Table(
        name=tname,
        keyspace=ks_name,
        type=ttype,
        column_vindexes=column_vindexes,
        auto_increment=auto_increment,
        pinned=pinned,
        columns=columns,
        column_list_authoritative=bool(tdoc.get("column_list_authoritative", False)),
        source=source,
    )


def build_vschema(
    keyspaces: Mapping[str, tuple[Mapping[str, Any] | None, Sequence[str]]],
    routing_rules: Mapping[str, Any] | None = None,
) -> VSchema:
    """Build the whole vschema: every keyspace, then cross-keyspace references
    (sequences, reference sources) and routing rules."""
    built = {name: load_keyspace(name, doc, shards) for name, (doc, shards) in keyspaces.items()}
    vschema = VSchema(built)
    _resolve_references(vschema)
    _resolve_sequences(vschema)
    vschema.routing_rules = _load_routing_rules(vschema, routing_rules)
    logger.info(
        "vschema built",
        extra={
            "keyspaces": sorted(built),
            "tables": sum(len(ks.tables) for ks in built.values()),
            "routing_rules": len(vschema.routing_rules),
        },
    )
    return vschema


def _resolve_references(vschema: VSchema) -> None:
    for ks in vschema.keyspaces.values():
        for table in ks.tables.values():
            if table.source is None:
                continue
            src_ks, src_table = table.source.split(".")
            if src_ks not in vschema.keyspaces:
                raise InvalidVSchema(
                    f"keyspace {ks.name}: source {table.source!r} references a non-existent "
                    f"keyspace {src_ks!r} (table {table.name})"
                )
            target = vschema.keyspaces[src_ks].tables.get(src_table)
            if target is None:
                raise InvalidVSchema(
                    f"keyspace {ks.name}: source {table.source!r} references a table "
                    f"{src_table!r} that is not present in the VSchema of keyspace {src_ks!r} "
                    f"(table {table.name})"
                )
            if target.type not in ("", TABLE_TYPE_REFERENCE):
                raise InvalidVSchema(
                    f"keyspace {ks.name}: source {table.source!r} may not reference a table "
                    f"of type {target.type!r}: {table.name}"
                )
            if target.source is not None:
                raise InvalidVSchema(
                    f"keyspace {ks.name}: reference chaining is not allowed "
                    f"{table.name} => {target.qualified_name} => {target.source}: {table.name}"
                )


def _resolve_sequences(vschema: VSchema) -> None:
    for ks in vschema.keyspaces.values():
        for table in ks.tables.values():
            ai = table.auto_increment
            if ai is None:
                continue
            try:
                seq = vschema.find_table_without_routing(*_split_qualified(ai.sequence))
            except VSchemaError as exc:
                raise InvalidVSchema(
                    f"keyspace {ks.name}: table {table.name}: cannot resolve sequence "
                    f"{ai.sequence}: {exc}"
                ) from exc
            if not seq.is_sequence and not seq.implicit:
                raise InvalidVSchema(
                    f"keyspace {ks.name}: table {table.name}: auto_increment sequence "
                    f"{ai.sequence} is a table of type {seq.type or 'normal'!r}, not 'sequence'"
                )
            ai.sequence_table = seq


def _split_qualified(name: str) -> tuple[str, str | None]:
    if "." in name:
        ks, table = name.split(".", 1)
        return table, ks
    return name, None


def _load_routing_rules(vschema: VSchema, doc: Mapping[str, Any] | None) -> dict[str, RoutingRule]:
    if not doc:
        return {}
    doc = _check_fields("routing rules", doc, {"rules"})
    rules = doc.get("rules") or []
    if not isinstance(rules, list):
        raise InvalidVSchema("routing rules: rules: expected a JSON array")
    out: dict[str, RoutingRule] = {}
    for i, rdoc in enumerate(rules):
        rdoc = _check_fields(f"routing rules: rules[{i}]", rdoc, {"from_table", "to_tables"})
        from_table = _string(f"routing rules: rules[{i}]: from_table", rdoc.get("from_table", ""))
        to_tables = rdoc.get("to_tables") or []
        if not from_table or not isinstance(to_tables, list):
            raise InvalidVSchema(
                f"routing rules: rules[{i}]: needs from_table and a to_tables array"
            )
        to_tables = [_string(f"routing rules: {from_table}: to_tables", t) for t in to_tables]
        rule = RoutingRule(from_table=from_table, to_tables=to_tables)
        if from_table in out:
            rule.error = VSchemaError(f"duplicate rule for entry {from_table}")
        elif len(to_tables) > 1:
            rule.error = VSchemaError(f"table {from_table} has more than one target: {to_tables}")
        else:
            for target in to_tables:
                if target.count(".") != 1:
                    rule.error = VSchemaError(
                        f"invalid table name: {target}, it must be of the qualified form "
                        f"<keyspace_name>.<table_name> (dots are not allowed in either name)"
                    )
                    break
                ks_name, tname = target.split(".")
                try:
                    rule.tables.append(vschema.find_table_without_routing(tname, ks_name))
                except VSchemaError as exc:
                    rule.error = exc
                    break
        if rule.error is not None:
            logger.warning(
                "routing rule cannot be used",
                extra={"from_table": from_table, "error": str(rule.error)},
            )
        out[from_table] = rule
    return out


def vschema_to_json(keyspace: Keyspace) -> dict[str, Any]:
    """The persisted vschema JSON of a keyspace (empty fields left out, as Vitess does)."""
    out: dict[str, Any] = {}
    if keyspace.sharded:
        out["sharded"] = True
    if keyspace.require_explicit_routing:
        out["require_explicit_routing"] = True
    if keyspace.foreign_key_mode:
        out["foreign_key_mode"] = keyspace.foreign_key_mode
    vindexes: dict[str, Any] = {}
    for vname in sorted(keyspace.vindexes):
        vindex = keyspace.vindexes[vname]
        vdoc: dict[str, Any] = {"type": vindex.type_name}
        if vindex.params:
            vdoc["params"] = dict(sorted(vindex.params.items()))
        if vindex.owner:
            vdoc["owner"] = vindex.owner
        vindexes[vname] = vdoc
    if vindexes:
        out["vindexes"] = vindexes
    tables: dict[str, Any] = {}
    for tname in sorted(keyspace.tables):
        table = keyspace.tables[tname]
        if table.implicit:
            continue
        tdoc: dict[str, Any] = {}
        if table.type:
            tdoc["type"] = table.type
        if table.column_vindexes:
            tdoc["column_vindexes"] = [
                {"column": cv.columns[0], "name": cv.name}
                if len(cv.columns) == 1
                else {"columns": list(cv.columns), "name": cv.name}
                for cv in table.column_vindexes
            ]
        if table.auto_increment is not None:
            tdoc["auto_increment"] = {
                "column": table.auto_increment.column,
                "sequence": table.auto_increment.sequence,
            }
        if table.pinned is not None:
            tdoc["pinned"] = table.pinned.hex()
        if table.columns:
            tdoc["columns"] = [
                {"name": c.name, "type": c.type} if c.type else {"name": c.name}
                for c in table.columns
            ]
        if table.column_list_authoritative:
            tdoc["column_list_authoritative"] = True
        if table.source:
            tdoc["source"] = table.source
        tables[tname] = tdoc
    if tables:
        out["tables"] = tables
    return out
