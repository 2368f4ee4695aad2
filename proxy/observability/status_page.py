"""``/debug/status``: one server-rendered HTML page for a person, no scripts, no external
resources (the chart is inline SVG). Built from a ``StatusView``: the same figures
``/metrics`` shows, the health check, the QPS history and the slowest recent statements."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

from proxy.observability.figures import Figures
from proxy.observability.health import Health
from proxy.observability.history import HistoryPoint
from proxy.observability.slow_queries import SlowQuery


@dataclass(frozen=True)
class KeyspaceInfo:
    name: str
    sharded: bool
    shards: tuple[str, ...]


@dataclass(frozen=True)
class StatusView:
    pid: int
    workers: Sequence[int]
    uptime_seconds: float
    keyspaces: Sequence[KeyspaceInfo]
    figures: Figures
    health: Health
    history: Sequence[HistoryPoint]
    history_interval: float
    slow: Sequence[SlowQuery]


_STYLE = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em 2em;color:#1d2433;background:#fafbfc}
h1{font-size:1.5em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .5em;border-bottom:1px solid #d8dde6;padding-bottom:.2em}
p.meta{color:#5b6478;margin:0 0 1em}a{color:#1f5fbf}
table{border-collapse:collapse;background:#fff;margin:.3em 0}
th,td{border:1px solid #d8dde6;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef1f6;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#137333;font-weight:600}.bad{color:#b3261e;font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:.6em}.card{background:#fff;border:1px solid #d8dde6;padding:.5em .9em;min-width:8em}
.card b{display:block;font-size:1.4em}.card span{color:#5b6478}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;white-space:pre-wrap;word-break:break-all}
.empty{color:#5b6478;font-style:italic}svg text{font:11px system-ui,sans-serif;fill:#5b6478}
"""


def _n(v: float) -> str:
    if v == int(v):
        return f"{int(v):,}"
    return f"{v:,.2f}"


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f} ms"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: set[int] | None = None,
           empty: str = "none") -> str:
    numeric = numeric or set()
    body = []
    for row in rows:
        cells = "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        body.append(f"<tr>{cells}</tr>")
    if not body:
        return f'<p class="empty">{escape(empty)}</p>'
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def chart(points: Sequence[HistoryPoint], interval: float, width: int = 760, height: int = 200) -> str:
    """QPS (bars' outline, left axis) and p99/mean latency (lines, right axis) as inline SVG."""
    if len(points) < 2:
        return (f'<p class="empty">collecting: one point every {interval:g} s '
                f'(the chart shows the last minutes once there are two)</p>')
    left, right, top, bottom = 52, 60, 12, 26
    w, h = width - left - right, height - top - bottom
    t0, t1 = points[0].at, points[-1].at
    span = max(t1 - t0, 1.0)
    max_qps = max(max(p.qps for p in points), 1.0)
    lat = [v for p in points for v in (p.p99_ms, p.mean_ms) if v is not None]
    max_ms = max(max(lat) if lat else 1.0, 0.001)

    def x(t: float) -> float:
        return left + (t - t0) / span * w

    def y(v: float, top_value: float) -> float:
        return top + h - v / top_value * h

    def line(values: list[tuple[float, float | None]], top_value: float) -> str:
        return " ".join(f"{x(t):.1f},{y(v, top_value):.1f}" for t, v in values if v is not None)

    qps_line = line([(p.at, p.qps) for p in points], max_qps)
    p99_line = line([(p.at, p.p99_ms) for p in points], max_ms)
    mean_line = line([(p.at, p.mean_ms) for p in points], max_ms)
    area = f"{left:.1f},{top + h:.1f} {qps_line} {x(t1):.1f},{top + h:.1f}"
    grid = "".join(
        f'<line x1="{left}" x2="{left + w}" y1="{top + h * f:.1f}" y2="{top + h * f:.1f}" stroke="#e3e7ee"/>'
        for f in (0.0, 0.25, 0.5, 0.75, 1.0)
    )
    minutes_ago = (time.time() - t0) / 60
    return (
        f'<svg role="img" aria-label="queries per second and latency" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
        f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="#fff"/>{grid}'
        f'<polygon points="{area}" fill="#1f5fbf" fill-opacity="0.12"/>'
        f'<polyline points="{qps_line}" fill="none" stroke="#1f5fbf" stroke-width="2"/>'
        f'<polyline points="{p99_line}" fill="none" stroke="#d9730d" stroke-width="1.5"/>'
        f'<polyline points="{mean_line}" fill="none" stroke="#d9730d" stroke-width="1" stroke-dasharray="4 3"/>'
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{max_qps:,.0f}</text>'
        f'<text x="{left - 6}" y="{top + h}" text-anchor="end">0</text>'
        f'<text x="{left - 6}" y="{top + h / 2:.0f}" text-anchor="end">qps</text>'
        f'<text x="{left + w + 6}" y="{top + 4}">{max_ms:.2f} ms</text>'
        f'<text x="{left + w + 6}" y="{top + h}">0 ms</text>'
        f'<text x="{left}" y="{height - 8}">{minutes_ago:.0f} min ago</text>'
        f'<text x="{left + w}" y="{height - 8}" text-anchor="end">now</text>'
        f"</svg>"
        f'<p class="meta"><span style="color:#1f5fbf">━</span> queries per second &nbsp; '
        f'<span style="color:#d9730d">━</span> p99 latency &nbsp; <span style="color:#d9730d">┅</span> mean latency'
        f" &nbsp; (one point per {interval:g} s)</p>"
    )


