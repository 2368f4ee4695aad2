"""Routing a WITH statement by its CTEs inlined as derived tables.

A CTE that reads a sharded table within one shard (``WITH t AS (SELECT ... FROM
customer WHERE customer_id = 5) SELECT ... FROM t``) routes exactly as the same body
written as a derived table does, which the operators already merge into one
route. So the route is decided on a copy with every (non-recursive) CTE reference
replaced by its body, and — when that copy goes to one shard whole — the statement as
the client wrote it (WITH and all) is what that shard runs: MySQL evaluates the CTEs.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.tables import names_cte

# A CTE referenced by CTEs referenced by CTEs... grows exponentially when inlined; past
# this many substitutions the statement is left to Compute.
MAX_SUBSTITUTIONS = 64


def _definition(t: exp.Table) -> exp.CTE | None:
    name = t.name.lower()
    node: exp.Expression | None = t
    while node is not None:
        parent = node.parent
        with_ = (parent.args.get("with_") or parent.args.get("with")) if parent is not None else None
        if isinstance(with_, exp.With):
            for cte in with_.expressions:
                if cte.alias_or_name.lower() == name:
                    return cte
        node = parent  # type: ignore[assignment]  # sqlglot types parses and parents as Expr, Expression's base
    return None


def inline_ctes(stmt: exp.Expression) -> exp.Expression | None:
    """A copy of ``stmt`` without WITH, each CTE reference replaced by the CTE's body as
    a derived table; None for a recursive WITH or one too large to inline."""
    out = stmt.copy()
    if any(w.args.get("recursive") for w in out.find_all(exp.With)):
        return None
    for _ in range(MAX_SUBSTITUTIONS):
        ref = next((t for t in out.find_all(exp.Table) if names_cte(t)), None)
        if ref is None:
            break
        cte = _definition(ref)
        if cte is None:
            return None
        alias = exp.TableAlias(this=exp.to_identifier(ref.alias_or_name))
        columns = cte.args["alias"].args.get("columns") if cte.args.get("alias") is not None else None
        if columns:
            alias.set("columns", [c.copy() for c in columns])
        ref.replace(exp.Subquery(this=cte.this.copy(), alias=alias))
    else:
        return None
    for node in list(out.walk()):
        for key in ("with_", "with"):
            if isinstance(node.args.get(key), exp.With):
                node.set(key, None)
    return out
