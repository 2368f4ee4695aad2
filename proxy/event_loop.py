"""The event loop a serving process (``up``, ``serve``, a ``--workers`` worker) runs on:
asyncio's own, or uvloop with ``SHARDGATE_EVENT_LOOP=uvloop``.

Why a choice: uvloop runs the loop's per-iteration work (epoll, ready callbacks, socket
reads, writes gathered to the end of the iteration) in C. With the fast path serving
on it, a point select cost 8-15% less proxy CPU with one worker and with two
(``python -m tests.benchmarks workers``, 8 clients, shared 2-core VM, alternating rounds:
one worker 70.1, 70.6 -> 61.8, 62.8 µs; two pinned workers 79.6, 87.4 -> 68.7, 73.6 µs).

Why not the default: the fast path (``proxy.fast_path``) takes only asyncio's own
transports (``isinstance(transport, asyncio.Transport)``; uvloop's do not derive from
it), so on uvloop every statement takes the normal path: 141-153 µs per point select
instead of 58-68 µs in the same runs. Until the fast path accepts uvloop's transports,
asyncio stays the default and uvloop is the operator's explicit choice.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from types import ModuleType
from typing import Any, TypeVar

uvloop: ModuleType | None
try:
    import uvloop
except ImportError:  # an optional dependency (pip install shardgate[uvloop])
    uvloop = None

logger = logging.getLogger(__name__)

EVENT_LOOP_ENV = "SHARDGATE_EVENT_LOOP"
LOOPS = ("asyncio", "uvloop")
DEFAULT_LOOP = "asyncio"

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class EventLoopError(Exception):
    """``SHARDGATE_EVENT_LOOP`` names a loop this process cannot run."""


def loop_factory(choice: str | None = None) -> LoopFactory | None:
    """The factory of the loop ``choice`` (else ``SHARDGATE_EVENT_LOOP``, else asyncio)
    names; None: asyncio's own."""
    name = (os.environ.get(EVENT_LOOP_ENV, "") if choice is None else choice).strip().lower() or DEFAULT_LOOP
    if name not in LOOPS:
        raise EventLoopError(f"{EVENT_LOOP_ENV}={name!r}: expected one of {', '.join(LOOPS)}")
    if name == "asyncio":
        return None
    if uvloop is None:
        raise EventLoopError(f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed (pip install uvloop)")
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T], factory: LoopFactory | None) -> T:
    """``asyncio.run(main)`` on a loop ``factory`` makes (None: asyncio's own)."""
    with asyncio.Runner(loop_factory=factory) as runner:
        loop = runner.get_loop()
        logger.info("event loop", extra={"loop": type(loop).__module__.split(".")[0], "pid": os.getpid()})
        return runner.run(main)
