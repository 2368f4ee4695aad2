"""Reading the project's own Python files as syntax trees, for the tests that check its structure."""

from __future__ import annotations

import ast
import gc
from pathlib import Path


def parse_file(path: Path) -> ast.Module:
    """The syntax tree of the file at ``path`` (``parse_source``)."""
    return parse_source(path.read_text(encoding="utf-8"))


def parse_source(source: str) -> ast.Module:
    """``ast.parse`` of ``source`` with the garbage collector held.

    On CPython 3.11 a finalizer that runs inside the AST constructor fails the parse with
    "SystemError: AST constructor recursion depth mismatch": an earlier test's client left an
    unbuffered result unread (PyMySQL finishes it in ``__del__``), and a collection triggered
    by the constructor's allocations ran it there (seen once in a full run)."""
    held = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(source)
    finally:
        if held:
            gc.enable()
