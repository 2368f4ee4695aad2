"""Errors the planner raises. The proxy maps them to MySQL errors:

- ``Unsupported`` -> 1235 (ER_NOT_SUPPORTED_YET) with the message as is; messages use
  Vitess's texts where Vitess has one (``VT12001: unsupported: ...``).
- ``PlanningError`` -> 1105 with the message (a query Vitess also rejects, e.g. a DML
  that would change a primary vindex column).
- ``TableNotFound`` -> 1146 (``Table 'ks.t' doesn't exist``).
- ``AmbiguousTable`` -> 1105 (Vitess: ``ambiguous table reference: t``).
- ``ParseError`` -> 1064.
- ``StackOverrun`` -> 1436, ``SelectNestingTooDeep`` -> 1473 (statements nested too deep;
  MySQL's own codes and texts).
- ``WrongValueCount`` -> 1136 (MySQL's ``Column count doesn't match value count at row N``).
- ``UnknownColumn`` -> 1054 (``Unknown column '9' in 'order clause'``), ``WrongGroupField``
  -> 1056 (``Can't group on 'sum(x)'``), ``DifferentColumnCount`` -> 1222 (set operation
  arms of different widths): MySQL's codes and texts.
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


def syntax_error(e: Exception) -> ParseError:
    """MySQL's 1064 text for a statement sqlglot could not parse: ``... to use near
    '<the text from where parsing stopped>' at line N`` -- never sqlglot's own description
    (it names Python classes, ``<class 'sqlglot.expressions.query.Where'>``)."""
    found = getattr(e, "errors", None) or [{}]
    first = found[0] if isinstance(found[0], dict) else {}
    near = (str(first.get("highlight") or "") + str(first.get("end_context") or ""))[:80]
    line = first.get("line") or 1
    return ParseError("You have an error in your SQL syntax; check the manual that corresponds to your MySQL "
                      f"server version for the right syntax to use near '{near}' at line {line}")


class TableNotFound(PlanningError):
    code = 1146


class WrongValueCount(PlanningError):
    code = 1136


class UnknownColumn(PlanningError):
    code = 1054


class WrongGroupField(PlanningError):
    code = 1056


class DifferentColumnCount(PlanningError):
    code = 1222

    def __init__(self) -> None:
        super().__init__("The used SELECT statements have a different number of columns")


class AmbiguousTable(PlanningError):
    code = 1105


class StackOverrun(PlanningError):
    """A statement nested deeper than the planner goes (``rewriter.dialect``): MySQL's
    ER_STACK_OVERRUN_NEED_MORE, which MySQL itself raises for deep expressions."""

    code = 1436

    def __init__(self, levels: int, limit: int, bytes_per_level: int = 1024) -> None:
        used, size = levels * bytes_per_level, limit * bytes_per_level
        super().__init__(f"Thread stack overrun: {used} bytes used of a {size} byte stack, and "
                         f"{max(used - size, 0)} bytes needed. Use 'mysqld --thread_stack=#' to "
                         "specify a bigger stack.")


class SelectNestingTooDeep(PlanningError):
    """MySQL's ER_TOO_HIGH_LEVEL_OF_NESTING_FOR_SELECT (more than 63 nested selects)."""

    code = 1473

    def __init__(self) -> None:
        super().__init__("Too high level of nesting for select")


def unsupported(what: str) -> Unsupported:
    """Vitess's wording for VT12001."""
    return Unsupported(f"VT12001: unsupported: {what}")
