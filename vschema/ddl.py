"""Vitess's vschema DDL (``ALTER VSCHEMA ...``): parsed from text and applied to a keyspace's
vschema document. Pure: no I/O; the proxy stores and distributes the result
(``proxy.live_vschema``).

The statements (Vitess's grammar; keywords case-insensitive, names may be backquoted)::

    ALTER VSCHEMA CREATE VINDEX [ks.]name USING type [WITH k=v, ...]
    ALTER VSCHEMA DROP VINDEX [ks.]name
    ALTER VSCHEMA ADD TABLE [ks.]t          ALTER VSCHEMA DROP TABLE [ks.]t
    ALTER VSCHEMA ADD SEQUENCE [ks.]seq     ALTER VSCHEMA DROP SEQUENCE [ks.]seq
    ALTER VSCHEMA ON [ks.]t ADD VINDEX name(col, ...) [USING type] [WITH k=v, ...]
    ALTER VSCHEMA ON [ks.]t DROP VINDEX name
    ALTER VSCHEMA ON [ks.]t ADD AUTO_INCREMENT col USING [ks.]seq
    ALTER VSCHEMA ON [ks.]t DROP AUTO_INCREMENT

``apply_vschema_ddl`` follows Vitess's ``topotools.ApplyVSchemaDDL``: the same checks in the
same order, with its error texts. It only edits the document; whether the result is a valid
vschema is decided by building it (``vschema.loader.build_vschema``), as Vitess's
``UpdateVSchema`` builds the keyspace before saving it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vschema.errors import VSchemaError

CREATE_VINDEX = "create vindex"
DROP_VINDEX = "drop vindex"
ADD_TABLE = "add table"
DROP_TABLE = "drop table"
ADD_COL_VINDEX = "add col vindex"
DROP_COL_VINDEX = "drop col vindex"
ADD_SEQUENCE = "add sequence"
DROP_SEQUENCE = "drop sequence"
ADD_AUTO_INC = "add auto_increment"
DROP_AUTO_INC = "drop auto_increment"

_HEAD = re.compile(r"^\s*alter\s+vschema\b", re.I)
_TOKEN = re.compile(
    r"\s*(?:(?P<bq>`(?:[^`]|``)*`)|(?P<str>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")"
    r"|(?P<word>[A-Za-z0-9_$]+)|(?P<punct>[.,()=;]))",
    re.S,
)


class VSchemaDDLSyntaxError(VSchemaError):
    """The statement is not valid vschema DDL (MySQL error 1064); the message is Vitess's
    ``syntax error at position N near 'token'``."""


class VSchemaDDLError(VSchemaError):
    """A vschema DDL statement that cannot apply to the keyspace as it is (Vitess's
    Code_INTERNAL errors of ApplyVSchemaDDL, MySQL error 1815)."""


@dataclass(frozen=True)
class QualifiedName:
    name: str
    keyspace: str | None = None

    def __str__(self) -> str:
        return f"{self.keyspace}.{self.name}" if self.keyspace else self.name


@dataclass(frozen=True)
class VSchemaDDL:
    """One parsed ``ALTER VSCHEMA`` statement.

    ``table`` is the statement's subject: the table (ADD/DROP TABLE, ADD/DROP SEQUENCE, ON t ...)
    or, for CREATE/DROP VINDEX, the vindex name with its keyspace qualifier (as Vitess's parser
    stores it)."""

    action: str
    table: QualifiedName
    vindex: str | None = None
    vindex_type: str | None = None
    params: tuple[tuple[str, str], ...] = ()
    columns: tuple[str, ...] = ()
    auto_increment_column: str | None = None
    sequence: QualifiedName | None = None

    @property
    def keyspace(self) -> str | None:
        return self.table.keyspace

    def owner_and_params(self) -> tuple[str, dict[str, str]]:
        """Vitess's ``VindexSpec.ParseParams``: ``owner`` (any case) is the vindex's owner,
        every other parameter keeps its key as written."""
        owner = ""
        params: dict[str, str] = {}
        for key, value in self.params:
            if key.lower() == "owner":
                owner = value
            else:
                params[key] = value
        return owner, params


@dataclass
class _Tokens:
    sql: str
    items: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, text, end offset)
    pos: int = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.items[self.pos] if self.pos < len(self.items) else None

    def error(self) -> VSchemaDDLSyntaxError:
        tok = self.peek()
        if tok is None:
            return VSchemaDDLSyntaxError(f"syntax error at position {len(self.sql) + 1}")
        return VSchemaDDLSyntaxError(f"syntax error at position {tok[2] + 1} near '{_text(tok)}'")

    def keyword(self, *words: str) -> str | None:
        """The next token if it is one of ``words`` (a bare word), consumed; else None."""
        tok = self.peek()
        if tok is not None and tok[0] == "word" and tok[1].lower() in words:
            self.pos += 1
            return tok[1].lower()
        return None

    def expect(self, *words: str) -> str:
        got = self.keyword(*words)
        if got is None:
            raise self.error()
        return got

    def punct(self, char: str) -> bool:
        tok = self.peek()
        if tok is not None and tok[0] == "punct" and tok[1] == char:
            self.pos += 1
            return True
        return False

    def identifier(self) -> str:
        tok = self.peek()
        if tok is None or tok[0] not in ("word", "bq"):
            raise self.error()
        self.pos += 1
        return _text(tok)

    def qualified(self) -> QualifiedName:
        first = self.identifier()
        if self.punct("."):
            return QualifiedName(self.identifier(), first)
        return QualifiedName(first)

    def value(self) -> str:
        """A parameter value: an identifier, a string or a number; dotted names (``ks.t``) are
        taken whole, as Vitess users write ``table=ks.lookup_t`` in backquotes or quotes."""
        tok = self.peek()
        if tok is None or tok[0] not in ("word", "bq", "str"):
            raise self.error()
        self.pos += 1
        text = _text(tok)
        while tok[0] != "str" and self.punct("."):
            tok = self.peek()
            if tok is None or tok[0] not in ("word", "bq"):
                raise self.error()
            self.pos += 1
            text += "." + _text(tok)
        return text

    def end(self) -> None:
        self.punct(";")
        if self.peek() is not None:
            raise self.error()


def _text(tok: tuple[str, str, int]) -> str:
    kind, text, _ = tok
    if kind == "bq":
        return text[1:-1].replace("``", "`")
    if kind == "str":
        quote = text[0]
        body = text[1:-1].replace(quote * 2, quote)
        return re.sub(r"\\(.)", r"\1", body)
    return text


def _tokenize(sql: str) -> _Tokens:
    toks = _Tokens(sql)
    pos = 0
    stripped = sql.rstrip()
    while pos < len(stripped):
        m = _TOKEN.match(stripped, pos)
        if m is None or m.end() == pos:
            near = stripped[pos:].lstrip()[:20]
            raise VSchemaDDLSyntaxError(f"syntax error at position {pos + 1} near '{near}'")
        kind = m.lastgroup or "punct"
        toks.items.append((kind, m.group(kind), m.end()))
        pos = m.end()
    return toks


def is_vschema_ddl(sql: str) -> bool:
    """Whether ``sql`` (leading comments stripped) is an ``ALTER VSCHEMA`` statement."""
    return _HEAD.match(sql) is not None


def parse_vschema_ddl(sql: str) -> VSchemaDDL:
    """Parse one ``ALTER VSCHEMA`` statement; raises ``VSchemaDDLSyntaxError``."""
    toks = _tokenize(sql)
    toks.expect("alter")
    toks.expect("vschema")
    verb = toks.expect("create", "drop", "add", "on")
    ddl: VSchemaDDL
    if verb == "create":
        toks.expect("vindex")
        name = toks.qualified()
        vtype = _using(toks)
        ddl = VSchemaDDL(CREATE_VINDEX, name, vindex=name.name, vindex_type=vtype, params=_with(toks))
    elif verb in ("drop", "add"):
        what = toks.expect("vindex", "table", "sequence") if verb == "drop" else toks.expect("table", "sequence")
        name = toks.qualified()
        if what == "vindex":
            ddl = VSchemaDDL(DROP_VINDEX, name, vindex=name.name)
        else:
            action = {("add", "table"): ADD_TABLE, ("drop", "table"): DROP_TABLE,
                      ("add", "sequence"): ADD_SEQUENCE, ("drop", "sequence"): DROP_SEQUENCE}[(verb, what)]
            ddl = VSchemaDDL(action, name)
    else:
        table = toks.qualified()
        op = toks.expect("add", "drop")
        what = toks.expect("vindex", "auto_increment")
        if what == "vindex" and op == "add":
            vname = toks.identifier()
            if not toks.punct("("):
                raise toks.error()
            cols = [toks.identifier()]
            while toks.punct(","):
                cols.append(toks.identifier())
            if not toks.punct(")"):
                raise toks.error()
            vtype = _using(toks)
            ddl = VSchemaDDL(ADD_COL_VINDEX, table, vindex=vname, vindex_type=vtype, params=_with(toks),
                             columns=tuple(cols))
        elif what == "vindex":
            ddl = VSchemaDDL(DROP_COL_VINDEX, table, vindex=toks.identifier())
        elif op == "add":
            column = toks.identifier()
            toks.expect("using")
            ddl = VSchemaDDL(ADD_AUTO_INC, table, auto_increment_column=column, sequence=toks.qualified())
        else:
            ddl = VSchemaDDL(DROP_AUTO_INC, table)
    toks.end()
    return ddl


def _using(toks: _Tokens) -> str | None:
    return toks.identifier() if toks.keyword("using") else None


def _with(toks: _Tokens) -> tuple[tuple[str, str], ...]:
    if not toks.keyword("with"):
        return ()
    params = []
    while True:
        key = toks.identifier()
        if not toks.punct("="):
            raise toks.error()
        params.append((key, toks.value()))
        if not toks.punct(","):
            return tuple(params)


def _auto_inc_text(auto_inc: Mapping[str, Any]) -> str:
    # Go's %v of the AutoIncrement message, as Vitess prints it in its error
    return f'column:"{auto_inc.get("column", "")}" sequence:"{auto_inc.get("sequence", "")}"'


def apply_vschema_ddl(keyspace: str, doc: Mapping[str, Any] | None, ddl: VSchemaDDL) -> dict[str, Any]:
    """The keyspace's vschema document after ``ddl`` (a new document; ``doc`` is not changed).

    Raises ``VSchemaDDLError`` with Vitess's text when the statement cannot apply."""
    ks: dict[str, Any] = copy.deepcopy(dict(doc or {}))
    vindexes: dict[str, Any] = ks.setdefault("vindexes", {})
    tables: dict[str, Any] = ks.setdefault("tables", {})
    name = ddl.table.name
    action = ddl.action

    if action == CREATE_VINDEX:
        if name in vindexes:
            raise VSchemaDDLError(f"vindex {name} already exists in keyspace {keyspace}")
        if not vindexes:
            ks["sharded"] = True  # the first vindex of a keyspace makes it sharded (Vitess)
        vindexes[name] = _vindex_doc(ddl)
    elif action == DROP_VINDEX:
        if name not in vindexes:
            raise VSchemaDDLError(f"vindex {name} does not exists in keyspace {keyspace}")
        for tname in sorted(tables):
            for cv in (tables[tname] or {}).get("column_vindexes") or []:
                if cv.get("name") == name:
                    raise VSchemaDDLError(f"can not drop vindex cause {name} still defined on table {tname}")
        del vindexes[name]
    elif action == ADD_TABLE:
        if ks.get("sharded"):
            raise VSchemaDDLError(f"add vschema table: unsupported on sharded keyspace {keyspace}")
        if name in tables:
            raise VSchemaDDLError(f"vschema already contains table {name} in keyspace {keyspace}")
        tables[name] = {}
    elif action == DROP_TABLE:
        if name not in tables:
            raise VSchemaDDLError(f"vschema does not contain table {name} in keyspace {keyspace}")
        del tables[name]
    elif action == ADD_COL_VINDEX:
        _add_column_vindex(keyspace, ks, ddl)
    elif action == DROP_COL_VINDEX:
        table = tables.get(name)
        if table is None:
            raise VSchemaDDLError(f"table {keyspace}.{name} not defined in vschema")
        cvs = table.get("column_vindexes") or []
        for i, cv in enumerate(cvs):
            if cv.get("name") == ddl.vindex:
                table["column_vindexes"] = cvs[:i] + cvs[i + 1:]
                if not table["column_vindexes"]:
                    del tables[name]  # a table without vindexes leaves the vschema (Vitess)
                break
        else:
            raise VSchemaDDLError(f"vindex {ddl.vindex} not defined in table {keyspace}.{name}")
    elif action == ADD_SEQUENCE:
        if ks.get("sharded"):
            raise VSchemaDDLError(f"add sequence table: unsupported on sharded keyspace {keyspace}")
        if name in tables:
            raise VSchemaDDLError(f"vschema already contains sequence {name} in keyspace {keyspace}")
        tables[name] = {"type": "sequence"}
    elif action == DROP_SEQUENCE:
        if ks.get("sharded"):
            raise VSchemaDDLError(f"drop sequence table: unsupported on sharded keyspace {keyspace}")
        if name not in tables:
            raise VSchemaDDLError(f"vschema does not contain sequence {name} in keyspace {keyspace}")
        del tables[name]
    elif action == ADD_AUTO_INC:
        table = tables.get(name)
        if table is None:
            raise VSchemaDDLError(f"vschema does not contain table {name} in keyspace {keyspace}")
        if table.get("auto_increment"):
            raise VSchemaDDLError(
                f"vschema already contains auto inc {_auto_inc_text(table['auto_increment'])} on table {name} "
                f"in keyspace {keyspace}"
            )
        assert ddl.sequence is not None and ddl.auto_increment_column is not None
        table["auto_increment"] = {"column": ddl.auto_increment_column, "sequence": str(ddl.sequence)}
    elif action == DROP_AUTO_INC:
        table = tables.get(name)
        if table is None:
            raise VSchemaDDLError(f"vschema does not contain table {name} in keyspace {keyspace}")
        table.pop("auto_increment", None)
    else:
        raise VSchemaDDLError(f"unexpected vindex ddl operation {action}")
    if not vindexes:
        del ks["vindexes"]
    if not tables:
        del ks["tables"]
    return ks


