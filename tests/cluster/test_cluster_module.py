"""`python -m proxy.cluster FILE`: run only the local shards until SIGTERM/Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from proxy.cluster import find_free_port_range
from tests.conftest import EXAMPLE_CLUSTER_YAML, REPO_ROOT


def test_it_lists_every_shard_endpoint_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    base_port = find_free_port_range(3)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy.cluster",
            str(EXAMPLE_CLUSTER_YAML),
            "--data-dir",
            str(tmp_path / "data"),
            "--base-port",
            str(base_port),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline().rstrip("\n") for _ in range(3)]
        assert lines == [
            f"commerce/-80\t127.0.0.1:{base_port}",
            f"commerce/80-\t127.0.0.1:{base_port + 1}",
            f"lookup/0\t127.0.0.1:{base_port + 2}",
        ]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        # A clean shutdown removes each server's pid file.
        assert not list((tmp_path / "data").glob("*/*/mariadbd.pid"))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_an_invalid_config_exits_with_status_1_naming_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("listen: {port: nope}\n")
    done = subprocess.run(
        [sys.executable, "-m", "proxy.cluster", str(bad)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"{bad}: listen.port: expected a port number" in done.stderr
