"""The debug pages with a real HTTP client: ``/debug/vars``, ``/debug/query_plans``,
``/debug/health`` (200, then 503 while a shard is down) and ``/debug/status``."""

from __future__ import annotations

import re
import time
import uuid

from tests.observability.conftest import ObservedProxy, run
from tests.observability.test_metrics import eventually, ids_on


async def test_debug_vars_are_the_scraped_figures_as_json(observed_proxy: ObservedProxy) -> None:
    conn = observed_proxy.connect()
    try:
        run(conn, "select customer_id from customer where customer_id = 11")
    finally:
        conn.close()
    figures = await observed_proxy.scrape()
    body = await observed_proxy.json("/debug/vars")
    assert body["process"]["pid"] == observed_proxy.process.proc.pid
    assert body["workers"] == [observed_proxy.process.proc.pid]
    samples = body["metrics"]["shardgate_queries"]["samples"]
    assert body["metrics"]["shardgate_queries"]["type"] == "counter"
    from_json = sum(s["value"] for s in samples if s["name"] == "shardgate_queries_total"
                    and s["labels"]["plan"] == "Route/EqualUnique")
    # the JSON read is later than the scrape, and nothing ran in between
    assert from_json == figures.total("shardgate_queries", "shardgate_queries_total", plan="Route/EqualUnique") > 0
    assert {"shardgate_pool_in_use", "shardgate_query_duration_seconds", "shardgate_errors"} <= set(body["metrics"])


async def test_query_plans_list_the_plan_of_a_statement_just_run(observed_proxy: ObservedProxy) -> None:
    alias = "plan_" + uuid.uuid4().hex[:12]
    conn = observed_proxy.connect()
    try:
        run(conn, f"select email as {alias} from customer where customer_id = 42")
        run(conn, f"select count(*) as {alias} from customer")
    finally:
        conn.close()
    body = await observed_proxy.json("/debug/query_plans")
    assert body["pid"] == observed_proxy.process.proc.pid and body["size"] >= 2
    ours = [p for p in body["plans"] if alias in p["query"]]
    assert [p["query"] for p in ours] == [
        f"select count(*) as {alias} from customer",  # the most recently used first
        f"select email as {alias} from customer where customer_id = :vtg1",
    ]
    assert all(p["keyspace"] == "commerce" for p in ours)
    scatter, point = ours[0]["plan"], ours[1]["plan"]
    assert (point["OperatorType"], point["Variant"], point["Vindex"]) == ("Route", "EqualUnique", "hash")
    assert scatter["OperatorType"] == "Aggregate"
    assert scatter["Inputs"][0]["Variant"] == "Scatter"


async def test_health_is_200_while_serving_and_503_while_a_shard_is_down(
    observed_proxy: ObservedProxy, local_cluster
) -> None:
    status, _, _ = await observed_proxy.get("/debug/health")
    assert status == 200
    body = await observed_proxy.json("/debug/health")
    assert body["status"] == "serving"
    assert {(s["keyspace"], s["shard"]) for s in body["shards"]} == {
        ("commerce", "-80"), ("commerce", "80-"), ("lookup", "0")}

    await local_cluster.stop_shard("commerce", "80-")
    try:
        async def unhealthy() -> bool:
            return (await observed_proxy.get("/debug/health"))[0] == 503

        await eventually(unhealthy, within=10, what="/debug/health answering 503")
        body = await observed_proxy.json("/debug/health")
        assert body["status"] == "unhealthy"
        down = {(s["keyspace"], s["shard"]): s for s in body["shards"]}
        assert not down[("commerce", "80-")]["ok"] and "80-" in down[("commerce", "80-")]["error"]
        assert down[("commerce", "-80")]["ok"] and down[("lookup", "0")]["ok"]
        status, _, page = await observed_proxy.get("/debug/status")
        assert status == 200 and "unreachable" in page and "a shard is unreachable" in page
    finally:
        await local_cluster.start_shard("commerce", "80-")

    async def healthy() -> bool:
        return (await observed_proxy.get("/debug/health"))[0] == 200

    await eventually(healthy, within=20, what="/debug/health back to 200 after the shard restarted")


async def test_status_page_shows_shards_statements_and_the_slowest_queries(observed_proxy: ObservedProxy) -> None:
    (slow_id,) = ids_on("80-", 1)
    marker = "slow_" + uuid.uuid4().hex[:10]
    conn = observed_proxy.connect()
    try:
        run(conn, f"insert into customer(customer_id, email) values ({slow_id}, 'slow@example.com')")
        run(conn, f"select sleep(1) as {marker} from customer where customer_id = {slow_id}")
        run(conn, "select * from no_such_table_for_status")
    except Exception:
        pass  # the second one fails, as intended: its error code shows on the page
    finally:
        conn.close()
    started = time.monotonic()
    status, content_type, page = await observed_proxy.get("/debug/status")
    assert time.monotonic() - started < 5
    assert status == 200 and content_type == "text/html"
    assert page.startswith("<!doctype html>")
    # readable without the network: no scripts, no external resources
    assert "<script" not in page.lower()
    assert not re.search(r'(?:src|href)="https?://', page)
    for heading in ("Keyspaces and shards", "Queries per second and latency", "Statements", "Errors by MySQL code",
                    "Transactions", "Message tables", "CDC streams", "Slowest recent statements"):
        assert f"{heading}</h2>" in page or f"{heading} (" in page, heading
    shards = re.search(r'<section id="shards">(.*?)</section>', page, re.S).group(1)
    for keyspace, shard in (("commerce", "-80"), ("commerce", "80-"), ("lookup", "0")):
        assert re.search(rf"<td>{keyspace}</td><td>(yes|no)</td><td>{re.escape(shard)}</td>"
                         rf'<td><span class="ok">serving</span></td>', shards), (keyspace, shard)
    statements = re.search(r'<section id="statements">(.*?)</section>', page, re.S).group(1)
    assert "<td>select</td><td>Route/EqualUnique</td><td>commerce</td>" in statements
    errors = re.search(r'<section id="errors">(.*?)</section>', page, re.S).group(1)
    assert "<td>1146</td>" in errors
    slow = re.search(r'<section id="slow">(.*?)</section>', page, re.S).group(1)
    first_row = re.search(r"<tbody><tr>(.*?)</tr>", slow, re.S).group(1)
    assert marker in first_row  # the slowest statement of the last minutes comes first
    assert "customer_events" in re.search(r'<section id="messages">(.*?)</section>', page, re.S).group(1)
