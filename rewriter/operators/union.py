"""Union: the rows of every source (``distinct`` for UNION, else UNION ALL)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Union(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("sources",)

    sources: tuple[Operator, ...]
    distinct: bool = False
