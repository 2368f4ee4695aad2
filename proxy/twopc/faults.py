"""Test-only fault injection at exact points of the 2PC commit.

Off unless ``SHARDGATE_TWOPC_FAULT`` is set (the crash tests set it on a proxy
process they start). Its value is a comma-separated list of ``point=action[@p]``:

- point: ``before_prepare`` | ``after_prepare`` (every participant prepared, no decision
  yet) | ``after_decision`` (decision committed on the metadata manager, participants
  not yet committed) | ``after_commit`` (participants committed, record not yet cleared)
- action: ``kill`` (SIGKILL this process: a crash, nothing cleaned up) | ``pause:<s>``
  (sleep that long) | ``fail`` (raise, as if the step had failed)
- p: probability per commit (default 1), drawn from a generator seeded with
  ``SHARDGATE_TWOPC_FAULT_SEED`` (default 0) so a run is repeatable.

``after_decision=kill@0.1,after_prepare=pause:2`` is a valid value.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
from dataclasses import dataclass

from proxy.errors import ER_UNKNOWN_ERROR, ProxyError

logger = logging.getLogger(__name__)

POINTS = ("before_prepare", "after_prepare", "after_decision", "after_commit")
ENV = "SHARDGATE_TWOPC_FAULT"
SEED_ENV = "SHARDGATE_TWOPC_FAULT_SEED"


@dataclass(frozen=True, slots=True)
class Fault:
    action: str  # kill | pause | fail
    seconds: float
    probability: float


class Faults:
    def __init__(self, spec: str = "", seed: int = 0) -> None:
        self.rules: dict[str, Fault] = {}
        self.random = random.Random(seed)
        for item in filter(None, (p.strip() for p in spec.split(","))):
            point, _, rest = item.partition("=")
            action, _, prob = rest.partition("@")
            kind, _, secs = action.partition(":")
            if point not in POINTS or kind not in ("kill", "pause", "fail"):
                raise ValueError(f"{ENV}: cannot read {item!r}")
            self.rules[point] = Fault(kind, float(secs or 0), float(prob or 1))

    @classmethod
    def from_env(cls) -> Faults:
        try:
            return cls(os.environ.get(ENV, ""), int(os.environ.get(SEED_ENV, "0")))
        except ValueError as e:
            logger.error("twopc fault injection off: bad setting", extra={"error": str(e)})
            return cls()

    async def hit(self, point: str, dtid: str) -> None:
        fault = self.rules.get(point)
        if fault is None or self.random.random() >= fault.probability:
            return
        logger.warning("twopc fault injected", extra={"point": point, "action": fault.action, "dtid": dtid})
        if fault.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
            await asyncio.sleep(3600)  # never reached
        elif fault.action == "pause":
            await asyncio.sleep(fault.seconds)
        else:
            raise ProxyError(ER_UNKNOWN_ERROR, f"injected failure at {point}")
