"""One scrape for the whole process group under ``--workers N``.

The parent (``proxy.server._serve_workers``) makes a directory, passes it to its workers
as ``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client writes each worker's figures to files
there) and removes it when they are gone; it marks a worker that exited dead, so that
gauges stop counting it. Each worker serves the HTTP listener on the shared port
(SO_REUSEPORT, as the topics REST API already does: its routes need a worker's state), and
whichever worker answers a scrape merges every worker's files: one scrape shows the group.

A single process (no such variable) reports its own registry, with the process and
Python collectors prometheus_client adds by default.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

logger = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def metrics_dir() -> Path | None:
    """The process group's directory of figures, when this process is one of ``--workers``."""
    value = os.environ.get(MULTIPROC_ENV)
    return Path(value) if value else None


def create_metrics_dir() -> Path:
    """For the parent of ``--workers``: a fresh directory for its workers' figures."""
    return Path(tempfile.mkdtemp(prefix="shardgate-metrics-"))


def worker_exited(path: Path, pid: int) -> None:
    """A worker is gone: its live gauges (connections, pools...) stop counting."""
    mark_process_dead(pid, str(path))


def remove_metrics_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def scrape_registry() -> Any:
    """The registry a scrape reads: every worker's figures merged, or this process's."""
    path = metrics_dir()
    if path is None:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry, str(path))
    return registry


def queries_by_worker() -> dict[int, float]:
    """Statements each worker of the group counted (``shardgate_queries_total``), by pid:
    which worker served how much, which the merged scrape no longer tells."""
    path = metrics_dir()
    if path is None:
        return {}
    out: dict[int, float] = {}
    for f in sorted(path.glob("counter_*.db")):
        try:
            pid = int(f.stem.rsplit("_", 1)[1])
        except ValueError:
            continue
        for metric in MultiProcessCollector.merge([str(f)]):
            if metric.name == "shardgate_queries":
                out[pid] = sum(s.value for s in metric.samples if s.name == "shardgate_queries_total")
    return out


def worker_pids() -> list[int]:
    """The workers whose figures the group's directory holds (this process alone outside it)."""
    path = metrics_dir()
    if path is None:
        return [os.getpid()]
    pids = set()
    for f in path.glob("gauge_livesum_*.db"):
        try:
            pids.add(int(f.stem.rsplit("_", 1)[1]))
        except ValueError:
            continue
    return sorted(pids)
