"""TPC-H fixtures: a cluster of its own (keyspace `tpch` on -80/80- plus a one-server oracle,
see tests/tpch/cluster.py) loaded with dbgen data at SF 0.01 (`SHARDGATE_TPCH_SF` to change),
and a real proxy process over the two shards."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from tests.conftest import mariadb_template_dir
from tests.proxy_process import ProxyProcess
from tests.tpch.cluster import TpchCluster, load, make_cluster
from tests.tpch.datagen import Dataset, generate

logger = logging.getLogger(__name__)

TEST_SF = float(os.environ.get("SHARDGATE_TPCH_SF", "0.01"))


@dataclass
class TpchData:
    tc: TpchCluster
    data: Dataset
    load_seconds: float


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tpch(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[TpchData]:
    """The cluster, started and loaded (no proxy)."""
    work = tmp_path_factory.mktemp("tpch")
    tc = make_cluster(work, template_dir=mariadb_template_dir(request.config, work))
    data = await asyncio.to_thread(generate, TEST_SF)
    await tc.cluster.start()
    try:
        seconds = await asyncio.to_thread(load, tc, data)
        logger.info("tpch sf=%s loaded in %.2f s (%s)", TEST_SF, seconds, data.row_counts)
        yield TpchData(tc, data, seconds)
    finally:
        await tc.cluster.stop()


@pytest.fixture(scope="session")
def tpch_proxy(tpch: TpchData) -> Iterator[ProxyProcess]:
    """A real proxy process (`shardgate worker`) over the two `tpch` shards."""
    proxy = tpch.tc.start_proxy({"SHARDGATE_LOG_LEVEL": "WARNING"})
    try:
        yield proxy
    finally:
        tpch.tc.stop_proxy(proxy)
