"""Aggregator: GROUP BY keys and the aggregate calls of the select list, HAVING and
ORDER BY. ``pushed`` is set once the rules split it into a shard half (partials
computed by each shard, inside the route) and this, the proxy half that merges them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Aggregator(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    group_by: tuple[exp.Expression, ...]
    aggregates: tuple[exp.Expression, ...]
    pushed: bool = False
