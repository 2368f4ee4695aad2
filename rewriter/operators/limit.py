"""Limit: LIMIT/OFFSET. ``pushed`` once each shard is told to return at most
offset+count rows (the proxy still applies the real limit over all shards)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Limit(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    count: exp.Expression | None  # None: OFFSET without a row count
    offset: exp.Expression | None = None
    pushed: bool = False
