"""The Reshard workflow end to end on real local shards, driven by ``shardgate reshard`` against a
``shardgate up`` process, while a writer keeps committing through the proxy."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import mariadb_template_dir
from tests.resharding.split import run_sql
from tests.resharding.workflow_cluster import (
    UpProcess,
    Writer,
    reshard,
    serving_shards,
    shard_endpoints,
    status,
    write_cluster_file,
)
from vschema.keyrange import KeyRange
from vschema.vindexes.hash import HashVindex

SEED_ROWS = 3000


@pytest.fixture
def up(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UpProcess]:
    path = write_cluster_file(tmp_path, mariadb_template_dir(request.config, tmp_path))
    process = UpProcess(path, tmp_path / "up.log")
    process.start()
    try:
        yield process
    finally:
        process.stop()


def seed(up: UpProcess, first: int, count: int) -> set[int]:
    conn = up.connect()
    try:
        with conn.cursor() as cur:
            for start in range(first, first + count, 500):
                ids = range(start, min(start + 500, first + count))
                cur.execute(
                    "insert into customer (customer_id, email, tenant_id) values "
                    + ", ".join(f"({i}, 'seed{i}', {i % 7})" for i in ids)
                )
    finally:
        conn.close()
    return set(range(first, first + count))


def wait_for(predicate, timeout: float = 120.0, what: str = "condition") -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def assert_rows_placed(config_path: Path, expected: set[int]) -> None:
    """Every expected customer on exactly the serving shard its hash names, and nothing else."""
    vindex = HashVindex("hash")
    seen: dict[int, str] = {}
    endpoints = shard_endpoints(config_path)
    for shard in serving_shards(config_path):
        rng = KeyRange.parse(shard)
        for (customer_id,) in run_sql(endpoints[shard], "select customer_id from customer"):
            assert customer_id not in seen, f"customer {customer_id} on {seen[customer_id]} and {shard}"
            seen[customer_id] = shard
            ksid = vindex.keyspace_id(customer_id)
            assert ksid is not None and rng.contains(ksid), f"customer {customer_id} on the wrong shard {shard}"
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} committed rows lost, e.g. {sorted(missing)[:5]}"
    extra = set(seen) - expected
    assert not extra, f"rows nobody committed: {sorted(extra)[:5]}"


def assert_only_held_writes_failed(writer: Writer) -> None:
    """Writes may only fail at the switch, refused by the sources' deny rule (the serving side holds
    them until the topology flips where it can); anything else is a bug."""
    other = [e for e in writer.errors if "disallowed due to rule: enforce denied tables" not in e]
    assert not other, other[:5]
    assert len(writer.committed) > 100, "the writer hardly wrote"


def run_ok(config_path: Path, workflow: str, *verb: str) -> str:
    done = reshard(config_path, workflow, *verb)
    assert done.returncode == 0, f"reshard {' '.join(verb)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_split_while_writing_then_vdiff_switch_and_complete(up: UpProcess) -> None:
    path = up.config_path
    expected = seed(up, 1, SEED_ROWS)
    writer = Writer(up, 1_000_000)
    writer.start()
    try:
        run_ok(path, "split", "create", "--source-shards", "-80", "--target-shards", "-40,40-80", "--timeout", "120")
        assert status(path, "split")["state"] == "Running"
        report = run_ok(path, "split", "vdiff")
        assert "result: clean" in report, report
        run_ok(path, "split", "switch-traffic")
        assert serving_shards(path) == ("-40", "40-80", "80-")
        time.sleep(1.0)  # writes after the switch go to the targets
    finally:
        writer.stop()
    assert_only_held_writes_failed(writer)
    expected |= writer.committed
    run_ok(path, "split", "complete")
    assert status(path, "split")["state"] == "Completed"
    assert_rows_placed(path, expected)


def test_bad_requests_are_refused_with_clear_errors(up: UpProcess) -> None:
    path = up.config_path
    gap = reshard(path, "bad", "create", "--source-shards", "-80", "--target-shards", "-40,50-80", "--no-wait")
    assert gap.returncode == 2 and "gap between -40 and 50-80" in gap.stderr, gap.stderr
    wide = reshard(path, "bad", "create", "--source-shards", "-80", "--target-shards", "-40,40-", "--no-wait")
    assert wide.returncode == 2 and "do not cover exactly the key range" in wide.stderr, wide.stderr
    unknown = reshard(path, "bad", "create", "--source-shards", "-40", "--target-shards", "-20,20-40", "--no-wait")
    assert unknown.returncode == 2 and "source shard commerce/-40 does not serve" in unknown.stderr
    partial = reshard(path, "bad", "switch-traffic", "--reads-only")
    assert partial.returncode == 2 and "ERROR 1235 (42000)" in partial.stderr, partial.stderr
    missing = reshard(path, "nope", "status")
    assert missing.returncode == 2 and "workflow nope: not found" in missing.stderr
    unsharded = reshard(path, "bad", "create", "--source-shards", "0", "--target-shards", "-80,80-", "--no-wait",
                        keyspace="lookup")
    assert unsharded.returncode == 2 and "ERROR 1235 (42000)" in unsharded.stderr, unsharded.stderr
    assert "unsharded" in unsharded.stderr
