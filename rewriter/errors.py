"""Errors the planner raises. The proxy maps them to MySQL errors:

- ``Unsupported`` -> 1235 (ER_NOT_SUPPORTED_YET) with the message as is; messages use
  Vitess's texts where Vitess has one (``VT12001: unsupported: ...``).
- ``PlanningError`` -> 1105 with the message (a query Vitess also rejects, e.g. a DML
  that would change a primary vindex column).
- ``TableNotFound`` -> 1146 (``Table 'ks.t' doesn't exist``).
- ``AmbiguousTable`` -> 1105 (Vitess: ``ambiguous table reference: t``).
- ``ParseError`` -> 1064.
- ``WrongValueCount`` -> 1136 (MySQL's ``Column count doesn't match value count at row N``).
"""

from __future__ import annotations


class PlanningError(Exception):
    """A statement the planner refuses; the message is what the client sees."""

    code = 1105

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unsupported(PlanningError):
    """A construct the planner cannot execute correctly (MySQL error 1235)."""

    code = 1235


class ParseError(PlanningError):
    code = 1064


class TableNotFound(PlanningError):
    code = 1146


class WrongValueCount(PlanningError):
    code = 1136


class AmbiguousTable(PlanningError):
    code = 1105


def unsupported(what: str) -> Unsupported:
    """Vitess's wording for VT12001."""
    return Unsupported(f"VT12001: unsupported: {what}")
