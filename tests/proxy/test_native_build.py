"""The mypyc-compiled modules (proxy/native_build.py): after the build they are what the proxy
imports, compiled from the present sources; without them the same modules import as pure
Python and answer the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import import_module

import pytest

from proxy import native_build

# A few statements through each compiled module's entry points; their answers, compiled and
# pure, must be equal (the suite's other tests check that the answers are right).
PROBE = r"""
import importlib, json, sys
from decimal import Decimal
for name in sys.argv[1:]:
    importlib.import_module(name)
from rewriter.normalize import normalize, normalize_cached
from sqltext.lexer import first_keyword, split_statements, strip_leading_comments
from sqltext.quoting import sql_literal
from proxy import wire
from proxy.row_packets import scan

statements = [
    "select * from customer where customer_id = 5",
    "SELECT a, 'x''y' FROM t WHERE b IN (1, -2.5, 'z') AND c = -3 /* c */ ORDER BY 1",
    "insert into t(a, b) values (1, 'a'), (2, x'0aff')",
    "/* lead */ update t set a = a + 1 where id = 9 -- tail",
]
out = {
    "normalize": [normalize(s) for s in statements] + [normalize_cached(s) for s in statements * 2],
    "lexer": [first_keyword(s) for s in statements]
    + [strip_leading_comments(s) for s in statements]
    + [split_statements("select 1; select ';'; ")],
    "quoting": [sql_literal(v) for v in (None, 1, -2.5, "it's", b"\x00\xff", Decimal("1.50"), True)],
    "wire": [wire.eof_packet(2).hex(), wire.error_packet(1064, "42000", "bad").hex(), wire.ok_packet(1, 0, 2).hex()],
    "row_packets": repr(scan(bytes([3, 0, 0, 1, 1, 0x61, 0, 5, 0, 0, 2, 0xFE, 0, 0, 2, 0]), 0, [])),
    "files": {m: sys.modules[m].__file__ for m in sys.argv[1:]},
}
print(json.dumps(out, default=repr))
"""

# Imports the listed modules from their .py files even where a compiled one sits beside them.
PURE_FINDER = r"""
import importlib.util, sys
from pathlib import Path
names = set(sys.argv[1:])
class PureSource:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in names:
            return None
        return importlib.util.spec_from_file_location(name, Path.cwd() / (name.replace(".", "/") + ".py"))
sys.meta_path.insert(0, PureSource)
"""

MODULES = [native_build.module_name(p) for p in native_build.MODULES]


def _probe(pure: bool) -> dict:
    code = (PURE_FINDER if pure else "") + PROBE
    env = {**os.environ, "PYTHONPATH": str(native_build.ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *MODULES], cwd=native_build.ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_compiled_modules_are_the_ones_imported_and_current_after_the_build() -> None:
    if os.environ.get("SHARDGATE_PURE_PYTHON") == "1" or not native_build.extensions():
        pytest.skip("pure Python: the compiled modules are not built (make native)")
    assert native_build.is_current(), "a compiled module is older than its source: run `make native`"
    for name in MODULES:
        module = import_module(name)
        assert module.__file__ is not None and module.__file__.endswith(".so"), f"{name} runs as {module.__file__}"


def test_pure_python_fallback_imports_and_answers_as_the_compiled_build() -> None:
    pure = _probe(pure=True)
    assert all(f.endswith(".py") for f in pure["files"].values()), pure["files"]
    compiled = _probe(pure=False)
    del pure["files"], compiled["files"]
    assert pure == compiled
