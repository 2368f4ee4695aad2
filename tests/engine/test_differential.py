"""Random differential testing of the planner + engine against the oracle (one plain
MariaDB database holding the same rows), plus ternary logic partitioning (TLP, as in
SQLancer) through the proxy alone.

The generator builds random statements over the engine test tables (``items``, 3000
rows sharded by ``id``; ``lookup.qty_labels``, unsharded): filters with NULLs and
collation ties, joins (inner / left / right, self joins on and off the vindex,
cross-keyspace), subqueries (scalar, IN / NOT IN over NULLs, EXISTS / NOT EXISTS,
ANY / ALL, correlated or not), derived tables, CTEs (recursive too), window
functions, aggregates (GROUP BY / HAVING / DISTINCT / GROUP_CONCAT / ROLLUP), set
operations (UNION [ALL] / INTERSECT / EXCEPT, mixed) and ORDER BY ... LIMIT with a
total order. Each statement runs through ``plan_query`` (with the tracked schema) and
``proxy.engine`` (executed or streamed) and on the oracle; results are compared as
test_oracle does (values normalised under the collation; multisets unless the
statement has a total ORDER BY).

TLP: for a query ``Q`` and a random predicate ``p``, ``Q`` returns the multiset union of
``Q WHERE p``, ``Q WHERE NOT p`` and ``Q WHERE p IS NULL`` (also for DISTINCT, with
UNION, and for COUNT / SUM / MIN / MAX combined from the three parts).

Case ``i`` of seed ``s`` is generated from ``random.Random(f"{s}:{i}")`` alone, so a
failure is reproduced by its seed and index. ``make test`` runs a fixed seed and a
bounded count; ``SHARDGATE_DIFF_SEED`` / ``SHARDGATE_DIFF_COUNT`` /
``SHARDGATE_TLP_COUNT`` override them. The long run is
``python -m tests.benchmarks.bench_differential --seed S --count N``.

A refusal (1235, ``rewriter.errors.Unsupported``) is "skipped by design": counted and
reported, and must stay a small fraction. Any other error (unless the oracle fails
the same way) or any different result fails, printing the seed, the index, the
query and both results. A TLP inconsistency that the oracle shows as well is
MariaDB's own (seen: ``NOT (NOT (x <> ANY (subquery)))`` over a join), reported but not
failed. The generator steers clear of two MariaDB 10.11 defects that would make the
oracle itself wrong or hang: an ordered window function next to an ``OVER ()`` one and
a differently partitioned one (wrong values), and ``A INTERSECT ALL B EXCEPT ALL C``
(loops forever, ignoring ``max_statement_time``).
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pymysql  # noqa: F401 - named in a warnings filter
import pytest
import pytest_asyncio

from proxy import engine
from proxy.engine.result import Result
from rewriter import PlanCache, plan_query
from rewriter.collation import general_ci_key
from tests.engine.test_oracle import _sortable, normalised
from vschema.tracked_schema import TrackedSchema

SEED = int(os.environ.get("SHARDGATE_DIFF_SEED", "20240611"))
COUNT = int(os.environ.get("SHARDGATE_DIFF_COUNT", "250"))
TLP_COUNT = int(os.environ.get("SHARDGATE_TLP_COUNT", "80"))
MAX_REFUSED = 0.10  # refusals allowed, as a fraction of the cases
CASE_TIMEOUT = 60.0

LABELS = "lookup.qty_labels"  # the oracle has it as plain qty_labels

# -- the tables --------------------------------------------------------------------

# column -> kind; kinds decide literals and which columns may meet in a comparison
ITEMS_COLS = {"id": "id", "customer_id": "cust", "grp": "str", "name": "str", "qty": "qty",
              "price": "dec", "score": "dbl"}
LABEL_COLS = {"qty": "qty", "label": "label"}
NUMERIC = ("id", "cust", "qty", "dec", "dbl", "bal", "amt", "tax", "eid")
DATES = ("date", "dt")
# the wide tables (tests/engine/wide_dataset.py)
ACCT_COLS = {"code": "code", "customer_id": "cust", "region": "region", "balance": "bal", "rate": "dbl",
             "opened": "date", "last_seen": "dt"}
ENTRY_COLS = {"id": "eid", "customer_id": "cust", "account_code": "code", "amount": "amt", "kind": "kind",
              "booked": "date"}
REGION_COLS = {"region": "region", "zone": "zone", "tax": "tax"}
GRP_LABEL_COLS = {"grp": "str", "label": "glabel"}
CODE_VALUES = ["acc1", "ACC2", "åcc3", "Acc4", "acc5 ", "acc10", "ACC11", "acc11 ", "acc70", "acc239", "acc250",
               "Ácc9", "nope", ""]
REGION_LIT_VALUES = ["north", "NORTH", "north ", "süd", "Sud", "", "east", "west", "West ", "nowhere"]
KIND_LIT_VALUES = ["debit", "DEBIT", "credit", "", "fee", "fee ", "Fée"]
DATE_LIT_VALUES = ["2019-06-30", "2020-01-01", "2021-02-28", "2022-03-15", "2022-12-31", "2023-06-01",
                   "2024-02-29", "2023-03-04 12:00:00", "2022-07-01 00:00:00"]
GRP_VALUES = ["a", "A", "b", "B", "B ", "c", "e", "é", "zeta", "Zeta", "x", ""]
NAME_VALUES = ["anna", "bob", "Bob", "Éva", "eva", "ivy", "Ivy", "zed", "gus"]
LABEL_VALUES = ["q0", "q1", "q2", "q3", "q9"]


@dataclass(frozen=True)
class Tab:
    """One table occurrence: how the statement names it and its columns."""

    table: str  # as written in FROM
    alias: str
    cols: dict[str, str]

    def c(self, col: str) -> str:
        return f"{self.alias}.{col}" if self.alias else col

    def ref(self) -> str:
        return f"{self.table} {self.alias}" if self.alias else self.table

    def of_kind(self, *kinds: str) -> list[str]:
        return [c for c, k in self.cols.items() if k in kinds]


def items(alias: str = "") -> Tab:
    return Tab("items", alias, ITEMS_COLS)


def labels(alias: str = "l") -> Tab:
    return Tab(LABELS, alias, LABEL_COLS)


def q(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@dataclass
class Case:
    sql: str
    ordered: bool  # a total ORDER BY: compare sequences, else multisets
    kind: str
    tlp: list[str] | None = None  # TLP: the parts whose union must equal sql
    tlp_mode: str = ""  # "" | "distinct" | "agg:<fn>,<fn>..."


# -- the generator -----------------------------------------------------------------


class Gen:
    def __init__(self, rnd: random.Random) -> None:
        self.r = rnd
        self.n_sub = 0

    # literals
    def lit(self, kind: str, null_ok: bool = True) -> str:
        r = self.r
        if null_ok and r.random() < 0.04:
            return "null"
        if kind == "id":
            return str(r.choice([r.randint(1, 3000), r.randint(1, 200), r.randint(-2, 3005)]))
        if kind == "cust":
            return str(r.randint(0, 61))
        if kind == "qty":
            return str(r.randint(-1, 25))
        if kind == "dec":
            return r.choice([str(r.randint(0, 200)), f"{r.randint(0, 20000) / 100:.2f}"])
        if kind == "dbl":
            return r.choice(["0.5", "1.25", "2", "-3.5", "10.125", "0", "3", "2e0"])
        if kind == "label":
            return q(r.choice(LABEL_VALUES))
        if kind == "bal":
            return r.choice([str(r.randint(-500, 900)), f"{r.randint(-500000, 900000) / 1000:.3f}", "0", "-0.5"])
        if kind in ("amt", "tax"):
            return r.choice([str(r.randint(-300, 300)), f"{r.randint(-30000, 30000) / 100:.2f}", "7.5", "19"])
        if kind == "eid":
            return str(r.randint(-1, 910))
        if kind in DATES:
            return q(r.choice(DATE_LIT_VALUES))
        if kind == "code":
            return q(r.choice(CODE_VALUES))
        if kind in ("region", "zone"):
            return q(r.choice(REGION_LIT_VALUES + ["n", "s", "w"]))
        if kind == "kind":
            return q(r.choice(KIND_LIT_VALUES))
        if kind == "glabel":
            return q(r.choice(["label 0", "label 1", "LABEL 2", "x"]))
        return q(r.choice(GRP_VALUES + NAME_VALUES))

    def lits(self, kind: str, n: int, null_ok: bool = True) -> str:
        return ", ".join(self.lit(kind, null_ok) for _ in range(n))

    # predicates
    def atom(self, t: Tab) -> str:
        r = self.r
        col = r.choice(list(t.cols))
        kind = t.cols[col]
        c = t.c(col)
        roll = r.random()
        if kind in NUMERIC:
            if roll < 0.35:
                return f"{c} {r.choice(['=', '<', '>', '<=', '>=', '<>', '<=>'])} {self.lit(kind)}"
            if roll < 0.45:
                lo = self.lit(kind, False)
                return f"{c} {r.choice(['', 'not '])}between {lo} and {self.lit(kind, False)}"
            if roll < 0.58:
                return f"{c} {r.choice(['in', 'not in'])} ({self.lits(kind, r.randint(1, 4))})"
            if roll < 0.68:
                return f"{c} is {r.choice(['', 'not '])}null"
            nums = t.of_kind(*NUMERIC)
            other = t.c(r.choice(nums))
            return r.choice([
                f"{c} + {other} > {r.randint(0, 60)}",
                f"{c} % {r.randint(2, 5)} = {r.randint(0, 1)}",
                f"{c} * 2 {r.choice(['<', '>='])} {self.lit(kind, False)}",
                f"coalesce({c}, -1) = {self.lit(kind, False)}",
                f"{c} = {other}",
                f"{c} < {other}",
                f"case when {c} > {self.lit(kind, False)} then 1 when {c} is null then null else 0 end = 1",
                f"abs({c} - {self.lit(kind, False)}) <= {r.randint(1, 10)}",
                f"greatest({c}, {self.lit(kind, False)}) = {c}",
            ])
        if kind in DATES:
            d = self.lit(kind, False)
            if roll < 0.35:
                return f"{c} {r.choice(['=', '<', '>', '<=', '>=', '<>', '<=>'])} {self.lit(kind)}"
            if roll < 0.45:
                return f"{c} {r.choice(['', 'not '])}between {d} and {self.lit(kind, False)}"
            if roll < 0.55:
                return f"{c} is {r.choice(['', 'not '])}null"
            return r.choice([
                f"year({c}) {r.choice(['=', '<', '>='])} {r.randint(2019, 2024)}",
                f"month({c}) in ({r.randint(1, 12)}, {r.randint(1, 12)})",
                f"datediff({c}, {d}) {r.choice(['<', '>'])} {r.randint(-400, 400)}",
                f"date_add({c}, interval {r.randint(1, 90)} day) > {d}",
                f"{c} >= date {q(r.choice(DATE_LIT_VALUES[:7]))}",
                f"coalesce({c}, '1999-01-01') < {d}",
                f"dayofweek({c}) = {r.randint(1, 7)}",
            ])
        # strings
        v = self.lit(kind)
        if roll < 0.3:
            return f"{c} {r.choice(['=', '<', '>', '<>', '<=>'])} {v}"
        if roll < 0.45:
            return f"{c} {r.choice(['in', 'not in'])} ({self.lits(kind, r.randint(1, 4))})"
        if roll < 0.6:
            return f"{c} is {r.choice(['', 'not '])}null"
        if roll < 0.75:
            pat = r.choice(["a%", "%a%", "_", "B%", "%e", "z%", "%", "é%", "I%"])
            return f"{c} {r.choice(['like', 'not like'])} {q(pat)}"
        strs = t.of_kind(kind)
        other = t.c(r.choice(strs))
        return r.choice([
            f"{c} = {other}",
            f"ifnull({c}, 'none') = 'none'",
            f"char_length({c}) {r.choice(['=', '>', '<'])} {r.randint(0, 5)}",
            f"upper({c}) = {self.lit(kind, False)}",
            f"concat({c}, 'x') {r.choice(['<', '>'])} {v}",
            f"{c} between {self.lit(kind, False)} and {self.lit(kind, False)}",
        ])

    def sub_atom(self, t: Tab) -> str:
        """A predicate with a subquery; ``t`` must have an alias (correlations name it)."""
        r = self.r
        self.n_sub += 1
        j = f"s{self.n_sub}"
        a = t.alias or t.table
        if "id" in t.cols:
            choices = [
                lambda: f"{a}.qty {r.choice(['in', 'not in'])} (select {j}.qty from {LABELS} {j} "
                        f"where {j}.label {r.choice(['=', '<>'])} {self.lit('label', False)})",
                lambda: f"{a}.qty {r.choice(['in', 'not in'])} (select {j}.qty from items {j} "
                        f"where {j}.customer_id = {self.lit('cust', False)})",
                lambda: f"{a}.customer_id {r.choice(['in', 'not in'])} (select {j}.id from items {j} "
                        f"where {j}.qty = {self.lit('qty', False)} and {j}.id < {r.randint(10, 300)})",
                lambda: f"{a}.id in (select {j}.id from items {j} where {self.atom(items(j))})",
                lambda: f"{r.choice(['', 'not '])}exists (select 1 from items {j} where {j}.customer_id = {a}.id"
                        f"{' and ' + self.atom(items(j)) if r.random() < 0.5 else ''})",
                lambda: f"{r.choice(['', 'not '])}exists (select 1 from items {j} where {j}.id = {a}.customer_id "
                        f"and {self.atom(items(j))})",
                lambda: f"{r.choice(['', 'not '])}exists (select 1 from {LABELS} {j} where {j}.qty = {a}.qty)",
                lambda: f"{r.choice(['', 'not '])}exists (select 1 from items {j} where {j}.id = {a}.id "
                        f"and {self.atom(items(j))})",
                lambda: f"{a}.qty {r.choice(['>', '<', '='])} (select {r.choice(['avg', 'max', 'min'])}({j}.qty) "
                        f"from items {j} where {j}.customer_id = {self.lit('cust', False)})",
                lambda: f"{a}.qty = (select max({j}.qty) from items {j} where {j}.customer_id = {a}.customer_id)",
                lambda: f"{a}.price > (select avg({j}.price) from items {j} where {j}.grp = {a}.grp)",
                lambda: f"{a}.qty {r.choice(['>=', '<', '<>', '='])} {r.choice(['all', 'any', 'some'])} "
                        f"(select {j}.qty from items {j} where {j}.customer_id = {self.lit('cust', False)})",
                lambda: f"{a}.qty {r.choice(['>', '<=', '='])} {r.choice(['all', 'any'])} "
                        f"(select {j}.qty from {LABELS} {j} where {j}.label = {self.lit('label', False)})",
                lambda: f"({a}.qty, {a}.customer_id) in (select {j}.qty, {j}.customer_id from items {j} "
                        f"where {j}.grp = {self.lit('str', False)})",
                lambda: f"{a}.grp {r.choice(['in', 'not in'])} (select {j}.grp from items {j} "
                        f"where {j}.id < {r.randint(5, 60)})",
                lambda: f"{a}.qty {r.choice(['in', 'not in'])} (select {j}.qty from {LABELS} {j} where "
                        f"{j}.label = {self.lit('label', False)} union select {j}x.qty from items {j}x "
                        f"where {j}x.customer_id = {self.lit('cust', False)})",
                lambda: f"{r.choice(['', 'not '])}exists (select 1 from items {j} where {j}.customer_id = "
                        f"{a}.customer_id and {j}.id <> {a}.id and {self.atom(items(j))})",
                lambda: f"{a}.qty {r.choice(['in', 'not in'])} (select {j}.qty from items {j} "
                        f"where {j}.customer_id = {a}.customer_id and {j}.id < {r.randint(50, 3000)})",
                lambda: f"{a}.id {r.choice(['in', 'not in'])} (select {j}.customer_id from items {j} "
                        f"where {j}.qty = {self.lit('qty', False)})",
            ]
        else:
            choices = [
                lambda: f"{a}.qty {r.choice(['in', 'not in'])} (select {j}.qty from items {j} "
                        f"where {j}.customer_id = {self.lit('cust', False)})",
                lambda: f"{r.choice(['', 'not '])}exists (select 1 from items {j} where {j}.qty = {a}.qty "
                        f"and {j}.customer_id = {self.lit('cust', False)})",
            ]
        return r.choice(choices)()

    def pred(self, tabs: list[Tab], depth: int = 2, sub: float = 0.0) -> str:
        r = self.r
        if depth > 0 and r.random() < 0.35:
            op = r.choice(["and", "or", "and", "or", "xor"])
            return f"({self.pred(tabs, depth - 1, sub)} {op} {self.pred(tabs, depth - 1, sub)})"
        if depth > 0 and r.random() < 0.1:
            return f"not ({self.pred(tabs, depth - 1, sub)})"
        t = r.choice(tabs)
        if sub and r.random() < sub:
            return self.sub_atom(t)
        return self.atom(t)

    def restrict(self, t: Tab) -> str:
        """A predicate keeping few rows of an items occurrence (bounds nested loops)."""
        r = self.r
        return r.choice([
            f"{t.c('id')} <= {r.randint(5, 150)}",
            f"{t.c('customer_id')} = {r.randint(1, 60)}",
            f"{t.c('id')} between {(lo := r.randint(1, 2900))} and {lo + r.randint(0, 120)}",
            f"{t.c('customer_id')} in ({r.randint(1, 60)}, {r.randint(1, 60)})",
            f"{t.c('id')} in ({self.lits('id', r.randint(1, 8), False)})",
        ])

    # select items
    def expr(self, t: Tab) -> str:
        r = self.r
        col = r.choice(list(t.cols))
        c = t.c(col)
        kind = t.cols[col]
        if r.random() < 0.6:
            return c
        if kind in NUMERIC:
            return r.choice([f"{c} + 1", f"{c} * 2", f"-{c}", f"coalesce({c}, 0)", f"{c} div 3",
                             f"case when {c} is null then -1 else {c} end", f"round({c}, 1)", f"abs({c})",
                             f"{c} * 1.5", f"{c} + 0.25e0", f"{c} / 3", f"if({c} > 0, {c}, 0)",
                             f"case when {c} < 0 then 'neg' when {c} = 0 then 'zero' else 'pos' end",
                             f"truncate({c}, 1)", f"{c} % 7"])
        if kind in DATES:
            return r.choice([f"year({c})", f"month({c})", f"datediff({c}, '2022-06-01')",
                             f"date_add({c}, interval 3 day)", f"if({c} > '2022-01-01', 'new', 'old')",
                             f"coalesce({c}, '1999-01-01')", f"date({c})", f"last_day({c})"])
        return r.choice([f"upper({c})", f"coalesce({c}, 'none')", f"concat({c}, '-')", f"char_length({c})",
                         f"left({c}, 2)", f"if({c} = '', 'empty', {c})", f"concat_ws('/', {c}, 'z')",
                         f"trim({c})", f"nullif({c}, '')"])

    def select_list(self, tabs: list[Tab], n: int) -> list[str]:
        out = []
        for i in range(n):
            e = self.expr(self.r.choice(tabs))
            plain = re.fullmatch(r"[\w.]+", e) is not None
            if not plain or self.r.random() < 0.3:
                e = f"{e} as e{i}"
            out.append(e)
        return out

    def order_keys(self, cols: list[str], n: int) -> list[str]:
        """``n`` ORDER BY keys naming select items: by position, or by alias when it is unique."""
        r = self.r
        names = self.out_names(cols)
        keys = []
        for i in r.sample(range(len(cols)), min(n, len(cols))):
            alias = " as " in cols[i] and names.count(names[i]) == 1
            keys.append(names[i] if alias and r.random() < 0.5 else str(i + 1))
        return keys

    @staticmethod
    def out_names(items_: list[str]) -> list[str]:
        return [e.rsplit(" as ", 1)[1] if " as " in e else e.split(".")[-1] for e in items_]

    def order_limit(self, keys: list[str], total: bool = True, limit: float = 0.6) -> str:
        """ORDER BY ``keys`` (each asc/desc, shuffled) and maybe LIMIT/OFFSET."""
        r = self.r
        if not keys:
            return ""
        ks = list(keys)
        tail = ks[-1:] if total else []
        head = ks[:-1] if total else ks
        r.shuffle(head)
        sql = " order by " + ", ".join(f"{k}{r.choice(['', ' desc', ' asc'])}" for k in head + tail)
        if r.random() < limit:
            sql += f" limit {r.randint(0, 40)}"
            if r.random() < 0.4:
                sql += f" offset {r.randint(0, 60)}"
        return sql

    # statements
    def simple(self) -> Case:
        r = self.r
        t = items(r.choice(["", "t", "t"]))
        if r.random() < 0.1:
            cols = ["*"] if not t.alias or r.random() < 0.5 else [f"{t.alias}.*"]
        else:
            cols = self.select_list([t], r.randint(1, 4))
        sub = 0.3 if t.alias else 0.0
        where = f" where {self.pred([t], 2, sub)}" if r.random() < 0.85 else ""
        sql = f"select {', '.join(cols)} from {t.ref()}{where}"
        if r.random() < 0.55:
            keys = self.order_keys(cols, r.randint(0, 2)) if cols[0] != "*" and not cols[0].endswith(".*") else []
            if r.random() < 0.3:  # a key the select list does not have
                keys.append(r.choice([t.c("qty"), f"coalesce({t.c('price')}, 0)", t.c("grp"), f"-{t.c('score')}"]))
            sql += self.order_limit([*keys, t.c("id")])
            return Case(sql, True, "simple")
        return Case(sql, False, "simple")

    AGGS = ["count(*)", "count({c})", "count(distinct {c})", "sum({n})", "sum(distinct {n})", "min({c})",
            "max({c})", "avg({n})", "group_concat({g} order by {g}, {id})",
            "group_concat(distinct {i} order by {i} desc separator ';')", "max({n}) - min({n})",
            "sum({n}) / count(*)", "count(*) * 2", "std({n})", "variance({n})", "bit_or({i})",
            "bit_xor({i})", "count({c}) + count(distinct {c})"]

    def agg_expr(self, t: Tab) -> str:
        r = self.r
        a = r.choice(self.AGGS)
        return a.format(c=t.c(r.choice(list(t.cols))), n=t.c(r.choice(t.of_kind(*NUMERIC))),
                        i=t.c(r.choice(t.of_kind("id", "cust", "qty"))),
                        g=t.c(r.choice(t.of_kind("id", "cust", "qty", "str") or list(t.cols))),
                        id=t.c(r.choice(t.of_kind("id") or list(t.cols))))

    def group_key(self, t: Tab) -> str:
        r = self.r
        col = t.c(r.choice(list(t.cols)))
        if r.random() < 0.8:
            return col
        return r.choice([f"{col} is null", f"coalesce({col}, 0)" if t.cols.get(col.split('.')[-1]) in NUMERIC
                         else f"upper({col})"])

    def aggregate(self, tabs: list[Tab] | None = None, frm: str | None = None, where: str = "") -> Case:
        r = self.r
        if tabs is None:
            t = items(r.choice(["", "t"]))
            tabs, frm = [t], t.ref()
            if r.random() < 0.8:
                where = f" where {self.pred(tabs, 2, 0.2 if t.alias else 0)}"
        keys = []
        for _ in range(r.choice([0, 1, 1, 1, 2, 2])):
            k = self.group_key(r.choice(tabs))
            if k not in keys:
                keys.append(k)
        aggs = [self.agg_expr(r.choice(tabs)) for _ in range(r.randint(1, 3))]
        sel = [f"{k} as k{i}" for i, k in enumerate(keys)] + [f"{a} as a{i}" for i, a in enumerate(aggs)]
        if r.random() < 0.3:  # MySQL names the column after its text
            sel = [k for k in keys] + aggs
        sql = f"select {', '.join(sel)} from {frm}{where}"
        if not keys:
            return Case(sql, True, "aggregate")
        sql += " group by " + ", ".join(keys)
        if r.random() < 0.1 and len(sel) == len(keys) + len(aggs):
            if not any("group_concat" in a or "distinct" in a for a in aggs):
                return Case(sql + " with rollup", False, "aggregate")
        if r.random() < 0.4:
            it = next(t for t in tabs if "id" in t.cols)
            h = r.choice([f"count(*) > {r.randint(0, 120)}", f"sum({it.c('qty')}) > {r.randint(0, 1500)}",
                          f"min({it.c('id')}) < {r.randint(1, 200)}", f"max({it.c('price')}) >= 150",
                          f"count(distinct {it.c('grp')}) >= {r.randint(1, 6)}",
                          f"avg({it.c('qty')}) is null"])
            sql += f" having {h}"
        if r.random() < 0.5:
            key_pos = [str(i + 1) for i in range(len(keys))]
            # not by a double computed from many rows: equal values may differ in their last bits
            front = [str(len(keys) + 1 + i) for i, a in enumerate(aggs)
                     if not any(x in a for x in ("std(", "variance(", "score", "/"))] if r.random() < 0.4 else []
            head = r.sample(front, r.randint(0, len(front)))
            ks = head + key_pos
            r.shuffle(ks)
            sql += " order by " + ", ".join(f"{k}{r.choice(['', ' desc'])}" for k in ks)
            if r.random() < 0.5:
                sql += f" limit {r.randint(0, 20)}"
            return Case(sql, True, "aggregate")
        return Case(sql, False, "aggregate")

    def distinct(self) -> Case:
        r = self.r
        t = items(r.choice(["", "t"]))
        cols = [t.c(c) for c in r.sample(["grp", "qty", "customer_id", "name", "score", "price"], r.randint(1, 3))]
        where = f" where {self.pred([t], 2, 0.2 if t.alias else 0)}" if r.random() < 0.7 else ""
        if r.random() < 0.2:
            return Case(f"select count(distinct {', '.join(cols)}) from {t.ref()}{where}", True, "distinct")
        sql = f"select distinct {', '.join(cols)} from {t.ref()}{where}"
        if r.random() < 0.4:
            sql += " order by " + ", ".join(f"{i + 1}{r.choice(['', ' desc'])}" for i in range(len(cols)))
            if r.random() < 0.6:
                sql += f" limit {r.randint(1, 30)}"
            return Case(sql, True, "distinct")
        return Case(sql, False, "distinct")

    def join_from(self) -> tuple[list[Tab], str, str, list[str]]:
        """(tables, FROM clause, a restricting WHERE, total-order keys)."""
        r = self.r
        a, b, lb = items("a"), items("b"), labels("l")
        shape = r.randint(0, 11)
        if shape == 0:  # same vindex
            return [a, b], "items a join items b on a.id = b.id", self.restrict(a) if r.random() < 0.4 else "", \
                ["a.id"]
        if shape == 1:
            return [a, b], "items a join items b on b.id = a.customer_id", self.restrict(a), ["a.id"]
        if shape == 2:
            extra = f" and {self.atom(b)}" if r.random() < 0.5 else ""
            return [a, b], f"items a left join items b on b.id = a.customer_id{extra}", self.restrict(a), ["a.id"]
        if shape == 3:
            return [a, b], "items a join items b on a.customer_id = b.customer_id", \
                f"{self.restrict(a)} and {self.restrict(b)}", ["a.id", "b.id"]
        if shape == 4:
            i = items("i")
            kind = r.choice(["join", "left join"])
            return [i, lb], f"items i {kind} {LABELS} l on l.qty = i.qty", self.restrict(i) if r.random() < 0.7 else "", \
                ["i.id"]
        if shape == 5:
            i = items("i")
            return [lb, i], f"{LABELS} l join items i on i.qty = l.qty", \
                f"l.label = {self.lit('label', False)} and {self.restrict(i)}", ["i.id"]
        if shape == 6:
            return [a, b, lb], ("items a join items b on b.id = a.customer_id "
                               f"{r.choice(['join', 'left join'])} {LABELS} l on l.qty = b.qty"), \
                self.restrict(a), ["a.id"]
        if shape == 7:
            return [a, b], "items a join items b using (id)", self.restrict(a) if r.random() < 0.5 else "", ["a.id"]
        if shape == 8:
            return [a, b], "items a, items b", \
                f"a.customer_id = b.id and {self.restrict(a)}", ["a.id"]
        if shape == 9:
            i = items("i")
            return [lb, i], f"{LABELS} l left join items i on i.qty = l.qty and {self.restrict(i)}", "", \
                ["l.qty", "i.id"]
        if shape == 10:
            return [a, b], "items a left join items b on b.customer_id = a.id and b.qty > a.qty", \
                self.restrict(a), ["a.id", "b.id"]
        i = items("i")
        return [lb, i], f"items i right join {LABELS} l on l.qty = i.qty and {self.restrict(i)}", "", \
            ["l.qty", "i.id"]

    def join(self) -> Case:
        r = self.r
        tabs, frm, restrict, order = self.join_from()
        conds = [c for c in [restrict] if c]
        if r.random() < 0.6:
            conds.append(self.pred(tabs, 1, 0.1))
        where = f" where {' and '.join(conds)}" if conds else ""
        if r.random() < 0.3:
            return self.aggregate(tabs, frm, where)
        cols = self.select_list(tabs, r.randint(1, 4))
        sql = f"select {', '.join(cols)} from {frm}{where}"
        if r.random() < 0.5:
            keys = self.order_keys(cols, r.randint(0, 2))
            sql += " order by " + ", ".join(f"{k}{r.choice(['', ' desc'])}" for k in keys + order)
            if r.random() < 0.6:
                sql += f" limit {r.randint(0, 30)}"
            return Case(sql, True, "join")
        return Case(sql, False, "join")

    def subquery(self) -> Case:
        r = self.r
        t = items("t")
        shape = r.randint(0, 7)
        if shape <= 2:  # a subquery predicate in WHERE
            conds = [self.sub_atom(t)]
            if r.random() < 0.6:
                conds.append(self.pred([t], 1))
            cols = self.select_list([t], r.randint(1, 3))
            sql = f"select {', '.join(cols)} from items t where {' and '.join(conds)}"
            if r.random() < 0.4:
                return Case(sql + self.order_limit(["t.id"]), True, "subquery")
            return Case(sql, False, "subquery")
        if shape == 3:  # scalar subqueries in the select list
            s = r.choice([
                "(select count(*) from items j where j.customer_id = t.id)",
                "(select l.label from lookup.qty_labels l where l.qty = t.qty)",
                "(select max(j.price) from items j where j.grp = t.grp and j.id < 100)",
                "(select count(*) from lookup.qty_labels)",
                "(select min(j.id) from items j where j.id > t.id)",
                "(select sum(j.qty) from items j where j.id = t.customer_id)",
            ])
            return Case(f"select t.id, {s} as sq from items t where {self.restrict(t)}", False, "subquery")
        if shape == 4:  # derived table over an aggregation
            k = r.choice(["qty", "grp", "customer_id"])
            inner = f"select {k} as k, count(*) as n, sum(qty) as s, max(price) as m from items"
            if r.random() < 0.5:
                inner += f" where {self.pred([items()], 1)}"
            inner += f" group by {k}"
            outer_where = r.choice([f"d.n > {r.randint(0, 400)}", "d.s is null", f"d.m < {r.randint(100, 200)}",
                                    f"d.k is not null and d.n < {r.randint(50, 500)}"])
            sel = r.choice(["d.*", "d.k, d.n", "count(*), sum(d.n)", "d.k, d.n * 2 as n2"])
            sql = f"select {sel} from ({inner}) d where {outer_where}"
            return Case(sql, sel.startswith("count"), "derived")
        if shape == 5:  # derived table with ORDER BY + LIMIT inside
            inner = (f"select id, qty, grp from items where {self.pred([items()], 1)} order by "
                     f"{r.choice(['qty', 'grp', 'id desc', 'qty desc'])}, id limit {r.randint(1, 50)}")
            sel = r.choice(["d.id, d.qty", "count(*), sum(d.qty)", "d.grp, count(*)"])
            sql = f"select {sel} from ({inner}) d"
            if sel.startswith("d.grp"):
                sql += " group by d.grp"
            return Case(sql, sel.startswith("count"), "derived")
        if shape == 6:  # derived table joined
            sql = (f"select d.customer_id, d.s, l.label from (select customer_id, sum(qty) as s from items "
                   f"where {self.pred([items()], 1)} group by customer_id) d "
                   f"{r.choice(['join', 'left join'])} {LABELS} l on l.qty = d.customer_id % 25")
            return Case(sql, False, "derived")
        # subquery in the select list of an aggregate / HAVING
        sql = (f"select t.qty, count(*) as c from items t where t.qty {r.choice(['in', 'not in'])} "
               f"(select l.qty from {LABELS} l) group by t.qty having count(*) > "
               f"(select count(*) from {LABELS})")
        return Case(sql, False, "subquery")

    def cte(self) -> Case:
        r = self.r
        shape = r.randint(0, 5)
        if shape == 0:
            sql = (f"with c as (select customer_id, count(*) as n, sum(qty) as s from items where "
                   f"{self.pred([items()], 1)} group by customer_id) select * from c where c.n > {r.randint(0, 60)}")
            return Case(sql, False, "cte")
        if shape == 1:
            sql = ("with c as (select qty, count(*) as n from items group by qty) "
                   f"select a.qty, b.n from c a join c b on a.qty = b.qty + {r.randint(1, 3)}")
            return Case(sql, False, "cte")
        if shape == 2:
            k = r.randint(3, 30)
            sql = (f"with recursive r (n) as (select 0 union all select n + 1 from r where n < {k}) "
                   f"select r.n, count(t.id) from r left join items t on t.qty = r.n "
                   f"{'and ' + self.atom(items('t')) if r.random() < 0.5 else ''} group by r.n order by r.n")
            return Case(sql, True, "cte")
        if shape == 3:
            sql = (f"with a as (select id, qty from items where {self.restrict(items())}), "
                   f"b as (select qty, count(*) as n from a group by qty) "
                   f"select b.qty, b.n, l.label from b left join {LABELS} l on l.qty = b.qty")
            return Case(sql, False, "cte")
        if shape == 4:
            sql = (f"with t as (select * from items where {self.pred([items()], 2)}) "
                   f"select t.id, t.grp from t where t.id in (select customer_id from t)")
            return Case(sql, False, "cte")
        sql = (f"with x as (select id from items where {self.restrict(items())}) "
               f"select count(*) from x")
        return Case(sql, True, "cte")

    WINDOWS = [
        "row_number() over (partition by {p} order by {t}id)",
        "rank() over (order by {t}qty)",
        "dense_rank() over (partition by {p} order by {t}price desc)",
        "ntile(3) over (order by {t}id)",
        "sum({t}qty) over (partition by {p})",
        "sum({t}price) over (partition by {t}customer_id order by {t}id rows between 1 preceding and current row)",
        "lag({t}qty) over (order by {t}id)",
        "lead({t}name, 2) over (partition by {t}customer_id order by {t}id)",
        "first_value({t}qty) over (partition by {p} order by {t}id)",
        "max({t}score) over (partition by {p})",
        "avg({t}qty) over (order by {t}id rows between 2 preceding and 2 following)",
        "percent_rank() over (order by {t}qty, {t}id)",
        "count({t}grp) over (partition by {t}qty order by {t}id range between unbounded preceding and current row)",
    ]

    def window(self) -> Case:
        r = self.r
        t = items(r.choice(["", "t"]))
        pre = f"{t.alias}." if t.alias else ""
        if r.random() < 0.15:
            sql = (f"select {pre}qty, count(*) as c, rank() over (order by count(*) desc) as rk "
                   f"from {t.ref()} group by {pre}qty")
            return Case(sql, False, "window")
        wins = [w.format(t=pre, p=pre + r.choice(["qty", "grp", "customer_id", "name", "id"]))
                for w in r.sample(self.WINDOWS, r.randint(1, 3))]
        if r.random() < 0.1:
            # alone: MariaDB 10.11 computes an ordered window wrongly next to an OVER () one
            # and a differently partitioned one (e.g. lag() over (order by id), dense_rank()
            # over (partition by customer_id order by price), count(*) over ())
            wins = [r.choice(["count(*) over ()", f"max({pre}qty) over ()", f"sum({pre}price) over ()"])]
        cols = [f"{pre}id"] + [f"{w} as w{i}" for i, w in enumerate(wins)]
        where = f" where {self.pred([t], 1, 0.1 if t.alias else 0)}" if r.random() < 0.7 else ""
        sql = f"select {', '.join(cols)} from {t.ref()}{where}"
        if r.random() < 0.4:
            sql += f" order by {r.choice(['w0, ', ''])}{pre}id limit {r.randint(1, 40)}"
            return Case(sql, True, "window")
        if r.random() < 0.2:
            return Case(f"select * from ({sql}) d where d.w0 is not null", False, "window")
        return Case(sql, False, "window")

    def setop_arm(self, types: list[str]) -> str:
        r = self.r
        if r.random() < 0.15 and types == ["int"]:
            return f"select l.qty from {LABELS} l where l.label {r.choice(['=', '<>'])} {self.lit('label', False)}"
        t = items()
        ints = r.sample(["id", "customer_id", "qty"], 2)
        cols = [ints.pop() if ty == "int" else r.choice(["grp", "name"]) if ty == "str" else "price"
                for ty in types]
        where = f" where {self.pred([t], 1)}" if r.random() < 0.9 else ""
        return f"select {', '.join(cols)} from items{where}"

    def setop(self) -> Case:
        r = self.r
        types = r.choice([["int"], ["int"], ["str"], ["int", "str"], ["dec"], ["int", "int"]])
        n = r.choice([2, 2, 2, 3])
        ops = ["union", "union all", "union", "union all", "intersect", "except", "intersect all", "except all"]
        sql = self.setop_arm(types)
        for _ in range(n - 1):
            arm = self.setop_arm(types)
            if r.random() < 0.2:
                arm = f"({arm})"
            op = r.choice(ops)
            if op.endswith(" all") and (" intersect all " in sql or " except all " in sql):
                # MariaDB 10.11 loops forever on some A INTERSECT ALL B EXCEPT ALL C (ignoring
                # max_statement_time and shutdown): one INTERSECT/EXCEPT ALL per statement
                op = op.removesuffix(" all")
            sql = f"{sql} {op} {arm}"
        if r.random() < 0.2:
            return Case(f"select count(*) from ({sql}) u", True, "setop")
        if r.random() < 0.35:
            sql += " order by " + ", ".join(f"{i + 1}{r.choice(['', ' desc'])}" for i in range(len(types)))
            if r.random() < 0.6:
                sql += f" limit {r.randint(0, 25)}"
            return Case(sql, True, "setop")
        return Case(sql, False, "setop")

    def mixed(self) -> Case:
        """Shapes nesting the others: derived tables over joins, DISTINCT over joins,
        scalar subqueries next to GROUP BY, LIMIT inside set operations, constants."""
        r = self.r
        shape = r.randint(0, 6)
        if shape == 0:
            tabs, frm, restrict, _order = self.join_from()
            cols = [c for c in self.select_list(tabs, r.randint(1, 3))]
            names = [f"e{i}" for i in range(len(cols))]
            cols = [f"{c.rsplit(' as ', 1)[0]} as {n}" for c, n in zip(cols, names, strict=True)]
            inner = f"select {', '.join(cols)} from {frm}" + (f" where {restrict}" if restrict else "")
            outer = r.choice([f"select count(*), count(distinct d.e0) from ({inner}) d",
                              f"select d.e0, count(*) from ({inner}) d group by d.e0",
                              f"select * from ({inner}) d where d.e0 is not null"])
            return Case(outer, outer.startswith("select count"), "mixed")
        if shape == 1:
            tabs, frm, restrict, _order = self.join_from()
            col = r.choice([t.c(c) for t in tabs for c in t.cols])
            sql = f"select distinct {col} from {frm}" + (f" where {restrict}" if restrict else "")
            return Case(sql, False, "mixed")
        if shape == 2:
            sql = (f"select t.qty, count(*) as c, (select count(*) from {LABELS} l where l.qty = t.qty) as lc "
                   f"from items t where {self.pred([items('t')], 1)} group by t.qty")
            return Case(sql, False, "mixed")
        if shape == 3:
            lim = r.randint(1, 20)
            sql = (f"(select id, qty from items where {self.pred([items()], 1)} order by qty, id limit {lim}) "
                   f"{r.choice(['union', 'union all'])} (select id, qty from items where {self.pred([items()], 1)} "
                   f"order by id desc limit {r.randint(1, 20)})")
            return Case(sql, False, "mixed")
        if shape == 4:
            sql = (f"select 1 as one, null as nothing, 'x' as x, t.id, {r.randint(-5, 5)} + t.qty as q "
                   f"from items t where {self.pred([items('t')], 2, 0.2)}")
            return Case(sql + self.order_limit(["t.id"]), True, "mixed")
        if shape == 5:
            inner = (f"select customer_id, count(*) as n from items where {self.pred([items()], 1)} "
                     f"group by customer_id")
            sql = (f"select d.customer_id, d.n, i.id from ({inner}) d join items i on i.id = d.customer_id "
                   f"where d.n > {r.randint(0, 60)}")
            return Case(sql, False, "mixed")
        sql = (f"select e.k, count(*) from (select d.k from (select qty % 5 as k, id from items where "
               f"{self.pred([items()], 1)}) d where d.id > {r.randint(0, 2000)}) e group by e.k order by e.k")
        return Case(sql, True, "mixed")

    # -- the wide tables: other vindex types, dates, decimals, a reference table --------

    def wide_table(self, alias: str) -> tuple[Tab, str]:
        """(one of the wide tables, its total-order key)."""
        t = self.r.choice([Tab("accounts", alias, ACCT_COLS), Tab("entries", alias, ENTRY_COLS),
                           Tab("entries", alias, ENTRY_COLS)])
        return t, t.c("code" if t.table == "accounts" else "id")

    def wide_simple(self) -> Case:
        """One wide table: filters over dates / decimals / collation ties, routed equalities
        on the VARCHAR vindex and the lookup vindex, ORDER BY with NULLs, LIMIT .. OFFSET."""
        r = self.r
        t, key = self.wide_table(r.choice(["", "w"]))
        cols = self.select_list([t], r.randint(1, 4))
        conds = []
        if r.random() < 0.3:  # a routed equality / IN on a vindex column
            col = "code" if t.table == "accounts" else r.choice(["account_code", "customer_id"])
            kind = t.cols[col]
            conds.append(r.choice([f"{t.c(col)} = {self.lit(kind, False)}",
                                   f"{t.c(col)} in ({self.lits(kind, r.randint(1, 4), False)})"]))
        if r.random() < 0.8:
            conds.append(self.pred([t], 2))
        where = f" where {' and '.join(conds)}" if conds else ""
        sql = f"select {', '.join(cols)} from {t.ref()}{where}"
        if r.random() < 0.6:
            keys = self.order_keys(cols, r.randint(0, 2))
            if r.random() < 0.4:  # a nullable key the select list does not have
                keys.append(t.c(r.choice([c for c in t.cols if c not in ("code", "id")])))
            return Case(sql + self.order_limit([*keys, key]), True, "wide")
        return Case(sql, False, "wide")

    def wide_from(self) -> tuple[list[Tab], str, list[str]]:
        """A join of 2-4 tables mixing the VARCHAR-vindex, xxhash and hash tables with the
        reference and unsharded ones: (tables, FROM, total-order keys)."""
        r = self.r
        a, e = Tab("accounts", "a", ACCT_COLS), Tab("entries", "e", ENTRY_COLS)
        g, lb = Tab("regions", "g", REGION_COLS), labels("l")
        shape = r.randint(0, 7)
        if shape == 0:
            return [a, e], f"accounts a {r.choice(['join', 'left join'])} entries e on e.account_code = a.code", \
                ["a.code", "e.id"]
        if shape == 1:
            return [e, a], "entries e left join accounts a on a.code = e.account_code", ["e.id"]
        if shape == 2:
            return [a, g], f"accounts a {r.choice(['join', 'left join'])} regions g on g.region = a.region", \
                ["a.code"]
        if shape == 3:
            return [a, e, g], ("accounts a join entries e on e.account_code = a.code "
                               f"{r.choice(['join', 'left join'])} regions g on g.region = a.region"), ["e.id"]
        if shape == 4:
            i = items("i")
            return [e, i, g], ("entries e join items i on i.id = e.id "
                               "left join regions g on g.zone = left(e.kind, 1)"), ["e.id"]
        if shape == 5:
            i = items("i")
            return [e, a, i, lb], ("entries e join accounts a on a.code = e.account_code "
                                   "join items i on i.id = e.id "
                                   f"{r.choice(['join', 'left join'])} {LABELS} l on l.qty = i.qty"), ["e.id"]
        if shape == 6:
            gl = Tab("grp_labels", "gl", GRP_LABEL_COLS)
            i = items("i")
            return [i, gl, e], ("items i left join grp_labels gl on gl.grp = i.grp "
                                "join entries e on e.customer_id = i.customer_id and e.id = i.id"), ["i.id"]
        return [g, a], "regions g left join accounts a on a.region = g.region and a.balance > 0", \
            ["g.region", "a.code"]

    def wide_join(self) -> Case:
        r = self.r
        tabs, frm, order = self.wide_from()
        conds = []
        if r.random() < 0.15 and " left join " in frm:  # the anti-join pattern
            right = frm.split(" left join ")[1].split()[1]
            t = next(t for t in tabs if t.alias == right)
            conds.append(f"{t.c(next(iter(t.cols)))} is null")
        if r.random() < 0.7:
            conds.append(self.pred(tabs, 1))
        where = f" where {' and '.join(conds)}" if conds else ""
        cols = self.select_list(tabs, r.randint(1, 4))
        if r.random() < 0.3:
            return self.wide_agg(tabs, frm, where)
        sql = f"select {', '.join(cols)} from {frm}{where}"
        if r.random() < 0.5:
            keys = self.order_keys(cols, r.randint(0, 2))
            return Case(sql + self.order_limit([*keys, *order]), True, "wide-join")
        return Case(sql, False, "wide-join")

    # GROUP_CONCAT(DISTINCT) over trimmed strings: which of 'B ' and 'b' stands for the
    # group is MySQL's choice, and inside the list the comparison cannot pad it away
    WIDE_AGGS = ["count(*)", "count({c})", "count(distinct {c})", "sum({n})", "min({c})", "max({c})", "avg({n})",
                 "sum({n}) * 2", "max({n}) - min({n})", "sum(case when {n} < 0 then 1 else 0 end)",
                 "count(distinct {c}, {c2})", "group_concat(distinct trim({s}) order by trim({s}))", "min({d})", "max({d})",
                 "sum(if({n} > 0, {n}, 0))", "avg({n}) + 1", "sum({n} * 1.5)"]

    def wide_agg_expr(self, tabs: list[Tab]) -> str:
        r = self.r
        t = r.choice(tabs)
        nums = t.of_kind(*NUMERIC) or ["x"]
        strs = t.of_kind("str", "code", "region", "kind", "zone", "glabel") or list(t.cols)
        dates = t.of_kind(*DATES) or list(t.cols)
        if "x" in nums:
            return "count(*)"
        return r.choice(self.WIDE_AGGS).format(c=t.c(r.choice(list(t.cols))), c2=t.c(r.choice(list(t.cols))),
                                               n=t.c(r.choice(nums)), s=t.c(r.choice(strs)),
                                               d=t.c(r.choice(dates)))

    def wide_agg(self, tabs: list[Tab] | None = None, frm: str = "", where: str = "") -> Case:
        """GROUP BY on columns, expressions, aliases and ordinals; HAVING on aggregates not
        selected; ORDER BY aggregates; COUNT(DISTINCT a, b)."""
        r = self.r
        if tabs is None:
            t, _key = self.wide_table(r.choice(["", "w"]))
            tabs, frm = [t], t.ref()
            if r.random() < 0.7:
                where = f" where {self.pred(tabs, 2)}"
        keys = []
        for _ in range(r.choice([0, 1, 1, 2])):
            t = r.choice(tabs)
            col = r.choice(list(t.cols))
            c = t.c(col)
            kind = t.cols[col]
            k = r.choice([c, c, f"year({c})" if kind in DATES else f"upper({c})" if kind not in NUMERIC
                          else f"{c} < 0", f"coalesce({c}, 'none')" if kind not in NUMERIC else f"round({c}, -1)"])
            if k not in keys:
                keys.append(k)
        aggs = [self.wide_agg_expr(tabs) for _ in range(r.randint(1, 3))]
        sel = [f"{k} as k{i}" for i, k in enumerate(keys)] + [f"{a} as a{i}" for i, a in enumerate(aggs)]
        sql = f"select {', '.join(sel)} from {frm}{where}"
        if not keys:
            return Case(sql, True, "wide-agg")
        by = [r.choice([k, f"k{i}", str(i + 1)]) for i, k in enumerate(keys)]
        sql += " group by " + ", ".join(by)
        if r.random() < 0.4:  # HAVING over an aggregate the select list does not have
            sql += f" having {self.wide_agg_expr(tabs)} {r.choice(['>', '<', '>=', '<>'])} {r.randint(0, 30)}"
        if r.random() < 0.5:
            ks = [str(i + 1) for i in range(len(keys))]
            if r.random() < 0.4:
                ks.insert(0, r.choice([f"a{i}" for i in range(len(aggs)) if "avg" not in aggs[i]] or ["1"]))
            sql += " order by " + ", ".join(f"{k}{r.choice(['', ' desc'])}" for k in ks)
            if r.random() < 0.5:
                sql += f" limit {r.randint(0, 15)}"
                if r.random() < 0.4:
                    sql += f" offset {r.randint(0, 10)}"
            return Case(sql, True, "wide-agg")
        return Case(sql, False, "wide-agg")

    def wide_misc(self) -> Case:
        """Tuple IN, a scalar subquery in ORDER BY, DISTINCT ordered by a column it does not
        select, nested derived tables, subqueries over the wide tables."""
        r = self.r
        shape = r.randint(0, 7)
        if shape == 0:
            pairs = ", ".join(f"({r.randint(1, 60)}, {self.lit('code', False)})" for _ in range(r.randint(1, 4)))
            sql = f"select id, amount from entries where (customer_id, account_code) in ({pairs})"
            return Case(sql + self.order_limit(["id"], limit=0.3), True, "wide-misc")
        if shape == 1:
            sql = ("select a.code, a.balance from accounts a where a.customer_id < 10 order by "
                   "(select count(*) from entries e where e.account_code = a.code) desc, a.code")
            return Case(sql + (f" limit {r.randint(1, 10)}" if r.random() < 0.5 else ""), True, "wide-misc")
        if shape == 2:
            t, _key = self.wide_table("")
            col = r.choice([c for c in t.cols if t.cols[c] not in ("dbl",)])
            other = r.choice(list(t.cols))
            # MariaDB accepts it (MySQL refuses with 3065); the set of rows is the same either way
            return Case(f"select distinct {col} from {t.table} order by {other}", False, "wide-misc")
        if shape == 3:
            sql = (f"select d2.r, count(*) as n, sum(d2.b) as b from (select d1.region as r, d1.balance as b from "
                   f"(select region, balance, opened from accounts where {self.pred([Tab('accounts', '', ACCT_COLS)], 1)}"
                   f") d1 where d1.opened is not null) d2 group by d2.r")
            return Case(sql, False, "wide-misc")
        if shape == 4:
            sql = (f"select a.code, a.region from accounts a where a.code {r.choice(['in', 'not in'])} "
                   f"(select e.account_code from entries e where e.kind = {self.lit('kind', False)})")
            return Case(sql, False, "wide-misc")
        if shape == 5:
            sql = (f"select e.id, e.amount from entries e where {r.choice(['', 'not '])}exists (select 1 from "
                   f"accounts a where a.code = e.account_code and a.balance {r.choice(['<', '>'])} "
                   f"{self.lit('bal', False)}) and e.customer_id {r.choice(['<', '>'])} {r.randint(1, 60)}")
            return Case(sql, False, "wide-misc")
        if shape == 6:
            sql = ("select g.region, g.tax, (select count(*) from accounts a where a.region = g.region) as n "
                   "from regions g")
            return Case(sql + " order by g.region", True, "wide-misc")
        sql = (f"select a.code, a.balance * a.rate as x, a.balance + a.rate as y, a.balance / 7 as z from accounts a "
               f"where {self.pred([Tab('accounts', 'a', ACCT_COLS)], 1)}")
        return Case(sql, False, "wide-misc")

    MAKERS = [("simple", 4), ("aggregate", 4), ("distinct", 1), ("join", 4), ("subquery", 4), ("cte", 1),
              ("window", 2), ("setop", 2), ("mixed", 2), ("wide_simple", 3), ("wide_join", 3), ("wide_agg", 2),
              ("wide_misc", 2)]

    def case(self) -> Case:
        names = [m for m, _w in self.MAKERS]
        weights = [w for _m, w in self.MAKERS]
        return getattr(self, self.r.choices(names, weights)[0])()

    # TLP
    def tlp(self) -> Case:
        r = self.r
        shape = r.randint(0, 4)
        if shape <= 1:
            t = items("t")
            tabs, frm, base = [t], "items t", ""
        elif shape == 2:
            a, b = items("a"), items("b")
            tabs, frm, base = [a, b], "items a join items b on b.id = a.customer_id", self.restrict(a)
        elif shape == 3:
            i, lb = items("i"), labels("l")
            tabs, frm, base = [i, lb], f"items i left join {LABELS} l on l.qty = i.qty", self.restrict(i)
        else:
            a, b = items("a"), items("b")
            tabs, frm, base = [a, b], "items a left join items b on b.customer_id = a.id and b.qty < a.qty", \
                self.restrict(a)
        p = self.pred(tabs, 2, 0.3)
        mode = r.choice(["where", "where", "distinct", "agg"])

        def w(cond: str) -> str:
            conds = [c for c in (base, cond) if c]
            return f" where {' and '.join(conds)}" if conds else ""

        parts_cond = [f"({p})", f"not ({p})", f"({p}) is null"]
        if mode == "agg":
            t0 = r.choice(tabs)
            fns = []
            for _ in range(r.randint(1, 3)):
                fn = r.choice(["count", "sum", "min", "max", "countstar"])
                col = t0.c(r.choice(t0.of_kind(*NUMERIC)) if fn == "sum" else r.choice(list(t0.cols)))
                fns.append("count(*)" if fn == "countstar" else f"{fn}({col})")
            sel = ", ".join(fns)
            return Case(f"select {sel} from {frm}{w('')}", True, "tlp",
                        [f"select {sel} from {frm}{w(c)}" for c in parts_cond],
                        "agg:" + ",".join(f.split("(")[0] for f in fns))
        cols = self.select_list(tabs, r.randint(1, 3))
        dist = "distinct " if mode == "distinct" else ""
        whole = f"select {dist}{', '.join(cols)} from {frm}{w('')}"
        parts = [f"select {dist}{', '.join(cols)} from {frm}{w(c)}" for c in parts_cond]
        return Case(whole, False, "tlp", parts, "distinct" if dist else "")


def generate(seed: int, index: int) -> Case:
    return Gen(random.Random(f"{seed}:{index}")).case()


def generate_tlp(seed: int, index: int) -> Case:
    return Gen(random.Random(f"{seed}:tlp:{index}")).tlp()


# -- running and comparing ---------------------------------------------------------

Runner = Callable[[str], Awaitable[Result]]


def error_code(e: BaseException) -> int | None:
    code = getattr(e, "code", None)
    if isinstance(code, int):
        return code
    if e.args and isinstance(e.args[0], int):
        return e.args[0]
    return None


def is_refusal(e: BaseException) -> bool:
    return error_code(e) == 1235


def _describe_error(e: BaseException) -> str:
    return f"{type(e).__name__} {error_code(e)}: {getattr(e, 'message', None) or e}"


def _show(res: Result, limit: int = 12) -> str:
    names = [f.name.decode() if isinstance(f.name, bytes) else str(f.name) for f in res.fields]
    lines = [f"  columns {names}, {len(res.rows)} rows"]
    for row in res.rows[:limit]:
        lines.append("  " + repr(tuple(v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in row)))
    if len(res.rows) > limit:
        lines.append(f"  ... {len(res.rows) - limit} more")
    return "\n".join(lines)


def _multiset_diff(a: list[tuple], b: list[tuple], limit: int = 10) -> str:
    ca, cb = Counter(a), Counter(b)
    only_a, only_b = list((ca - cb).elements()), list((cb - ca).elements())
    return (f"  rows only in the proxy's result ({len(only_a)}): {only_a[:limit]}\n"
            f"  rows only in the oracle's result ({len(only_b)}): {only_b[:limit]}")


def _names(res: Result) -> list[str]:
    return [(f.name.decode() if isinstance(f.name, bytes) else str(f.name)).lower() for f in res.fields]


def _close(a: list[tuple], b: list[tuple]) -> bool:
    """Equal but for doubles in their last digits (test_oracle rounds to 9 significant
    digits, which a sum in another order can land on either side of)."""
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        if len(ra) != len(rb):
            return False
        for va, vb in zip(ra, rb, strict=True):
            if va == vb:
                continue
            if not (isinstance(va, float) and isinstance(vb, float) and math.isclose(va, vb, rel_tol=1e-7)):
                return False
    return True


def compare(ours: Result, theirs: Result, ordered: bool) -> str | None:
    """None when equal, else what differs."""
    if _names(ours) != _names(theirs):
        return f"column names differ: {_names(ours)} vs {_names(theirs)}"
    try:
        a, b = normalised(ours), normalised(theirs)
    except Exception as e:  # noqa: BLE001 - a value the column's type cannot hold
        return f"values do not fit their column types ({e!r})"
    if ordered:
        if a != b and not _close(a, b):
            if _sortable(a) == _sortable(b):
                return "same rows, different order"
            return "different rows\n" + _multiset_diff(a, b)
        return None
    sa, sb = _sortable(a), _sortable(b)
    if sa != sb and not _close(sa, sb):
        return "different rows\n" + _multiset_diff(a, b)
    return None


def _combine_agg(fn: str, values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    if fn == "count":
        return sum(values)
    if not present:
        return None
    if fn == "sum":
        return sum(present)
    keyed = sorted(present, key=lambda v: general_ci_key(v) if isinstance(v, str) else v)
    return keyed[0] if fn == "min" else keyed[-1]


@dataclass
class Outcome:
    status: str  # ok | refused | both-error | mariadb | fail
    detail: str = ""
    refusal: str = ""
    timed_out: bool = False


@dataclass
class Summary:
    seed: int
    total: int = 0
    ok: int = 0
    refused: Counter = field(default_factory=Counter)
    both_error: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    kinds: Counter = field(default_factory=Counter)
    refused_kinds: Counter = field(default_factory=Counter)
    aborted: str = ""
    mariadb: list[str] = field(default_factory=list)  # TLP broken by the oracle as well

    def add(self, case: Case, out: Outcome, label: str) -> None:
        self.total += 1
        self.kinds[case.kind] += 1
        if out.status == "ok":
            self.ok += 1
        elif out.status == "refused":
            self.refused[out.refusal[:110]] += 1
            self.refused_kinds[case.kind] += 1
        elif out.status == "both-error":
            self.both_error[out.detail[:110]] += 1
        elif out.status == "mariadb":
            self.mariadb.append(f"[{label}] {out.detail}")
        else:
            self.failures.append(f"[{label}] {out.detail}")

    def report(self) -> str:
        n_ref = sum(self.refused.values())
        lines = [f"seed {self.seed}: {self.total} cases, {self.ok} equal, {n_ref} refused (1235), "
                 f"{sum(self.both_error.values())} failing on both sides, {len(self.mariadb)} TLP "
                 f"inconsistencies MariaDB has too, {len(self.failures)} failures",
                 "  by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(self.kinds.items()))]
        if n_ref:
            lines.append("  refused by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(self.refused_kinds.items())))
            lines += [f"  refused x{n}: {m}" for m, n in self.refused.most_common()]
        lines += [f"  both sides failed x{n}: {m}" for m, n in self.both_error.most_common()]
        for m in self.mariadb:
            lines.append("  MariaDB breaks TLP itself (the oracle gives the same inconsistency): "
                         + m.split("\n")[0][:400])
        if self.aborted:
            lines.append(f"  {self.aborted}")
        return "\n".join(lines)


async def _attempt(run: Runner, sql: str) -> tuple[Result | None, BaseException | None]:
    try:
        return await asyncio.wait_for(run(sql), CASE_TIMEOUT), None
    except Exception as e:  # noqa: BLE001 - reported, never swallowed
        return None, e


def _failed(detail: str, *errors: BaseException | None) -> Outcome:
    return Outcome("fail", detail, timed_out=any(isinstance(e, TimeoutError) for e in errors))


def oracle_sql(sql: str) -> str:
    return sql.replace(LABELS, "qty_labels")


async def check_case(case: Case, proxy: Runner, oracle: Runner) -> Outcome:
    ours, perr = await _attempt(proxy, case.sql)
    if perr is not None and is_refusal(perr):
        return Outcome("refused", refusal=getattr(perr, "message", str(perr)))
    theirs, oerr = await _attempt(oracle, oracle_sql(case.sql))
    if perr is not None or oerr is not None:
        if perr is not None and oerr is not None and error_code(perr) == error_code(oerr):
            return Outcome("both-error", f"{error_code(oerr)}: {oerr.args[-1] if oerr.args else oerr}")
        return _failed(f"query: {case.sql}\n  proxy: "
                       + (_describe_error(perr) if perr else f"ok, {len(ours.rows)} rows")
                       + "\n  oracle: " + (_describe_error(oerr) if oerr else f"ok, {len(theirs.rows)} rows"),
                       perr, oerr)
    diff = compare(ours, theirs, case.ordered)
    if diff is None:
        return Outcome("ok")
    return Outcome("fail", f"query: {case.sql}\n  {diff}\n proxy:\n{_show(ours)}\n oracle:\n{_show(theirs)}")


async def check_tlp(case: Case, proxy: Runner) -> Outcome:
    assert case.tlp is not None
    whole, err = await _attempt(proxy, case.sql)
    if err is not None:
        if is_refusal(err):
            return Outcome("refused", refusal=getattr(err, "message", str(err)))
        return _failed(f"TLP query: {case.sql}\n  proxy: {_describe_error(err)}", err)
    if case.tlp_mode.startswith("agg:"):
        parts = []
        for sql in case.tlp:
            res, err = await _attempt(proxy, sql)
            if err is not None:
                if is_refusal(err):
                    return Outcome("refused", refusal=getattr(err, "message", str(err)))
                return _failed(f"TLP part: {sql}\n  proxy: {_describe_error(err)}", err)
            parts.append(res)
        try:
            combined = [tuple(_combine_agg(fn, [normalised(p)[0][i] for p in parts])
                              for i, fn in enumerate(case.tlp_mode[4:].split(",")))]
            got = normalised(whole)
        except Exception as e:  # noqa: BLE001
            return Outcome("fail", f"TLP query: {case.sql}\n  cannot combine the parts: {e!r}")
        if got != combined:
            return Outcome("fail", f"TLP query: {case.sql}\n  whole {got} != combined parts {combined}\n  parts:\n"
                           + "\n".join(f"   {s} -> {normalised(p)}" for s, p in zip(case.tlp, parts, strict=True)))
        return Outcome("ok")
    glue = " union " if case.tlp_mode == "distinct" else " union all "
    union = glue.join(case.tlp)
    parted, err = await _attempt(proxy, union)
    if err is not None:
        if is_refusal(err):
            return Outcome("refused", refusal=getattr(err, "message", str(err)))
        return _failed(f"TLP union: {union}\n  proxy: {_describe_error(err)}", err)
    try:
        a, b = normalised(whole), normalised(parted)
    except Exception as e:  # noqa: BLE001
        return Outcome("fail", f"TLP query: {case.sql}\n  values do not fit their column types ({e!r})")
    if case.tlp_mode == "distinct":
        a, b = sorted(set(a), key=str), sorted(set(b), key=str)
    if _sortable(a) != _sortable(b):
        return Outcome("fail", f"TLP query: {case.sql}\n  != union of its partitions: {union}\n"
                       + _multiset_diff(a, b).replace("proxy's result", "whole query")
                       .replace("oracle's result", "partitions"))
    return Outcome("ok")


def proxy_runner(vcursor: Any, schema: TrackedSchema, cache: PlanCache, rnd: random.Random) -> Runner:
    """Plan + execute through the engine; a third of the statements are streamed."""

    async def run(sql: str) -> Result:
        plan, bindvars = plan_query(sql, vcursor.vschema, "commerce", cache, schema=schema)
        if rnd.random() < 0.33:
            out = Result()
            first = True
            async for chunk in engine.stream(plan, vcursor, bindvars):
                if first:
                    out.fields = chunk.fields
                    first = False
                out.rows.extend(chunk.rows)
            return out
        return await engine.execute(plan, vcursor, bindvars)

    return run


async def run_differential(seed: int, count: int, tlp_count: int, proxy: Runner, oracle: Runner,
                           progress: Callable[[int, Summary], None] | None = None) -> Summary:
    summary = Summary(seed)
    for i in range(count + tlp_count):
        if i < count:
            case = generate(seed, i)
            out, label = await check_case(case, proxy, oracle), f"seed {seed} case {i}"
        else:
            case = generate_tlp(seed, i - count)
            out, label = await check_tlp(case, proxy), f"seed {seed} tlp {i - count}"
            if out.status == "fail" and not out.timed_out:
                # the same partitioning on the oracle: when MariaDB breaks it too, it is MariaDB's
                on_oracle = await check_tlp(case, lambda sql: oracle(oracle_sql(sql)))
                if on_oracle.status == "fail":
                    out = Outcome("mariadb", out.detail)
        summary.add(case, out, label)
        if progress is not None:
            progress(i, summary)
        if out.timed_out:  # a connection was left mid-statement: nothing after this is reliable
            summary.aborted = f"stopped after {label}: a statement ran longer than {CASE_TIMEOUT:.0f} s"
            break
    return summary


# -- the test ----------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def schema(wide_loaded, vcursor):
    return await vcursor.tracked_schema()


@pytest.mark.filterwarnings("ignore::pymysql.err.Warning")
async def test_random_queries_match_the_oracle_and_tlp_holds(schema, vcursor, oracle):
    proxy = proxy_runner(vcursor, schema, PlanCache(), random.Random(SEED))
    summary = await run_differential(SEED, COUNT, TLP_COUNT, proxy, oracle)
    report = summary.report()
    print("\n" + report)
    assert not summary.failures, (
        f"{len(summary.failures)} differences (reproduce: SHARDGATE_DIFF_SEED={SEED}; case i is "
        f"tests.engine.test_differential.generate({SEED}, i); one statement against the oracle: "
        "python -m tests.benchmarks.bench_differential --query SQL):\n\n" + "\n\n".join(summary.failures)
        + "\n\n" + report)
    assert sum(summary.refused.values()) <= MAX_REFUSED * summary.total, report


def test_generation_is_deterministic():
    assert [generate(1, i).sql for i in range(30)] == [generate(1, i).sql for i in range(30)]
    assert [generate_tlp(1, i).tlp for i in range(10)] == [generate_tlp(1, i).tlp for i in range(10)]


def test_tlp_combines_aggregates():
    assert _combine_agg("count", [Decimal(2), Decimal(3), Decimal(0)]) == 5
    assert _combine_agg("sum", [None, Decimal(4), None]) == 4
    assert _combine_agg("min", ["b", None, "a"]) == "a"
    assert _combine_agg("max", [None, None, None]) is None
