"""Derived: a derived table (``FROM (<query>) alias``): the inner query's rows under
the alias and column names the outer query sees."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Derived(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    alias: str
    columns: tuple[str, ...] = ()
