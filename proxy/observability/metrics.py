"""The proxy's Prometheus metrics, and the small functions that record them.

Figures recorded on the query path go through ``record_statement`` (one call per
statement): it adds to a plain tally per (statement type, plan, keyspace) -- a dict lookup,
a few integer additions and a C bisect for the latency bucket, no locks -- and
``flush_statements`` moves the tallies into the Prometheus metrics every second and before
every scrape (prometheus_client's own observe() costs several times more per call).
Figures that are state (pool sizes, open transactions, message tables, CDC lag) are set
by ``proxy.observability.state_sampler`` at the same moments.

Under ``--workers N`` every worker writes its figures to files in the directory named by
``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode, chosen when the
module is imported); a scrape of any worker merges them (``process_group``). Gauges say
how they merge (``multiprocess_mode``): sums over live workers, or the maximum for lag.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

from proxy.observability.slow_queries import SLOW_QUERIES

if TYPE_CHECKING:
    from prometheus_client.metrics import MetricWrapperBase

    from proxy.session import ProxySession

# The *_created series (when each labelled child first appeared) only add noise to a scrape.
disable_created_metrics()

# Statement types, from a statement's first keyword; anything else is "other".
STATEMENT_TYPES: dict[str, str] = {
    "select": "select", "with": "select", "(": "select", "values": "select", "table": "select",
    "insert": "insert", "replace": "insert",
    "update": "update",
    "delete": "delete",
    "set": "set",
    "show": "show", "describe": "show", "desc": "show", "explain": "show", "vexplain": "show",
    "begin": "begin", "start": "begin",
    "commit": "commit",
    "rollback": "rollback",
    "create": "ddl", "drop": "ddl", "alter": "ddl", "truncate": "ddl", "rename": "ddl",
}  # fmt: skip

# Where a statement went when no plan names it (``ProxySession.route`` unset): answered
# by the proxy itself (USE, SET, BEGIN, SHOW VITESS_*, @@variables...), or refused before
# it was routed (a syntax error, an unknown table).
LOCAL_ROUTE = "Local"
UNROUTED = "Unrouted"

# Latency buckets for a proxy whose point selects take a fraction of a millisecond and
# whose scatters and streams take seconds.
LATENCY_BUCKETS = (
    0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

QUERIES = Counter(
    "shardgate_queries", "Statements run, by statement type, plan variant (the root primitive) and keyspace",
    ["statement", "plan", "keyspace"],
)
QUERY_DURATION = Histogram(
    "shardgate_query_duration_seconds", "Statement latency, from receipt to the last packet written",
    ["statement"], buckets=LATENCY_BUCKETS,
)
ROWS_RETURNED = Counter(
    "shardgate_rows_returned", "Rows sent to clients, by statement type, plan variant and keyspace",
    ["statement", "plan", "keyspace"],
)
ERRORS = Counter("shardgate_errors", "Error packets sent to clients, by MySQL error code", ["code"])

PLAN_CACHE_HITS = Counter("shardgate_plan_cache_hits", "Plan cache lookups that found a plan")
PLAN_CACHE_MISSES = Counter("shardgate_plan_cache_misses", "Plan cache lookups that planned the statement")
PLAN_CACHE_SIZE = Gauge("shardgate_plan_cache_size", "Plans cached", multiprocess_mode="livesum")

_SHARD = ["keyspace", "shard"]
POOL_CAPACITY = Gauge("shardgate_pool_capacity", "Connections a shard pool may open", _SHARD,
                      multiprocess_mode="livesum")
POOL_SIZE = Gauge("shardgate_pool_size", "Connections a shard pool holds open", _SHARD, multiprocess_mode="livesum")
POOL_IN_USE = Gauge("shardgate_pool_in_use", "Shard pool connections checked out", _SHARD,
                    multiprocess_mode="livesum")
POOL_WAITERS = Gauge("shardgate_pool_waiters", "Requests waiting for a shard pool connection now", _SHARD,
                     multiprocess_mode="livesum")
POOL_ACQUIRES = Counter("shardgate_pool_acquires", "Pooled connections checked out (the fast path's links are not)",
                        _SHARD)
POOL_WAITS = Counter("shardgate_pool_waits", "Acquires that found no idle connection (opened one or waited)",
                     _SHARD)
POOL_WAIT_SECONDS = Counter("shardgate_pool_wait_seconds", "Time spent in acquires that found no idle connection",
                            _SHARD)
FAST_PATH_LINKS = Gauge("shardgate_fast_path_links", "Shard connections the fast path holds open (proxy.fast_path), "
                        "besides the pool's", _SHARD, multiprocess_mode="livesum")
FAST_PATH_STATEMENTS = Counter("shardgate_fast_path_statements", "Statements the fast path sent to a shard "
                               "(proxy.fast_path; the others took the normal path)", _SHARD)

CLIENT_CONNECTIONS = Gauge("shardgate_client_connections", "Client sessions open", multiprocess_mode="livesum")
CLIENT_CONNECTIONS_ACCEPTED = Counter("shardgate_client_connections_accepted", "Client sessions opened (logged in)")
TRANSACTIONS_OPEN = Gauge("shardgate_transactions_open", "Client transactions open", multiprocess_mode="livesum")
TRANSACTION_COMMITS = Counter(
    "shardgate_transaction_commits", "Transactions committed, by the number of shards they touched and mode",
    ["shards", "mode"],
)
TRANSACTION_ROLLBACKS = Counter("shardgate_transaction_rollbacks", "Transactions rolled back by the client")
TWOPC_EVENTS = Counter("shardgate_twopc", "Two-phase commit counters (proxy.twopc.manager.TwoPCCounters)", ["event"])
TWOPC_IN_DOUBT = Gauge("shardgate_twopc_in_doubt", "Prepared transactions the last resolver run left unresolved",
                       multiprocess_mode="livemax")

# Reshard workflows (proxy/resharding/host.py): set by the process that runs the workflow's streams.
RESHARD_ROWS_COPIED = Gauge("shardgate_reshard_rows_copied", "Rows a Reshard workflow copied, by source shard and table",
                            ["workflow", "source", "table"], multiprocess_mode="livemax")
RESHARD_LAG_SECONDS = Gauge("shardgate_reshard_lag_seconds",
                            "Seconds the targets of a Reshard workflow are behind a source shard's binlog",
                            ["workflow", "source"], multiprocess_mode="livemax")

_MESSAGE_TABLE = ["keyspace", "shard", "table"]
MESSAGES_QUEUED = Gauge("shardgate_messages_queued", "Messages cached for delivery (SHOW VITESS_MESSAGES Queued)",
                        _MESSAGE_TABLE, multiprocess_mode="livesum")
MESSAGES_IN_FLIGHT = Gauge("shardgate_messages_in_flight", "Messages sent and not acked (InFlight)",
                           _MESSAGE_TABLE, multiprocess_mode="livesum")
MESSAGE_SUBSCRIBERS = Gauge("shardgate_message_subscribers", "STREAM subscribers (Subscribers)", _MESSAGE_TABLE,
                            multiprocess_mode="livesum")
MESSAGES = Counter(
    "shardgate_messages", "Message events (SHOW VITESS_MESSAGES Sent, Acked, Delayed, Parked, Purged)",
    [*_MESSAGE_TABLE, "event"],
)

TOPIC_EVENTS = Counter(
    "shardgate_topic_events", "Topic events of this process (proxy/topics): sequencer passes run (passes),"
    " messages they gave ids (sequenced), publishes that took their ids in the write (direct),"
    " scripts that carried several of this process's direct publishes (batches) and how many (batched)",
    ["keyspace", "topic", "event"],
)

_CDC_STREAM = ["table", "keyspace", "shard"]
CDC_STREAMS_OPEN = Gauge("shardgate_cdc_streams_open", "VSTREAM statements streaming now", ["table"],
                         multiprocess_mode="livesum")
CDC_EVENTS = Counter("shardgate_cdc_events", "Change events read from a shard's binlog by VSTREAM", _CDC_STREAM)
CDC_BYTES = Counter("shardgate_cdc_bytes", "Bytes of row values VSTREAM sent to clients", _CDC_STREAM)
CDC_LAG_SECONDS = Gauge(
    "shardgate_cdc_lag_seconds", "How far a VSTREAM is behind its shard's binlog head (0: caught up)",
    _CDC_STREAM, multiprocess_mode="livemax",
)
CDC_LAG_TRANSACTIONS = Gauge(
    "shardgate_cdc_lag_transactions", "Transactions in the shard's binlog a VSTREAM has not read yet",
    _CDC_STREAM, multiprocess_mode="livemax",
)

# Resharding (proxy/resharding/write_hold.py): writes held at a switch, how they ended and
# how long they waited. Rare events (a switch), so recorded directly.
WRITES_HELD = Counter(
    "shardgate_reshard_writes_held", "Writes a resharding switch held (denied on a source shard), by how the hold "
    "ended: released (run on the new shards), timed_out, refused (a transaction had written already)",
    ["keyspace", "outcome"],
)
WRITE_HOLD_SECONDS = Histogram(
    "shardgate_reshard_write_hold_seconds", "How long writes were held at a resharding switch", ["keyspace"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
TOPOLOGY_VERSION = Gauge(
    "shardgate_topology_version", "The serving topology version a proxy process follows (0: the cluster file's)",
    ["keyspace"], multiprocess_mode="livemax",
)


class StatementTally:
    """What statements of one (type, plan, keyspace) did since the last flush."""

    __slots__ = ("queries", "duration", "rows_returned", "count", "rows", "seconds", "buckets")

    def __init__(self, stype: str, plan: str, keyspace: str) -> None:
        self.queries = QUERIES.labels(stype, plan, keyspace)
        self.duration = QUERY_DURATION.labels(stype)
        self.rows_returned = ROWS_RETURNED.labels(stype, plan, keyspace)
        self.count = 0
        self.rows = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)  # per bucket, the last one +Inf

    def flush(self) -> None:
        if not self.count:
            return
        count, self.count = self.count, 0
        rows, self.rows = self.rows, 0
        seconds, self.seconds = self.seconds, 0.0
        self.queries.inc(count)
        if rows:
            self.rows_returned.inc(rows)
        # what Histogram.observe() does per call, once per flush: its bucket values
        # (not cumulative: the histogram adds them up when collected) and its sum
        duration = self.duration
        duration._sum.inc(seconds)
        buckets = self.buckets
        for i, n in enumerate(buckets):
            if n:
                duration._buckets[i].inc(n)
                buckets[i] = 0


# (statement type, plan, keyspace) -> its tally
_TALLIES: dict[tuple[str, str, str], StatementTally] = {}
_ERROR_CHILDREN: dict[int, Any] = {}
# (plan node class, opcode) -> plan label
_PLAN_LABELS: dict[tuple[type, Any], str] = {}


def statement_type(keyword: str) -> str:
    return STATEMENT_TYPES.get(keyword, "other")


def plan_label(plan: Any) -> str:
    """The root primitive of a plan as a label: its operator, and its variant when it has
    one (``Route/EqualUnique``, ``Route/Scatter``, ``Insert/Sharded``, ``Join``)."""
    key = (type(plan), getattr(plan, "opcode", None) or getattr(plan, "variant", None))
    label = _PLAN_LABELS.get(key)
    if label is None:
        cls, variant = key
        label = _PLAN_LABELS[key] = cls.__name__ if variant is None else f"{cls.__name__}/{variant}"
    return label


def record_statement(session: ProxySession, sql: str, started: float, rows: int, failed: bool) -> None:
    """One statement finished (written to the client, or failed): count it, its latency
    and rows, by what ``session`` recorded about it while running it."""
    seconds = time.perf_counter() - started
    stype = STATEMENT_TYPES.get(session.statement_keyword, "other")
    route = session.route
    plan, keyspace = route if route is not None else (UNROUTED if failed else LOCAL_ROUTE, session.keyspace or "")
    key = (stype, plan, keyspace)
    tally = _TALLIES.get(key)
    if tally is None:
        tally = _TALLIES[key] = StatementTally(stype, plan, keyspace)
    tally.count += 1
    tally.rows += rows
    tally.seconds += seconds
    # Prometheus buckets are "<= bound": the first bound not below the value
    tally.buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
    if seconds > SLOW_QUERIES.floor:
        SLOW_QUERIES.offer(seconds, sql, stype, plan, keyspace, rows, failed)


def flush_statements() -> None:
    """Move the statement tallies into the metrics (every second, and before a scrape)."""
    for tally in list(_TALLIES.values()):
        tally.flush()


def record_error(code: int) -> None:
    """An ERR packet with MySQL error ``code`` went to a client."""
    child = _ERROR_CHILDREN.get(code)
    if child is None:
        child = _ERROR_CHILDREN[code] = ERRORS.labels(str(code))
    child.inc()


def record_commit(shards: int, mode: str) -> None:
    TRANSACTION_COMMITS.labels(str(shards), mode).inc()


def record_rollback() -> None:
    TRANSACTION_ROLLBACKS.inc()


def record_write_hold(keyspace: str, outcome: str, seconds: float) -> None:
    """A write held at a resharding switch ended (``outcome``: released, timed_out, refused)."""
    WRITES_HELD.labels(keyspace, outcome).inc()
    WRITE_HOLD_SECONDS.labels(keyspace).observe(seconds)


def add_to_counter(counter: MetricWrapperBase, last: dict[Any, float], labels: tuple[str, ...], value: float) -> None:
    """Bring a Prometheus counter up to a plain counter kept elsewhere (``value``, which
    only grows): increment it by what ``value`` grew since the last call."""
    before = last.get(labels, 0.0)
    if value > before:
        (counter.labels(*labels) if labels else counter).inc(value - before)  # type: ignore[attr-defined]
    last[labels] = value
