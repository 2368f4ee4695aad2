"""Helpers for the tests of client sessions (process list, KILL, timeouts): long scatters
that sleep once on every commerce shard, and what the shards themselves are running."""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
import yaml
from prometheus_client.parser import text_string_to_metric_families
from pymysql.connections import MysqlPacket

from tests.proxy_process import REPO


def shard_connection(endpoint: Any) -> pymysql.connections.Connection:
    return pymysql.connect(
        host=endpoint.host, port=endpoint.port, user=endpoint.user, password=endpoint.password,
        database=endpoint.database, autocommit=True,
    )


def commerce_endpoints(local_cluster: Any) -> list[Any]:
    return [e for (ks, _shard), e in sorted(local_cluster.endpoints.items()) if ks == "commerce"]


def one_customer_per_commerce_shard(local_cluster: Any) -> int:
    """Write one customer row on each commerce shard, directly (bypassing the proxy), all
    with a fresh tenant_id, which is returned: ``where tenant_id = <it>`` is a scatter
    that finds exactly one row on every shard."""
    tenant = 10_000_000 + uuid.uuid4().int % 1_000_000_000
    for i, e in enumerate(commerce_endpoints(local_cluster)):
        conn = shard_connection(e)
        try:
            with conn.cursor() as c:
                c.execute(
                    "insert into customer(customer_id, email, tenant_id) values (%s, 'probe', %s)",
                    (tenant * 10 + i, tenant),
                )
        finally:
            conn.close()
    return tenant


def sleeping_scatter(tenant: int, seconds: float, tag: str) -> str:
    """A scatter over the commerce shards that sleeps ``seconds`` on each (one row each);
    ``tag`` makes it findable in the shards' process lists."""
    return f"select customer_id, sleep({seconds}) as `{tag}` from customer where tenant_id = {tenant}"


def shard_threads_running(local_cluster: Any, text: str) -> dict[str, list[int]]:
    """Per commerce shard, the ids of the shard threads whose statement contains ``text``."""
    out: dict[str, list[int]] = {}
    for e in commerce_endpoints(local_cluster):
        conn = shard_connection(e)
        try:
            with conn.cursor() as c:
                c.execute(
                    "select id from information_schema.processlist where info like %s and id <> connection_id()",
                    (f"%{text}%",),
                )
                out[f"{e.host}:{e.port}"] = [r[0] for r in c.fetchall()]
        finally:
            conn.close()
    return out


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@dataclass
class Outcome:
    rows: Any = None
    error: BaseException | None = None
    seconds: float = 0.0
    done: threading.Event = field(default_factory=threading.Event)


def run_in_thread(conn: pymysql.connections.Connection, sql: str) -> Outcome:
    """Run ``sql`` on ``conn`` in a thread (the test kills or watches it meanwhile)."""
    outcome = Outcome()

    def work() -> None:
        started = time.monotonic()
        try:
            with conn.cursor() as c:
                c.execute(sql)
                outcome.rows = c.fetchall()
        except BaseException as e:  # handed to the test, which asserts on it
            outcome.error = e
        finally:
            outcome.seconds = time.monotonic() - started
            outcome.done.set()

    threading.Thread(target=work, daemon=True).start()
    return outcome


def query(conn: pymysql.connections.Connection, sql: str) -> tuple[Any, ...]:
    with conn.cursor() as c:
        c.execute(sql)
        return tuple(c.fetchall())


def dsn_cluster_file(local_cluster: Any, directory: Path, **extra: Any) -> Path:
    """The example cluster file with every shard given by dsn (the running test cluster)
    and ``extra`` top-level fields (``transaction_timeout: 1``), written in ``directory``."""
    src = REPO / "examples" / "local" / "cluster.yaml"
    doc = yaml.safe_load(src.read_text())
    doc.pop("local", None)
    for name, ks in doc["keyspaces"].items():
        for key in ("vschema", "schema"):
            ks[key] = str((src.parent / ks[key]).resolve())
        ks["shards"] = {
            shard: f"mysql://{e.user}@{e.host}:{e.port}/{e.database}"
            for (k, shard), e in local_cluster.endpoints.items() if k == name
        }
    doc.update(extra)
    out = directory / "cluster.yaml"
    out.write_text(yaml.safe_dump(doc))
    return out


def metric_total(metrics_url: str, family_name: str, **labels: str) -> float:
    """A counter family's ``_total`` samples whose labels include ``labels``, summed, as the
    proxy's /metrics says."""
    with urllib.request.urlopen(metrics_url, timeout=10) as r:
        body = r.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(body)
        if family.name == family_name
        for sample in family.samples
        if sample.name.endswith("_total") and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def fast_path_statements(metrics_url: str) -> float:
    """``shardgate_fast_path_statements`` summed over its shards."""
    return metric_total(metrics_url, "shardgate_fast_path_statements")


def fast_answer(metrics: str, run: Callable[[], Any], times: int = 4, statements: int = 1) -> Any:
    """A statement's answer (or ``statements``'), the same every time: run until the fast path
    has taken them all ``times`` times in a row (the first run plans them, and a session's
    first statement on a shard needs a shard link with its settings, opened meanwhile)."""
    first = run()
    deadline = time.monotonic() + 10
    in_a_row = 0
    while in_a_row < times:
        before = fast_path_statements(metrics)
        assert run() == first
        in_a_row = in_a_row + 1 if fast_path_statements(metrics) == before + statements else 0
        assert time.monotonic() < deadline, "the fast path never took it"
    return first


def pymysql_answers(conn: pymysql.connections.Connection, statements: list[str]) -> list[Any]:
    """Each statement's answer as PyMySQL reads it, with the packets' bytes."""
    packets: list[bytes] = []
    read = conn._read_packet

    def capture(packet_type: Any = MysqlPacket) -> Any:
        packet = read(packet_type)
        packets.append(packet.get_all_data())
        return packet

    conn._read_packet = capture  # type: ignore[method-assign]
    out: list[Any] = []
    for sql in statements:
        packets.clear()
        try:
            with conn.cursor() as c:
                c.execute(sql)
                out.append((c.rowcount, c.lastrowid, conn._result.warning_count, conn._result.message,
                            conn.server_status, c.fetchall(), list(packets)))
        except pymysql.err.MySQLError as e:
            out.append(("error", e.args, list(packets)))
    conn._read_packet = read  # type: ignore[method-assign]
    return out
