"""Root fixtures: the real local MariaDB shard cluster every integration test runs against.

`local_cluster` starts the example cluster (examples/local/cluster.yaml: commerce -80/80- and
lookup 0, with their schema applied) once per test session, with its data in a pytest temporary
directory and on free ports, so it never collides with a `make run` cluster on 17100/15306.
`local_cluster.config.listen.port` is a free port reserved for a proxy under test.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio

from proxy.cluster import LocalCluster, find_free_port_range, plan_local_shards
from proxy.config import ClusterConfig, load_config
from tests.proxy_process import free_port
from tests.resharding.split import Split

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CLUSTER_YAML = REPO_ROOT / "examples" / "local" / "cluster.yaml"
HTTP_LINE = re.compile(r"^http:.*$", re.M)


def mariadb_template_dir(config: pytest.Config, fallback: Path) -> Path:
    """A template data dir kept across sessions in pytest's cache (install-db runs once)."""
    cache = getattr(config, "cache", None)
    if cache is None:
        return fallback / "mariadb-template"
    return Path(cache.mkdir("shardgate-mariadb")) / "template"


def example_cluster_config(data_dir: Path) -> ClusterConfig:
    """The example cluster with its data under `data_dir`, shards and listener on free ports.

    The example files are copied next to `data_dir` first: tests write cluster files of their own
    next to them, and must never change the repository's."""
    files = data_dir.parent / "cluster-files"
    cluster_yaml = files / EXAMPLE_CLUSTER_YAML.name
    if not files.exists():
        shutil.copytree(EXAMPLE_CLUSTER_YAML.parent, files, ignore=shutil.ignore_patterns(".shardgate", "README.md"))
        # The HTTP listener on a free port too: proxies of other test sessions (and `make run`)
        # share the example's port with SO_REUSEPORT, and a scrape must reach this one.
        text = HTTP_LINE.sub(f"http: {{host: 127.0.0.1, port: {free_port()}}}", cluster_yaml.read_text())
        cluster_yaml.write_text(text)
    base = load_config(cluster_yaml)
    shard_count = len(plan_local_shards(base))
    first = find_free_port_range(shard_count + 1)
    return load_config(
        cluster_yaml,
        data_dir=data_dir,
        base_port=first,
        listen_port=first + shard_count,
    )


@asynccontextmanager
async def running_example_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, name: str
) -> AsyncIterator[LocalCluster]:
    """The example cluster started in a temporary directory of its own, stopped at the end."""
    work = tmp_path_factory.mktemp(name)
    config = example_cluster_config(work / "data")
    cluster = LocalCluster(config, template_dir=mariadb_template_dir(request.config, work))
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def local_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalCluster]:
    async with running_example_cluster(request, tmp_path_factory, "shardgate-cluster") as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def reshard_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalCluster]:
    """A cluster of its own for resharding tests (tests/resharding, tests/cdc/test_reshard.py):
    a switch changes the serving topology and denies writes on shards, which other tests must
    never see. The example cluster's files, its data and ports apart from ``local_cluster``."""
    async with running_example_cluster(request, tmp_path_factory, "shardgate-reshard-cluster") as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def split(reshard_cluster: LocalCluster) -> AsyncIterator[Split]:
    """A split of commerce/-80 into -40,40-80 made by hand (tests/resharding/split.py), its
    targets running and empty; every test starts from the cluster file's shards serving and
    leaves them so."""
    s = Split(reshard_cluster)
    await s.reset()
    try:
        yield s
    finally:
        try:
            await s.reset()
        finally:
            await s.close()
