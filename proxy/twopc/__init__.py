"""Atomic multi-shard transactions: Vitess's ``transaction_mode = TWOPC`` over MariaDB XA.

- ``xid``: dtids (``ks:shard:<process>-<n>``, naming the metadata manager) and XA xids.
- ``coordinator``: the commit protocol (prepare, decision, commit).
- ``manager``: per-process state, decision records (the sidecar table), counters.
- ``resolver``: finishes in-doubt transactions whose coordinator is gone; the data of
  ``SHOW UNRESOLVED TRANSACTIONS`` / ``SHOW TRANSACTION STATUS FOR '<dtid>'``.
- ``faults``: test-only fault injection (``SHARDGATE_TWOPC_FAULT``).

One ``TwoPCManager`` per ``ClusterState`` (``manager_for``); its resolver starts with
``start_for_proxy`` (at the proxy's start-up) or, at the latest, when a session first
uses ``twopc``.
"""

from __future__ import annotations

import weakref
from typing import Any

from proxy.twopc.manager import TwoPCCounters, TwoPCManager
from proxy.twopc.resolver import run_resolver

SINGLE = "single"
MULTI = "multi"
TWOPC = "twopc"
MODES = (SINGLE, MULTI, TWOPC)

_MANAGERS: weakref.WeakKeyDictionary[Any, TwoPCManager] = weakref.WeakKeyDictionary()


def manager_for(proxy: Any) -> TwoPCManager:
    """The 2PC manager of ``proxy`` (a ``proxy.cluster_state.ClusterState``), made on first use."""
    m = _MANAGERS.get(proxy)
    if m is None:
        config = getattr(proxy.config, "twopc", None)
        interval = config.resolver_interval_seconds if config is not None else 1.0
        m = TwoPCManager(
            [p.address for p in proxy.pools.pools.values()], resolver_interval_s=interval, resolver=run_resolver
        )
        _MANAGERS[proxy] = m
    return m


def start_for_proxy(proxy: Any) -> TwoPCManager:
    """Start the resolver of ``proxy``'s process (idempotent); call from ``ClusterState.start``."""
    m = manager_for(proxy)
    m.start()
    return m


async def stop_for_proxy(proxy: Any) -> None:
    """Stop the resolver and close its connections; call from ``ClusterState.close``."""
    m = _MANAGERS.pop(proxy, None)
    if m is not None:
        await m.stop()


__all__ = [
    "MODES",
    "MULTI",
    "SINGLE",
    "TWOPC",
    "TwoPCCounters",
    "TwoPCManager",
    "manager_for",
    "start_for_proxy",
    "stop_for_proxy",
]
