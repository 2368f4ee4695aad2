"""Filter: rows of the input for which every predicate is true (``clause``: the
statement's ``where`` or ``having``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Filter(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    predicates: tuple[exp.Expression, ...]
    clause: str = "where"
