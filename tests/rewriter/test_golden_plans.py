"""Golden plans (like Vitess's planbuilder testdata): every query in
``tests/rewriter/golden/*.json`` is planned with ``VEXPLAIN PLAN`` over the planner test
vschema (``vschema_fixture``) plus the tracked schema below, and the plan must equal the
stored one.

Each file is a list of ``{"comment", "query", "plan"}`` objects (optionally
``"keyspace"``: the session target, default none). ``plan`` is the VEXPLAIN PLAN JSON as
an object, or for a statement the planner refuses the string ``"error <code>: <message>"``.

A mismatch fails with a unified diff of the stored and the new plan. After a deliberate
planner change, regenerate the stored plans and review the diff before committing::

    SHARDGATE_GOLDEN_UPDATE=1 .venv/bin/pytest tests/rewriter/test_golden_plans.py

(``-k`` limits the update to the selected entries; a new entry may be added with
``"plan": null`` and filled in this way.)
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rewriter import PlanCache, plan_query
from rewriter.errors import PlanningError
from vschema.tracked_schema import ColumnInfo, TableSchema, TrackedSchema

GOLDEN_DIR = Path(__file__).parent / "golden"
UPDATE = os.environ.get("SHARDGATE_GOLDEN_UPDATE", "") not in ("", "0")

_CI = "utf8mb4_general_ci"


def _table(name: str, *columns: tuple[str, str, str, str | None]) -> TableSchema:
    return TableSchema(name, tuple(
        ColumnInfo(c, data_type=dt, column_type=ct, collation=coll, nullable=i > 0, primary_key=i == 0)
        for i, (c, dt, ct, coll) in enumerate(columns)))


def _bigint(name: str) -> tuple[str, str, str, None]:
    return (name, "bigint", "bigint(20)", None)


def _varchar(name: str, n: int = 64) -> tuple[str, str, str, str]:
    return (name, "varchar", f"varchar({n})", _CI)


def _varbinary(name: str, n: int = 128) -> tuple[str, str, str, None]:
    return (name, "varbinary", f"varbinary({n})", None)


# The shards' columns for the tables of tests/rewriter/vschema_fixture.py (what the
# proxy's schema tracker would read). customer_note's vschema column list is
# authoritative and wins over its extra shard column.
SCHEMA = TrackedSchema({
    "customer": {
        "customer": _table("customer", _bigint("customer_id"), _varbinary("email"), _bigint("tenant_id"),
                           ("created_at", "datetime", "datetime(6)", None), _varchar("country", 3)),
        "corder": _table("corder", _bigint("order_id"), _bigint("customer_id"), _varbinary("sku"),
                         _bigint("price")),
        "country": _table("country", _varchar("code", 3), _varchar("name")),
        "pinned_settings": _table("pinned_settings", _varchar("name"), _varchar("value", 255)),
        "customer_note": _table("customer_note", _bigint("note_id"), _bigint("customer_id"),
                                _varchar("body", 255), _bigint("shard_only_column")),
    },
    "commerce": {
        "product": _table("product", _bigint("id"), _varchar("name"), _varbinary("sku"), _bigint("price")),
        "customer_seq": _table("customer_seq", ("id", "int", "int(11)", None), _bigint("next_id"),
                               _bigint("cache")),
        "corder_seq": _table("corder_seq", ("id", "int", "int(11)", None), _bigint("next_id"), _bigint("cache")),
        "corder_keyspace_idx": _table("corder_keyspace_idx", _bigint("order_id"),
                                      _varbinary("keyspace_id", 10)),
        "email_idx": _table("email_idx", _varbinary("email"), _varbinary("keyspace_id", 10)),
    },
})


def plan_of(vschema: Any, query: str, keyspace: str | None = None) -> Any:
    """The VEXPLAIN PLAN JSON of ``query`` as an object, or ``"error <code>: <message>"``."""
    try:
        node, _ = plan_query("vexplain plan " + query, vschema, keyspace, PlanCache(), schema=SCHEMA)
    except PlanningError as e:
        return f"error {e.code}: {e.message}"
    return json.loads(node.json)


def _load(path: Path) -> list[dict[str, Any]]:
    entries = json.loads(path.read_text())
    assert isinstance(entries, list), f"{path.name}: a list of entries"
    return entries


def _dump(entries: list[dict[str, Any]]) -> str:
    return json.dumps(entries, indent=2, ensure_ascii=False) + "\n"


FILES = sorted(GOLDEN_DIR.glob("*.json"))
CASES = [(p.name, i, e.get("comment", "")) for p in FILES for i, e in enumerate(_load(p))]


@pytest.fixture(scope="module")
def golden():
    """Every golden file's entries by file name; in update mode, files whose entries
    changed are written back when the module's tests are done."""
    files = {p.name: _load(p) for p in FILES}
    dirty: set[str] = set()
    yield files, dirty
    for name in sorted(dirty):
        (GOLDEN_DIR / name).write_text(_dump(files[name]))


def _show(plan: Any) -> list[str]:
    return json.dumps(plan, indent=2, ensure_ascii=False).splitlines()


@pytest.mark.parametrize(("file", "index", "comment"), CASES,
                         ids=[f"{f.removesuffix('.json')}-{i}" for f, i, _c in CASES])
def test_plan_matches_golden(file, index, comment, golden, vschema):
    files, dirty = golden
    entry = files[file][index]
    got = plan_of(vschema, entry["query"], entry.get("keyspace"))
    want = entry.get("plan")
    if got == want:
        return
    if UPDATE:
        entry["plan"] = got
        dirty.add(file)
        return
    diff = "\n".join(difflib.unified_diff(_show(want), _show(got), "stored plan", "new plan", lineterm=""))
    pytest.fail(f"{file}[{index}] {comment}\nquery: {entry['query']}\n{diff}\n"
                "(after a deliberate planner change: SHARDGATE_GOLDEN_UPDATE=1 pytest "
                "tests/rewriter/test_golden_plans.py, then review the diff)", pytrace=False)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_golden_file_is_well_formed(path):
    entries = _load(path)
    assert 1 <= len(entries)
    seen = set()
    for e in entries:
        assert set(e) <= {"comment", "query", "plan", "keyspace"}, e
        assert e.get("comment") and e.get("query"), e
        key = (e["query"], e.get("keyspace"))
        assert key not in seen, f"duplicate query {e['query']!r}"
        seen.add(key)
    if not UPDATE:
        assert path.read_text() == _dump(entries), f"{path.name}: not in canonical form (regenerate it)"