def _shards_section(view: StatusView) -> str:
    f = view.figures
    health = {(s.keyspace, s.shard): s for s in view.health.shards}
    cap = f.by("shardgate_pool_capacity", None, "keyspace", "shard")
    size = f.by("shardgate_pool_size", None, "keyspace", "shard")
    used = f.by("shardgate_pool_in_use", None, "keyspace", "shard")
    waiters = f.by("shardgate_pool_waiters", None, "keyspace", "shard")
    waits = f.by("shardgate_pool_waits", "shardgate_pool_waits_total", "keyspace", "shard")
    waited = f.by("shardgate_pool_wait_seconds", "shardgate_pool_wait_seconds_total", "keyspace", "shard")
    queries = f.by("shardgate_queries", "shardgate_queries_total", "keyspace")
    rows = []
    for ks in view.keyspaces:
        for shard in ks.shards:
            key = (ks.name, shard)
            hs = health.get(key)
            if hs is None:
                state = '<span class="bad">unknown</span>'
            elif hs.ok:
                state = '<span class="ok">serving</span>'
            else:
                state = f'<span class="bad">unreachable</span><br><code>{escape(hs.error)}</code>'
            n = waits.get(key, 0.0)
            rows.append([
                escape(ks.name), "yes" if ks.sharded else "no", escape(shard), state,
                _ms(hs.ping_ms if hs else None),
                _n(used.get(key, 0.0)), _n(size.get(key, 0.0)), _n(cap.get(key, 0.0)), _n(waiters.get(key, 0.0)),
                _n(n), _ms(waited.get(key, 0.0) / n * 1000 if n else None),
                _n(queries.get((ks.name,), 0.0)) if shard == ks.shards[0] else "",
            ])
    return _table(
        ["Keyspace", "Sharded", "Shard", "Health", "Ping", "Pool in use", "Pool open", "Pool capacity",
         "Waiting now", "Waits", "Mean wait", "Queries (keyspace)"],
        rows, numeric={5, 6, 7, 8, 9, 10, 11}, empty="no keyspaces",
    )


