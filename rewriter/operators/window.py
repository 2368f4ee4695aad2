"""Window: the window functions of the select list, evaluated over the input's rows
(on the shards when every ``PARTITION BY`` holds a unique vindex column)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlglot import exp

from rewriter.operators.base import Operator


@dataclass(frozen=True, slots=True)
class Window(Operator):
    INPUTS: ClassVar[tuple[str, ...]] = ("input",)

    input: Operator
    windows: tuple[exp.Window, ...]
