"""mysql-mimic's private API is used from one adapter module (proxy/mysql_mimic_internals.py), so
a mimic upgrade is checked in one place. Checked on the source with ``ast``: mimic's private
names are read from mimic's own sources, and every use of one elsewhere fails here."""

from __future__ import annotations

import ast
from importlib import metadata
from pathlib import Path

import mysql_mimic

from proxy.mysql_mimic_internals import MYSQL_MIMIC_CHECKED
from tests.python_source import parse_file, parse_source

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("proxy", "rewriter", "vschema", "sqltext")
ADAPTER = REPO / "proxy" / "mysql_mimic_internals.py"
MIMIC_SOURCES = sorted(Path(mysql_mimic.__file__).parent.glob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _mimic_private_names() -> frozenset[str]:
    """Methods, class attributes and instance attributes mimic's classes name with a leading
    underscore (``def _start``, ``_MAX_CONNECTION_SEQ = ...``, ``self._buffer = ...``)."""
    names: set[str] = set()
    for path in MIMIC_SOURCES:
        for cls in (n for n in ast.walk(parse_file(path)) if isinstance(n, ast.ClassDef)):
            for node in ast.walk(cls):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
                    names.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and _private(node.id):
                    names.add(node.id)
                elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                      and isinstance(node.value, ast.Name) and node.value.id == "self" and _private(node.attr)):
                    names.add(node.attr)
    return frozenset(names)


MIMIC_PRIVATE = _mimic_private_names()


def _uses(source: str, where: str) -> list[str]:
    """Uses of mimic's private API in ``source``: a private mimic module imported; in a module
    that imports mysql_mimic (those are the ones holding its objects), a private mimic name
    read off an object (``self`` too, in a class built on mimic's; not off a plain class of
    the module or its instances' ``self``), passed to getattr/setattr, or overridden by a class
    built on mimic's."""
    tree = parse_source(source)
    from_mimic: set[str] = set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "mysql_mimic":
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"{where}:{node.lineno} imports {node.module}")
            from_mimic.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Import):
            found += [f"{where}:{node.lineno} imports {a.name}" for a in node.names
                      if a.name.split(".")[0] == "mysql_mimic" and any(_private(p) for p in a.name.split("."))]

    if not from_mimic and not any(isinstance(n, ast.Import) and n.names[0].name.startswith("mysql_mimic")
                                  for n in ast.walk(tree)):
        return found
    own_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                   and not any(isinstance(b, ast.Name) and b.id in from_mimic for b in n.bases)}

    def walk(node: ast.AST, on_mimic: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = on_mimic
            if isinstance(child, ast.ClassDef):
                inner = any(isinstance(b, ast.Name) and b.id in from_mimic for b in child.bases)
                for item in child.body:
                    if inner and isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in MIMIC_PRIVATE:
                        found.append(f"{where}:{item.lineno} overrides mysql-mimic's {item.name}")
            elif isinstance(child, ast.Attribute) and child.attr in MIMIC_PRIVATE:
                base = child.value.id if isinstance(child.value, ast.Name) else None
                own = base in own_classes or (base in ("self", "cls") and not on_mimic)
                if not own:
                    found.append(f"{where}:{child.lineno} uses mysql-mimic's {child.attr}")
            elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Name)
                  and child.func.id in ("getattr", "setattr", "hasattr") and len(child.args) > 1
                  and isinstance(child.args[1], ast.Constant) and child.args[1].value in MIMIC_PRIVATE):
                found.append(f"{where}:{child.lineno} uses mysql-mimic's {child.args[1].value}")
            walk(child, inner)

    walk(tree, False)
    return found


def test_mimics_private_api_is_used_only_from_the_adapter() -> None:
    found = [
        use
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if path != ADAPTER
        for use in _uses(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert found == []


def test_the_check_sees_each_kind_of_private_use() -> None:
    """The check above would pass on an empty name list: make sure it catches real uses."""
    assert {"_start", "_client_connected_cb", "_buffer", "_kill"} <= MIMIC_PRIVATE
    source = (
        "from mysql_mimic.connection import Connection\n"
        "class C(Connection):\n"
        "    async def _start(self):\n"
        "        self._kill = None\n"
        "class Own:\n"
        "    def __init__(self):\n"
        "        self._buffer = b''\n"
        "    def f(self):\n"
        "        return self._buffer, Own._start\n"
        "def f(stream):\n"
        "    return stream._buffer, getattr(stream, '_buffer')\n"
    )
    assert _uses(source, "m") == [
        "m:3 overrides mysql-mimic's _start",
        "m:4 uses mysql-mimic's _kill",
        "m:11 uses mysql-mimic's _buffer",
        "m:11 uses mysql-mimic's _buffer",
    ]


def test_the_installed_mimic_is_the_version_the_adapter_was_checked_against() -> None:
    assert metadata.version("mysql-mimic") == MYSQL_MIMIC_CHECKED
