"""Each worker of ``serve/up --workers N`` on a CPU of its own.

Why: two unpinned workers cost more CPU per query together than one process does
(the fast path's point select on this 2-core VM, 8 clients, same run, CPU of the
workers summed: one worker 44-54 µs, two unpinned 59-63 µs, two pinned one per core
48-54 µs: BENCHMARKS.md, "Fast path: SET sessions, prepared statements, ..."). A
worker that stays on one core keeps its interpreter's working set in that core's
caches; the scheduler otherwise runs both workers by turns on either core. Workers
go one per CPU this process may use (``sched_getaffinity``); with more workers than
CPUs (measured nowhere) or ``SHARDGATE_PIN_WORKERS=0`` they are left to the scheduler.

Helper processes a worker starts (the CDC decoders' zygote) are not the worker's
load: they go back to every CPU the parent had (``unpin``).
"""

from __future__ import annotations

import logging
import os

logger = logging.getLogger(__name__)

WORKER_CPU_ENV = "SHARDGATE_WORKER_CPU"
# The CPUs the workers' parent could use, for the helpers a pinned worker starts.
UNPINNED_CPUS_ENV = "SHARDGATE_UNPINNED_CPUS"
PIN_WORKERS_ENV = "SHARDGATE_PIN_WORKERS"


def worker_environments(workers: int) -> list[dict[str, str]]:
    """The environment entries that pin each of ``workers`` processes (none: not pinned)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return [{} for _ in range(workers)]
    if workers < 2 or workers > len(cpus) or os.environ.get(PIN_WORKERS_ENV, "1") == "0":
        return [{} for _ in range(workers)]
    every = ",".join(map(str, cpus))
    return [{WORKER_CPU_ENV: str(cpus[i]), UNPINNED_CPUS_ENV: every} for i in range(workers)]


def pin_from_environment() -> int | None:
    """Pin this process (and the threads it starts from now on) to its CPU, if it has one."""
    cpu = os.environ.get(WORKER_CPU_ENV)
    if not cpu:
        return None
    try:
        os.sched_setaffinity(0, {int(cpu)})
    except (AttributeError, OSError, ValueError) as e:
        logger.warning("worker not pinned to its CPU", extra={"cpu": cpu, "error": str(e)})
        return None
    logger.info("worker pinned", extra={"cpu": int(cpu), "pid": os.getpid()})
    return int(cpu)


def unpin() -> None:
    """A helper process of a pinned worker: back on every CPU the workers' parent had."""
    cpus = os.environ.get(UNPINNED_CPUS_ENV)
    if not cpus:
        return
    try:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    except (AttributeError, OSError, ValueError) as e:
        logger.warning("helper not unpinned", extra={"cpus": cpus, "error": str(e)})
