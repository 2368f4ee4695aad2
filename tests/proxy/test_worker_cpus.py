"""Workers of ``--workers N`` go one per CPU (proxy.worker_cpus), and their helpers back to every CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from proxy.worker_cpus import (
    PIN_WORKERS_ENV,
    UNPINNED_CPUS_ENV,
    WORKER_CPU_ENV,
    worker_environments,
)
from tests.proxy_process import REPO

CPUS = sorted(os.sched_getaffinity(0))


@pytest.mark.skipif(len(CPUS) < 2, reason="one CPU: nothing to spread the workers over")
def test_each_worker_gets_a_cpu_of_its_own_when_there_are_enough(monkeypatch) -> None:
    monkeypatch.delenv(PIN_WORKERS_ENV, raising=False)
    envs = worker_environments(2)
    assert [e[WORKER_CPU_ENV] for e in envs] == [str(c) for c in CPUS[:2]]
    assert all(e[UNPINNED_CPUS_ENV] == ",".join(map(str, CPUS)) for e in envs)
    assert worker_environments(1) == [{}]
    assert worker_environments(len(CPUS) + 1) == [{}] * (len(CPUS) + 1)  # more workers than CPUs: the scheduler's
    monkeypatch.setenv(PIN_WORKERS_ENV, "0")
    assert worker_environments(2) == [{}, {}]


@pytest.mark.skipif(len(CPUS) < 2, reason="one CPU: nothing to pin")
def test_a_pinned_worker_runs_on_its_cpu_and_its_helpers_on_every_cpu() -> None:
    script = (
        "import os; from proxy.worker_cpus import pin_from_environment, unpin; pin_from_environment(); "
        "print(sorted(os.sched_getaffinity(0))); unpin(); print(sorted(os.sched_getaffinity(0)))"
    )
    env = dict(os.environ, **worker_environments(2)[1])
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == [str([CPUS[1]]), str(CPUS)]
