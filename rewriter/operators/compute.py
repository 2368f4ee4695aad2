"""Compute: the fallback for what no route and no proxy operator can answer — the
statement runs whole on one shard's server over temporary copies of the rows it
reads (``rewriter.compute_planner``, engine ``Compute``)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Compute(Operator):
    statement: exp.Expression
