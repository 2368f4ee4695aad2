"""Deep and long statements are planned, or refused with MySQL's own error (1064 "memory
exhausted", 1436 "Thread stack overrun", 1473 "Too high level of nesting for select"),
never an internal error, never a crash (``rewriter.dialect``'s nesting guard)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from rewriter import PlanCache, plan_query
from rewriter.errors import ParseError, PlanningError, SelectNestingTooDeep, StackOverrun
from tests.conftest import REPO_ROOT
from tests.rewriter.helpers import explain


def _plan(vschema: Any, sql: str) -> Any:
    return plan_query(sql, vschema, "customer", PlanCache())


def _ors(column: str, n: int) -> str:
    return "select * from customer where " + " or ".join(f"{column} = {i}" for i in range(n))


def _nested_in(n: int) -> str:
    return ("select * from customer where customer_id in "
            + "(select customer_id from customer where customer_id in " * n + "(1)" + ")" * n)


def test_5000_ors_on_the_vindex_column_route_to_the_shards_of_those_values(vschema: Any) -> None:
    plan, bindvars = _plan(vschema, _ors("customer_id", 5000))
    assert plan.opcode == "MultiEqual"
    assert [bindvars[v.name] for v in plan.values] == list(range(5000))
    literal = explain(vschema, _ors("customer_id", 5000))
    assert (literal["Variant"], literal["Values"]) == (
        "MultiEqual", ["(" + ", ".join(str(i) for i in range(5000)) + ")"])


@pytest.mark.parametrize("sql", [
    _ors("tenant_id", 5000),
    "select * from customer where " + " and ".join(f"tenant_id <> {i}" for i in range(5000)),
    "select * from customer where " + " xor ".join(f"tenant_id = {i}" for i in range(5000)),
    "select count(*) from customer where " + " or ".join(f"(tenant_id = {i} and email = 'e{i}')" for i in range(2000)),
])
def test_5000_terms_off_the_vindex_are_planned(vschema: Any, sql: str) -> None:
    plan, _ = _plan(vschema, sql)
    assert plan is not None


@pytest.mark.parametrize("sql", [
    "select * from customer where " + "(" * 1000 + "customer_id = 1" + ")" * 1000,
    "select " + "(" * 1000 + "customer_id" + ")" * 1000 + " from customer where customer_id = 1",
])
def test_1000_nested_parentheses_are_planned(vschema: Any, sql: str) -> None:
    plan, _ = _plan(vschema, sql)
    assert plan.opcode == "EqualUnique"
    assert plan.query.text() == sql.replace("1", ":vtg1")  # the client's text goes to the shard


@pytest.mark.parametrize("sql", [
    "select " + "1 + (" * 1000 + "1" + ")" * 1000 + " from customer",
    "select " + "abs(" * 1000 + "customer_id" + ")" * 1000 + " from customer",
    "select " + "case when customer_id then " * 1000 + "1" + " end" * 1000 + " from customer",
    "select * from customer where " + "not " * 1000 + "customer_id",
])
def test_1000_levels_of_expression_are_refused_with_mysqls_stack_overrun(vschema: Any, sql: str) -> None:
    with pytest.raises(StackOverrun) as e:
        _plan(vschema, sql)
    assert e.value.code == 1436
    assert e.value.message.startswith("Thread stack overrun: ")
    assert e.value.message.endswith(" bytes needed. Use 'mysqld --thread_stack=#' to specify a bigger stack.")


def test_1000_nested_subqueries_are_refused_as_mysql_does(vschema: Any) -> None:
    for sql in (_nested_in(1000), "select " + "(select " * 1000 + "1" + ")" * 1000):
        with pytest.raises(SelectNestingTooDeep) as e:
            _plan(vschema, sql)
        assert (e.value.code, e.value.message) == (1473, "Too high level of nesting for select")


def test_select_nesting_limit_is_mysqls_63(vschema: Any) -> None:
    try:
        _plan(vschema, _nested_in(63))
    except PlanningError as e:  # whatever the planner says, not the nesting error
        assert e.code != 1473
    with pytest.raises(SelectNestingTooDeep):
        _plan(vschema, _nested_in(64))


@pytest.mark.parametrize("sql", [
    "select " + "(" * 100_000 + "1" + ")" * 100_000,
    "select " + "not " * 100_000 + "1",
])
def test_100000_levels_are_mysqls_parser_error(vschema: Any, sql: str) -> None:
    with pytest.raises(ParseError) as e:
        _plan(vschema, sql)
    assert e.value.code == 1064
    assert e.value.message == f"memory exhausted near '{sql[7:87]}' at line 1"


def test_a_recursion_error_past_the_guard_reaches_the_client_as_1436(monkeypatch: pytest.MonkeyPatch) -> None:
    import rewriter
    from proxy.errors import ProxyError
    from proxy.planning import plan_statement

    def overflow(*_a: Any, **_k: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(rewriter, "plan_query", overflow)
    state = SimpleNamespace(vschema=None, schema=None)
    with pytest.raises(ProxyError) as e:
        plan_statement(state, "customer", "select 1")  # type: ignore[arg-type]
    assert (e.value.code, e.value.sqlstate) == (1436, "HY000")
    assert "RecursionError" not in e.value.message


_CHILD = textwrap.dedent("""
    import json, sys
    sys.setrecursionlimit(200_000)  # the worst case: nothing but the guard stands before the C stack
    from rewriter import PlanCache, PlanningError, plan_query
    from tests.rewriter.vschema_fixture import make_vschema
    vs = make_vschema()
    out = []
    for sql in json.loads(sys.stdin.read()):
        try:
            plan, _ = plan_query(sql, vs, "customer", PlanCache())
            out.append(str(plan.opcode))
        except PlanningError as e:
            out.append(e.code)
    print(json.dumps(out))
""")


def test_the_deepest_statements_do_not_crash_the_process() -> None:
    """Run where a crash would show: a child process with the recursion limit raised far
    beyond what the C stack holds (without the guard the compiled parser overflows it)."""
    statements = [
        "select " + "(" * 100_000 + "1" + ")" * 100_000,
        "select " + "(" * 20_000 + "1" + ")" * 20_000 + " from customer where customer_id = 1",
        "select " + "abs(" * 20_000 + "1" + ")" * 20_000 + " from customer",
        "select " + "- " * 20_000 + "1 from customer",
        _nested_in(1000),
        "select " + "(select " * 5000 + "1" + ")" * 5000,
        _ors("customer_id", 5000),
    ]
    child = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(statements), capture_output=True,
                           text=True, cwd=REPO_ROOT, timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    assert json.loads(child.stdout) == [1064, "EqualUnique", 1436, 1436, 1473, 1473, "MultiEqual"]