def _vindex_doc(ddl: VSchemaDDL) -> dict[str, Any]:
    owner, params = ddl.owner_and_params()
    vdoc: dict[str, Any] = {"type": ddl.vindex_type or ""}
    if params:
        vdoc["params"] = params
    if owner:
        vdoc["owner"] = owner
    return vdoc


def _add_column_vindex(keyspace: str, ks: dict[str, Any], ddl: VSchemaDDL) -> None:
    """``ON t ADD VINDEX v(cols) [USING type ...]``: with a type, the vindex is created (or must
    match the existing one); without, it must exist. The table entry is created if needed."""
    vindexes: dict[str, Any] = ks["vindexes"]
    tables: dict[str, Any] = ks["tables"]
    name = ddl.vindex
    assert name is not None
    if ddl.vindex_type:
        owner, params = ddl.owner_and_params()
        existing = vindexes.get(name)
        if existing is not None:
            if existing.get("type", "") != ddl.vindex_type:
                raise VSchemaDDLError(
                    f"vindex {name} defined with type {existing.get('type', '')} not {ddl.vindex_type}"
                )
            if (existing.get("owner") or "") != owner:
                raise VSchemaDDLError(f"vindex {name} defined with owner {existing.get('owner') or ''} not {owner}")
            old_params = existing.get("params") or {}
            if (old_params or params) and old_params != params:
                raise VSchemaDDLError(f"vindex {name} defined with different parameters")
        else:
            if not vindexes:
                ks["sharded"] = True
            vindexes[name] = _vindex_doc(ddl)
    elif name not in vindexes:
        raise VSchemaDDLError(f"vindex {name} does not exist in keyspace {keyspace}")
    table = tables.get(ddl.table.name)
    if table is None:
        table = tables[ddl.table.name] = {"column_vindexes": []}
    cvs = table.setdefault("column_vindexes", [])
    if any(cv.get("name") == name for cv in cvs):
        raise VSchemaDDLError(f"vindex {name} already defined on table {ddl.table.name}")
    cols = list(ddl.columns)
    cvs.append({"column": cols[0], "name": name} if len(cols) == 1 else {"columns": cols, "name": name})


__all__ = [
    "VSchemaDDL",
    "VSchemaDDLError",
    "VSchemaDDLSyntaxError",
    "QualifiedName",
    "apply_vschema_ddl",
    "is_vschema_ddl",
    "parse_vschema_ddl",
]