def render(view: StatusView) -> str:
    f = view.figures
    queries = f.total("shardgate_queries", "shardgate_queries_total")
    errors = f.total("shardgate_errors", "shardgate_errors_total")
    last = view.history[-1] if view.history else None
    hits = f.total("shardgate_plan_cache_hits", "shardgate_plan_cache_hits_total")
    misses = f.total("shardgate_plan_cache_misses", "shardgate_plan_cache_misses_total")
    state = ('<span class="ok">serving</span>' if view.health.ok
             else '<span class="bad">a shard is unreachable</span>')
    cards = [
        ("health", state),
        ("queries", _n(queries)),
        ("errors", _n(errors)),
        ("qps (last interval)", _n(round(last.qps, 1)) if last else "–"),
        ("p99 (last interval)", _ms(last.p99_ms) if last else "–"),
        ("client connections", _n(f.total("shardgate_client_connections"))),
        ("open transactions", _n(f.total("shardgate_transactions_open"))),
        ("plan cache hit rate", f"{hits / (hits + misses) * 100:.1f} %" if hits + misses else "–"),
    ]
    card_html = "".join(f'<div class="card"><b>{v}</b><span>{escape(k)}</span></div>' for k, v in cards)

    statements = sorted(
        ((labels, v) for labels, v in f.samples("shardgate_queries", "shardgate_queries_total")),
        key=lambda lv: -lv[1],
    )
    rows_by = f.by("shardgate_rows_returned", "shardgate_rows_returned_total", "statement", "plan", "keyspace")
    statement_rows = [
        [escape(lb["statement"]), escape(lb["plan"]), escape(lb["keyspace"] or "–"), _n(v),
         _n(rows_by.get((lb["statement"], lb["plan"], lb["keyspace"]), 0.0))]
        for lb, v in statements
    ]
    error_rows = [
        [escape(lb["code"]), _n(v)]
        for lb, v in sorted(f.samples("shardgate_errors", "shardgate_errors_total"), key=lambda lv: -lv[1])
    ]
    commit_rows = [
        [escape(lb["shards"]), escape(lb["mode"]), _n(v)]
        for lb, v in sorted(f.samples("shardgate_transaction_commits", "shardgate_transaction_commits_total"),
                            key=lambda lv: (int(lv[0]["shards"]), lv[0]["mode"]))
    ]
    msg = {name: f.by(name, None, "keyspace", "shard", "table") for name in (
        "shardgate_messages_queued", "shardgate_messages_in_flight", "shardgate_message_subscribers")}
    events = f.by("shardgate_messages", "shardgate_messages_total", "keyspace", "shard", "table", "event")
    tables = sorted(set(msg["shardgate_messages_queued"]) | {k[:3] for k in events})
    message_rows = [
        [escape(ks), escape(shard), escape(table),
         _n(msg["shardgate_messages_queued"].get((ks, shard, table), 0.0)),
         _n(msg["shardgate_messages_in_flight"].get((ks, shard, table), 0.0)),
         *(_n(events.get((ks, shard, table, e), 0.0)) for e in ("sent", "acked", "delayed", "parked", "purged")),
         _n(msg["shardgate_message_subscribers"].get((ks, shard, table), 0.0))]
        for ks, shard, table in tables
    ]
    cdc_events = f.by("shardgate_cdc_events", "shardgate_cdc_events_total", "table", "keyspace", "shard")
    cdc_bytes = f.by("shardgate_cdc_bytes", "shardgate_cdc_bytes_total", "table", "keyspace", "shard")
    cdc_lag = f.by("shardgate_cdc_lag_seconds", None, "table", "keyspace", "shard")
    cdc_lag_tx = f.by("shardgate_cdc_lag_transactions", None, "table", "keyspace", "shard")
    cdc_open = f.by("shardgate_cdc_streams_open", None, "table")
    cdc_rows = [
        [escape(t), escape(ks), escape(shard), _n(cdc_open.get((t,), 0.0)), _n(v), _n(cdc_bytes.get((t, ks, shard), 0.0)),
         f"{cdc_lag.get((t, ks, shard), 0.0):.1f} s", _n(cdc_lag_tx.get((t, ks, shard), 0.0))]
        for (t, ks, shard), v in sorted(cdc_events.items())
    ]
    slow_rows = [
        [f"{q.seconds * 1000:,.1f} ms", time.strftime("%H:%M:%S", time.localtime(q.at)), escape(q.statement),
         escape(q.plan), escape(q.keyspace or "–"), _n(q.rows), "error" if q.failed else "ok",
         f"<code>{escape(q.sql)}</code>"]
        for q in view.slow
    ]
    workers = ", ".join(str(p) for p in view.workers)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<link rel="icon" href="data:,"><title>shardgate status</title><style>{_STYLE}</style></head>
<body>
<h1>shardgate</h1>
<p class="meta">page by worker {view.pid} · workers {escape(workers)} · up {_duration(view.uptime_seconds)} ·
<a href="/metrics">/metrics</a> · <a href="/debug/vars">/debug/vars</a> ·
<a href="/debug/query_plans">/debug/query_plans</a> · <a href="/debug/health">/debug/health</a></p>
<section id="summary"><div class="cards">{card_html}</div></section>
<section id="traffic"><h2>Queries per second and latency</h2>{chart(view.history, view.history_interval)}</section>
<section id="shards"><h2>Keyspaces and shards</h2>{_shards_section(view)}</section>
<section id="statements"><h2>Statements</h2>{_table(["Statement", "Plan", "Keyspace", "Queries", "Rows returned"],
    statement_rows, numeric={3, 4}, empty="no statements yet")}</section>
<section id="errors"><h2>Errors by MySQL code</h2>{_table(["Code", "Count"], error_rows, numeric={1},
    empty="no errors")}</section>
<section id="transactions"><h2>Transactions</h2>
<p>open now: {_n(f.total("shardgate_transactions_open"))} · rolled back:
{_n(f.total("shardgate_transaction_rollbacks", "shardgate_transaction_rollbacks_total"))}</p>
{_table(["Shards touched", "Mode", "Commits"], commit_rows, numeric={2}, empty="no commits yet")}</section>
<section id="messages"><h2>Message tables</h2>{_table(
    ["Keyspace", "Shard", "Table", "Queued", "In flight", "Sent", "Acked", "Delayed", "Parked", "Purged",
     "Subscribers"], message_rows, numeric=set(range(3, 11)), empty="no message tables")}</section>
<section id="cdc"><h2>CDC streams (VSTREAM)</h2>{_table(
    ["Table", "Keyspace", "Shard", "Open streams", "Events", "Bytes", "Lag", "Transactions behind"], cdc_rows,
    numeric={3, 4, 5, 6, 7}, empty="no CDC streams yet")}</section>
<section id="slow"><h2>Slowest recent statements (worker {view.pid}, last 10 minutes)</h2>{_table(
    ["Time", "At", "Statement", "Plan", "Keyspace", "Rows", "Outcome", "SQL"], slow_rows, numeric={0, 5},
    empty="none yet")}</section>
</body></html>
"""
