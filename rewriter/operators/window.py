"""Window: the window functions of a SELECT, evaluated over the rows of its input
(after grouping and HAVING, before DISTINCT and ORDER BY, as SQL evaluates them).
``statement`` is the SELECT they belong to: whether the shards may compute them
depends on all of it (``rules.push_window``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Window(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    windows: tuple[exp.Window, ...]
    statement: exp.Select
