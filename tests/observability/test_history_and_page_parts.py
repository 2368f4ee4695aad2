"""The parts of the status page that need no proxy: the QPS history read from a real
prometheus_client histogram, quantiles from buckets, the chart, the slow-query ring."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Histogram

from proxy.observability.figures import Figures, quantile
from proxy.observability.history import DURATION, HistoryPoint, QueryHistory
from proxy.observability.metrics import LATENCY_BUCKETS, plan_label, statement_type
from proxy.observability.slow_queries import SlowQueries
from proxy.observability.status_page import chart
from rewriter.nodes import Aggregate, Join, Opcode, Route


def _histogram() -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry()
    return registry, Histogram(DURATION, "latency", ["statement"], buckets=LATENCY_BUCKETS, registry=registry)


def test_history_points_are_qps_mean_and_p99_of_each_interval() -> None:
    registry, h = _histogram()
    history = QueryHistory(interval=10)
    history.sample(Figures.collect(registry), now=1000.0)
    assert list(history.points) == []  # one reading: no interval yet
    for _ in range(98):
        h.labels("select").observe(0.0004)
    h.labels("insert").observe(0.2)
    h.labels("insert").observe(0.2)
    history.sample(Figures.collect(registry), now=1010.0)
    (point,) = history.points
    assert point.qps == 10.0
    assert abs(point.mean_ms - (98 * 0.4 + 2 * 200) / 100) < 1e-6
    assert 0.1 * 1000 < point.p99_ms <= 0.25 * 1000  # the two slow inserts are the top 2 %
    history.sample(Figures.collect(registry), now=1020.0)  # an idle interval
    assert history.points[-1].qps == 0.0 and history.points[-1].mean_ms is None


def test_quantile_interpolates_inside_the_bucket_like_histogram_quantile() -> None:
    buckets = [(0.001, 50.0), (0.01, 90.0), (0.1, 100.0), (float("inf"), 100.0)]
    assert quantile(buckets, 0.5) == 0.001
    assert abs(quantile(buckets, 0.7) - 0.0055) < 1e-12
    assert abs(quantile(buckets, 0.95) - 0.055) < 1e-12
    assert quantile([(0.1, 0.0), (float("inf"), 0.0)], 0.99) is None


def test_chart_is_inline_svg_with_a_line_per_series() -> None:
    points = [HistoryPoint(1000.0 + 10 * i, qps=100.0 + i, mean_ms=0.5, p99_ms=2.0 + i) for i in range(30)]
    svg = chart(points, 10)
    assert svg.startswith("<svg") and "xmlns=\"http://www.w3.org/2000/svg\"" in svg
    assert svg.count("<polyline") == 3
    qps_line = re.search(r'<polyline points="([^"]+)" fill="none" stroke="#1f5fbf"', svg).group(1)
    assert len(qps_line.split()) == 30
    assert ">129<" in svg  # the QPS axis tops at the highest point
    assert "collecting" in chart(points[:1], 10)


def test_slow_queries_keep_the_slowest_of_the_minute_and_raise_the_floor() -> None:
    ring = SlowQueries(keep=3)
    for ms in (5, 1, 9, 3, 7, 2):
        if ms / 1000 > ring.floor:
            ring.offer(ms / 1000, f"select {ms}", "select", "Route/EqualUnique", "commerce", 1, False)
    assert [q.sql for q in ring.slowest()] == ["select 9", "select 7", "select 5"]
    assert ring.floor == 0.005


def test_plan_labels_name_the_root_primitive_and_its_variant() -> None:
    route = Route(Opcode.Scatter, "commerce", True, None)  # type: ignore[arg-type]
    assert plan_label(route) == "Route/Scatter"
    assert plan_label(Join.__new__(Join)) == "Join"
    agg = Aggregate.__new__(Aggregate)
    agg.variant = "Ordered"
    assert plan_label(agg) == "Aggregate/Ordered"
    assert [statement_type(k) for k in ("select", "replace", "start", "alter", "vexplain", "call")] == [
        "select", "insert", "begin", "ddl", "show", "other"]
