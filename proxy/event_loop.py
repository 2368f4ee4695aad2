"""The event loop a serving process (``up``, ``serve``, a ``--workers`` worker) runs on:
uvloop by default, asyncio's own with ``SHARDGATE_EVENT_LOOP=asyncio``.

Why uvloop: it runs the loop's per-iteration work (epoll, ready callbacks, socket reads,
writes gathered to the end of the iteration) in C, and the fast path (``proxy.fast_path``)
serves on its transports (it asks them for ``set_protocol`` rather than for
``asyncio.Transport``). Measured same-window, alternating (BENCHMARKS.md, "uvloop — the
serving processes' default event loop"; 8 clients, shared 2-core VM): two pinned workers
cost 6-19% less proxy CPU per point select (means 79.3 against 89.3 µs) and 7-12% less per
INSERT; one worker the same within the noise (16% less under load); the messaging and
topics benchmarks no worse.

asyncio stays selectable (``SHARDGATE_EVENT_LOOP=asyncio``): the fallback should a uvloop
release misbehave, and the loop taken, with one warning, where uvloop is not installed
(it is a dependency, but it builds for POSIX only). Asking for uvloop by name where it is
missing is refused instead: an operator who names it means it.
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
except ImportError:  # not built for this platform, or removed by hand: asyncio then
    uvloop = None

logger = logging.getLogger(__name__)

EVENT_LOOP_ENV = "SHARDGATE_EVENT_LOOP"
LOOPS = ("asyncio", "uvloop")
DEFAULT_LOOP = "uvloop"

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


class EventLoopError(Exception):
    """``SHARDGATE_EVENT_LOOP`` names a loop this process cannot run."""


def loop_factory(choice: str | None = None) -> LoopFactory | None:
    """The factory of the loop ``choice`` (else ``SHARDGATE_EVENT_LOOP``, else
    ``DEFAULT_LOOP``) names; None: asyncio's own."""
    named = (os.environ.get(EVENT_LOOP_ENV, "") if choice is None else choice).strip().lower()
    name = named or DEFAULT_LOOP
    if name not in LOOPS:
        raise EventLoopError(f"{EVENT_LOOP_ENV}={name!r}: expected one of {', '.join(LOOPS)}")
    if name == "asyncio":
        return None
    if uvloop is None:
        if named:
            raise EventLoopError(f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed (pip install uvloop)")
        logger.warning(
            "uvloop is not installed; running on asyncio's event loop",
            extra={"default": DEFAULT_LOOP, "fallback": "asyncio"},
        )
        return None
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T], factory: LoopFactory | None) -> T:
    """``asyncio.run(main)`` on a loop ``factory`` makes (None: asyncio's own)."""
    with asyncio.Runner(loop_factory=factory) as runner:
        loop = runner.get_loop()
        logger.info("event loop", extra={"loop": type(loop).__module__.split(".")[0], "pid": os.getpid()})
        return runner.run(main)
