"""Projection: the select list (expressions with their result names)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Projection(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    expressions: tuple[exp.Expression, ...]
