"""The plan cache: keyed by normalised shape, keyspace and vschema; hits skip sqlglot."""

from __future__ import annotations

from unittest import mock

import sqlglot

import rewriter
from rewriter import PlanCache, plan_query
from tests.rewriter.vschema_fixture import make_vschema


def _counting_parse():
    real = sqlglot.parse_one
    calls = []

    def parse_one(*args, **kwargs):
        calls.append(args[0] if args else kwargs.get("sql"))
        return real(*args, **kwargs)

    return calls, mock.patch("sqlglot.parse_one", parse_one)


def test_cache_hit_does_not_parse_or_plan(vschema):
    cache = PlanCache()
    calls, patch = _counting_parse()
    with patch:
        first, bv1 = plan_query("select * from customer where customer_id = 1", vschema, None, cache)
        assert len(calls) == 1
        second, bv2 = plan_query("select *  from customer where customer_id = 77 -- other", vschema, None, cache)
    assert len(calls) == 1
    assert second is first
    assert (bv1, bv2) == ({"vtg1": 1}, {"vtg1": 77})
    assert (cache.hits, cache.misses) == (1, 1)


def test_in_lists_of_any_length_share_one_plan(vschema):
    cache = PlanCache()
    p1, _ = plan_query("select * from customer where customer_id in (1, 2)", vschema, None, cache)
    p2, bv = plan_query("select * from customer where customer_id in (3, 4, 5, 6)", vschema, None, cache)
    assert p1 is p2 and bv == {"vtg1": [3, 4, 5, 6]}


def test_keyspace_is_part_of_the_key(vschema):
    cache = PlanCache()
    plan_query("select * from product", vschema, None, cache)
    plan_query("select * from product", vschema, "commerce", cache)
    assert len(cache) == 2


def test_a_new_vschema_does_not_reuse_old_plans():
    cache = PlanCache()
    old, new = make_vschema(), make_vschema()
    p1, _ = plan_query("select * from customer", old, None, cache)
    p2, _ = plan_query("select * from customer", new, None, cache)
    assert p1 is not p2


def test_least_recently_used_entries_are_evicted(vschema):
    cache = PlanCache(capacity=2)
    plan_query("select a from product", vschema, None, cache)
    plan_query("select b from product", vschema, None, cache)
    plan_query("select a from product", vschema, None, cache)
    plan_query("select c from product", vschema, None, cache)  # evicts "b"
    assert len(cache) == 2
    plan_query("select a from product", vschema, None, cache)
    assert cache.hits == 2


def test_vexplain_is_not_cached(vschema):
    cache = PlanCache()
    plan_query("vexplain plan select * from customer", vschema, None, cache)
    assert len(cache) == 0


def _counting_normalize():
    real = rewriter.normalize_cached
    calls: list[str] = []

    def normalize_cached(sql):
        calls.append(sql)
        return real(sql)

    return calls, mock.patch.object(rewriter, "normalize_cached", normalize_cached)


def test_a_long_statement_whose_plan_was_looked_up_is_not_normalised_again(vschema):
    # the fast path looks a 2-shard INSERT's plan up, leaves it to the normal path: planned once
    values = ", ".join(f"({i}, 'customer{i}@example.com')" for i in range(1, 61))
    sql = f"insert into customer (customer_id, email) values {values}"
    assert len(sql) >= 1024
    planned, _ = plan_query(sql, vschema, None)
    found = rewriter.cached_plan(sql, vschema, None)
    assert found is not None and found[0] is planned
    calls, patch = _counting_normalize()
    with patch:
        again, bindvars = plan_query("".join(list(sql)), vschema, None)  # the same text, read again
        assert calls == []
        assert again is planned and bindvars == found[1] and bindvars is not found[1]
        plan_query(sql, vschema, None)  # taken once
    assert calls == [sql]


def test_a_short_statement_is_normalised_again(vschema):
    sql = "select * from customer where customer_id = 5"
    plan_query(sql, vschema, None)
    assert rewriter.cached_plan(sql, vschema, None) is not None
    calls, patch = _counting_normalize()
    with patch:
        assert plan_query(sql, vschema, None)[1] == {"vtg1": 5}
    assert calls == [sql]
