"""Resharding tests run on a cluster of their own (the example cluster's files, data and ports
apart from the session's ``local_cluster``): a switch changes the serving topology and denies
writes on shards, which other tests must never see.

``split`` makes a split of ``commerce/-80`` into ``-40,40-80`` the way the Reshard workflow
does, without that workflow (tests/resharding/split.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from proxy.cluster import LocalCluster
from tests.conftest import example_cluster_config, mariadb_template_dir
from tests.resharding.split import Split


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def reshard_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LocalCluster]:
    work = tmp_path_factory.mktemp("shardgate-reshard-cluster")
    config = example_cluster_config(work / "data")
    cluster = LocalCluster(config, template_dir=mariadb_template_dir(request.config, work))
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def split(reshard_cluster: LocalCluster) -> AsyncIterator[Split]:
    """A split of commerce/-80 into -40,40-80, prepared (targets running, empty); every test
    starts from the cluster file's topology and leaves it so."""
    s = Split(reshard_cluster)
    await s.reset()
    try:
        yield s
    finally:
        try:
            await s.reset()
        finally:
            await s.close()
