"""The Reshard workflow tests' ``shardgate up`` process (tests/resharding/workflow_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import mariadb_template_dir
from tests.resharding.workflow_cluster import UpProcess, write_cluster_file


@pytest.fixture
def up(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UpProcess]:
    # Small copy chunks: a copy of a few thousand rows takes long enough to be killed halfway.
    path = write_cluster_file(tmp_path, mariadb_template_dir(request.config, tmp_path), copy_chunk_rows=10)
    process = UpProcess(path, tmp_path / "up.log")
    process.start()
    try:
        yield process
    finally:
        process.stop()
        # Shown by pytest only when the test failed: what the workflow host did.
        print("\n".join(line for line in process.log.read_text().splitlines() if "resharding" in line)[-20000:])
