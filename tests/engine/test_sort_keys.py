"""The scalar sort keys (``compare.row_key_fn``) order and tie rows exactly as the
``(flag, value)`` keys of ``compare.value_key_fn`` do — MySQL's order: NULL first
ascending and last descending, numbers by value, ``utf8mb4_general_ci`` text by its
weights (case, accents, trailing spaces tie), binary strings by bytes."""

from __future__ import annotations

import random
from itertools import groupby

import pytest
from mysql_mimic.types import ColumnType

from proxy.engine.compare import Desc, row_key_fn, value_key_fn
from proxy.engine.result import BINARY_CHARSET, UTF8MB4_GENERAL_CI, Field
from rewriter.nodes import OrderKey

_RND = random.Random(5)
COLUMNS = {
    "int": (Field("i", ColumnType.LONGLONG, BINARY_CHARSET), lambda: b"%d" % _RND.randint(-5, 5)),
    "decimal": (Field("d", ColumnType.NEWDECIMAL, BINARY_CHARSET, decimals=2),
                lambda: b"%.2f" % _RND.choice([-1.5, -0.25, 0, 0.25, 3, 12.5])),
    "double": (Field("f", ColumnType.DOUBLE, BINARY_CHARSET), lambda: b"%r" % _RND.choice([-2.5, 0.0, 1e-3, 7.0])),
    "text": (Field("t", ColumnType.VAR_STRING, UTF8MB4_GENERAL_CI),
             lambda: _RND.choice(["a", "A", "á", "b ", "B", "", " ", "ß", "ss", "z"]).encode()),
    "binary": (Field("b", ColumnType.VAR_STRING, BINARY_CHARSET),
               lambda: _RND.choice([b"", b"\x00", b"a", b"A", b"a\x00", b"ab"])),
}


def _reference_key(fields, keys):
    fns = [(k.column, value_key_fn(fields[k.column]), k.desc) for k in keys]
    return lambda row: tuple(Desc(fn(row[c])) if desc else fn(row[c]) for c, fn, desc in fns)


@pytest.mark.parametrize("desc", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("first,second", [("int", "text"), ("decimal", "binary"), ("double", "int"),
                                          ("text", "decimal"), ("binary", "text")])
def test_scalar_sort_keys_order_and_tie_as_mysql_does(first, second, desc):
    (f1, gen1), (f2, gen2) = COLUMNS[first], COLUMNS[second]
    rows = [(None if _RND.random() < 0.15 else gen1(), None if _RND.random() < 0.15 else gen2())
            for _ in range(400)]
    keys = [OrderKey(0, desc[0]), OrderKey(1, desc[1])]
    ours, ref = row_key_fn([f1, f2], keys), _reference_key([f1, f2], keys)
    by_ours, by_ref = sorted(rows, key=ours), sorted(rows, key=ref)
    # the same sequence of tie groups, each the same multiset of rows
    groups = [sorted(g, key=repr) for _k, g in groupby(by_ours, key=ours)]
    assert groups == [sorted(g, key=repr) for _k, g in groupby(by_ref, key=ref)]
    assert len(groups) < len(rows)  # ties exist
