"""Ordering: ORDER BY keys over the input. ``pushed`` once the shards sort and the
proxy only merges their sorted streams."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Ordering(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    keys: tuple[exp.Ordered, ...]
    pushed: bool = False
