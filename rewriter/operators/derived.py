"""Derived: a derived table (``FROM (<query>) alias``): the inner query's rows under the
alias the outer query reads them by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Derived(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    alias: str
