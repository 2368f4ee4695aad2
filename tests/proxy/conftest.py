"""A real proxy process over the session's local cluster."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.proxy_process import ProxyProcess, start_proxy, stop_proxy


@pytest.fixture(scope="session")
def proxy(local_cluster, tmp_path_factory) -> Iterator[ProxyProcess]:
    log = tmp_path_factory.mktemp("proxy") / "proxy.log"
    p = start_proxy(local_cluster.config.path, local_cluster.endpoints, log)
    try:
        yield p
    finally:
        stop_proxy(p)
