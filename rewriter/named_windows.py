"""Named windows (``WINDOW w AS (...)``, ``OVER w``, ``OVER (w ORDER BY ...)``) written
out where they are used, so every planner sees plain window specifications (the
statement means the same; MySQL's own rewrite)."""

from __future__ import annotations

from sqlglot import exp


def resolve_named_windows(sel: exp.Select) -> bool:
    """Write each ``OVER w`` / ``OVER (w ORDER BY ...)`` out as the window it names
    (``WINDOW w AS (...)``, which may name another) and drop the WINDOW clause. MySQL's
    rules: a window built on a named one adds no PARTITION BY, an ORDER BY only when the
    named one has none, a frame only when it has none. False when a reference breaks
    them or names no window (the statement goes to Compute, whose server answers the
    error)."""
    defs = {d.this.name.lower(): d for d in sel.args.get("windows") or [] if isinstance(d.this, exp.Identifier)}
    if len(defs) != len(sel.args.get("windows") or []):
        return False

    def combined(base: exp.Expression | None, w: exp.Window, seen: frozenset[str]) -> dict[str, object] | None:
        """The PARTITION BY / ORDER BY / frame of ``w`` over the window ``base`` names."""
        parts: dict[str, object] = {"partition_by": None, "order": None, "spec": None}
        if base is not None:
            name = base.name.lower()
            d = defs.get(name)
            if d is None or name in seen:
                return None
            inherited = combined(d.args.get("alias"), d, seen | {name})
            if inherited is None:
                return None
            parts = inherited
            if w.args.get("partition_by") or (w.args.get("order") and parts["order"]) \
                    or (w.args.get("spec") and parts["spec"]):
                return None
        for key in parts:
            if w.args.get(key):
                value = w.args[key]
                parts[key] = [v.copy() for v in value] if isinstance(value, list) else value.copy()
        return parts

    for w in list(sel.find_all(exp.Window)):
        if w.arg_key == "windows" or not w.args.get("alias"):
            continue
        parts = combined(w.args["alias"], w, frozenset())
        if parts is None:
            return False
        w.replace(exp.Window(this=w.this.copy(), over=w.args.get("over"), **parts))
    sel.set("windows", None)
    return True
