"""Distinct: each row of the input once (SELECT DISTINCT)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Distinct(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
