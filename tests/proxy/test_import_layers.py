"""The proxy's dependencies run one way: front end (protocol) -> executor -> session and
cluster state -> planner / engine -> shard pools. Checked on the source with ``ast`` (every
import, also those only for type checking), so an upward import, an import cycle or a
function-local import that hides one fails here rather than in review."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.python_source import parse_file

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("proxy", "rewriter", "vschema", "sqltext")

# proxy.fast_path.protocol answers COM_QUERY and COM_STMT_EXECUTE on the client socket itself (protocol
# modules, with binary_result's re-encoding of rows for the client).
FRONT_END = (
    "proxy.server", "proxy.connection", "proxy.prepared", "proxy.cli", "proxy.fast_path.protocol",
    "proxy.fast_path.binary_result",
)
EXECUTOR = (
    "proxy.executor", "proxy.planning", "proxy.show", "proxy.system_variables",
    "proxy.vschema_statements", "proxy.vstream_statement", "proxy.reshard_statement",
)
SESSION_AND_STATE = ("proxy.session", "proxy.vcursor", "proxy.cluster_state")
SERVICES = (
    "proxy.live_vschema", "proxy.messaging", "proxy.topics", "proxy.twopc", "proxy.observability",
    "proxy.schema_tracker", "proxy.processlist", "proxy.cdc", "proxy.spark",
)
# What the engine may take from the planner's package: the plan it executes (nodes), its SQL
# templates and collation keys. Never a planner module.
PLAN_MODEL = ("rewriter.nodes", "rewriter.sqltemplate", "rewriter.collation")

# Function-local project imports that stay, and why. Anything else is hoisted or fixed.
LOCAL_IMPORTS_ALLOWED = {
    # Each subcommand loads what it runs (`shardgate --help` does not start the proxy stack).
    "proxy.cli": "subcommands",
    # The CDC decoder zygote loads the decoder before its first fork, not in the parent.
    "proxy.cdc.decoder_launcher": "zygote",
    # The decoder processes import the proxy.cdc package; the serving topology (pools, the
    # cluster package) loads only where `shardgate cdc` reads it.
    "proxy.cdc.runner": "decoder processes stay light",
    # pyspark is an optional, heavy dependency: loaded only inside Spark.
    "proxy.spark": "pyspark",
    "proxy.spark.source": "pyspark",
    "proxy.spark.topology": "pyspark",
}


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int
    where: str  # "module" | "type_checking" | "function"


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports_of(module: str, path: Path) -> Iterator[Import]:
    def targets(node: ast.Import | ast.ImportFrom) -> Iterator[str]:
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] in PACKAGES)
            return
        if node.level or not node.module or node.module.split(".")[0] not in PACKAGES:
            return
        for a in node.names:
            sub = f"{node.module}.{a.name}"
            yield sub if sub in MODULES else node.module

    def walk(node: ast.AST, where: str) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = "function"
            elif isinstance(child, ast.If) and where == "module" and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), "type_checking")
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield from (Import(module, t, child.lineno, inner) for t in targets(child))
            else:
                yield from walk(child, inner)

    yield from walk(parse_file(path), "module")


IMPORTS = [imp for module, path in sorted(MODULES.items()) for imp in _imports_of(module, path)]


def _in(module: str, group: tuple[str, ...]) -> bool:
    return any(module == g or module.startswith(g + ".") for g in group)


def _violations(
    importers: tuple[str, ...], forbidden: tuple[str, ...], allowed: tuple[str, ...] = (), *, outside: bool = False
) -> list[str]:
    """Imports of ``forbidden`` modules (less ``allowed``) by ``importers`` (``outside``: by
    every module not among them)."""
    return [
        f"{i.importer}:{i.line} imports {i.target}"
        for i in IMPORTS
        if _in(i.importer, importers) != outside and _in(i.target, forbidden) and not _in(i.target, allowed)
    ]


def test_only_the_front_end_imports_the_front_end() -> None:
    assert _violations(FRONT_END, FRONT_END, outside=True) == []


def test_only_the_front_end_and_the_executor_import_the_executor() -> None:
    assert _violations(FRONT_END + EXECUTOR, EXECUTOR, outside=True) == []


def test_the_session_and_the_services_do_not_reach_up_to_the_executor_or_front_end() -> None:
    assert _violations(SESSION_AND_STATE + SERVICES, EXECUTOR + FRONT_END) == []


def test_the_engine_imports_the_plan_model_but_no_planner_and_nothing_above_it() -> None:
    engine = ("proxy.engine",)
    assert _violations(engine, ("rewriter",), allowed=PLAN_MODEL) == []
    assert _violations(engine, FRONT_END + EXECUTOR + SESSION_AND_STATE + SERVICES) == []


def test_the_planner_and_vschema_do_not_import_the_proxy() -> None:
    assert _violations(("rewriter", "vschema"), ("proxy",)) == []


def test_sql_text_helpers_import_nothing_of_the_project() -> None:
    """The lexer, quoter and literal renderer sit under everything (the CDC core and Spark use
    them without loading the planner)."""
    assert _violations(("sqltext",), ("proxy", "rewriter", "vschema")) == []


def test_the_shard_pools_import_nothing_above_them() -> None:
    pools = ("proxy.pools", "proxy.row_packets")
    above = FRONT_END + EXECUTOR + SESSION_AND_STATE + SERVICES + ("rewriter",)
    assert _violations(pools, above + ("proxy.engine",), allowed=("proxy.engine.result",)) == []


def test_no_function_local_project_import_outside_the_allow_list() -> None:
    hidden = [
        f"{i.importer}:{i.line} imports {i.target} inside a function"
        for i in IMPORTS
        if i.where == "function" and i.importer not in LOCAL_IMPORTS_ALLOWED
    ]
    assert hidden == []


def test_the_allow_list_holds_only_modules_that_still_need_it() -> None:
    still = {i.importer for i in IMPORTS if i.where == "function"}
    # A module that is gone (the planner redesign replaces some) is not a stale entry.
    assert sorted(set(LOCAL_IMPORTS_ALLOWED) & set(MODULES) - still) == []


def test_module_level_imports_form_no_cycle() -> None:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in IMPORTS:
        if i.where == "module" and i.target in MODULES and i.target != i.importer:
            edges[i.importer].add(i.target)
    cycles = _strongly_connected(edges)
    assert [sorted(c) for c in cycles if len(c) > 1] == []


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (the module graph is deep enough to matter)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(component)
    return found


def test_the_layering_check_sees_an_upward_import() -> None:
    """The checks above would pass on an empty import list: make sure they read real ones."""
    assert any(i.importer == "proxy.connection" and i.target == "proxy.executor" for i in IMPORTS)
    assert _strongly_connected({"a": {"b"}, "b": {"a"}, "c": set()}) in ([["b", "a"], ["c"]], [["a", "b"], ["c"]])
