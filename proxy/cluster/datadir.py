"""Initialising shard data directories.

`mariadb-install-db` costs a couple of seconds, so it runs once into a template directory which is
then copied for every shard (a copy of ~50 MB takes under 0.1 s). Directories are filled
under a temporary name and renamed into place, so an interrupted initialisation never leaves a
half-made data dir that looks finished.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import shutil
import subprocess
import time
from pathlib import Path

from proxy.cluster.binaries import MariaDBBinaries
from proxy.cluster.errors import ClusterError
from proxy.cluster.server_options import INNODB_OPTIONS, install_db_command

logger = logging.getLogger(__name__)

TEMPLATE_STAMP = "shardgate-template.json"
# Bump when the template's contents change (users, install options) so cached templates rebuild.
TEMPLATE_FORMAT = 1
# Only root@localhost (socket) and root@127.0.0.1 (TCP) stay; the install also creates
# root@<hostname> and root@::1, which skip-name-resolve and bind-address make unusable anyway.
_TRIM_USERS_SQL = """\
DELETE FROM mysql.global_priv WHERE Host NOT IN ('localhost', '127.0.0.1');
DELETE FROM mysql.proxies_priv WHERE Host NOT IN ('localhost', '127.0.0.1');
"""


def _template_stamp(binaries: MariaDBBinaries) -> dict[str, object]:
    return {
        "format": TEMPLATE_FORMAT,
        "mariadbd": binaries.version(),
        "innodb_options": list(INNODB_OPTIONS),
    }


def _read_stamp(template_dir: Path) -> object:
    try:
        return json.loads((template_dir / TEMPLATE_STAMP).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as e:
        logger.warning("unreadable template stamp, rebuilding path=%s error=%s", template_dir, e)
        return None


def _build_template(binaries: MariaDBBinaries, template_dir: Path) -> None:
    stamp = _template_stamp(binaries)
    if _read_stamp(template_dir) == stamp:
        return
    template_dir.parent.mkdir(parents=True, exist_ok=True)
    # Several processes (parallel test sessions) may share one template directory.
    with open(template_dir.with_name(template_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _read_stamp(template_dir) != stamp:
            _install_template(binaries, template_dir, stamp)


def _install_template(
    binaries: MariaDBBinaries, template_dir: Path, stamp: dict[str, object]
) -> None:
    started = time.monotonic()
    building = template_dir.with_name(template_dir.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    extra_sql = building.with_name(building.name + ".sql")
    extra_sql.write_text(_TRIM_USERS_SQL, encoding="utf-8")
    tmp_dir = building.with_name(building.name + ".tmp")
    tmp_dir.mkdir(exist_ok=True)
    try:
        done = subprocess.run(
            install_db_command(binaries, building, extra_sql, tmp_dir),
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise ClusterError(f"cannot run {binaries.install_db}: {e}") from e
    finally:
        extra_sql.unlink(missing_ok=True)
        shutil.rmtree(tmp_dir, ignore_errors=True)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()[-20:]
        raise ClusterError(
            f"{binaries.install_db} failed with exit code {done.returncode} for {building}:\n"
            + "\n".join(output)
        )
    (building / TEMPLATE_STAMP).write_text(json.dumps(stamp), encoding="utf-8")
    shutil.rmtree(template_dir, ignore_errors=True)
    building.rename(template_dir)
    logger.info(
        "initialised mariadb template data dir path=%s seconds=%.2f",
        template_dir,
        time.monotonic() - started,
        extra={"path": str(template_dir), "seconds": time.monotonic() - started},
    )


def _copy_template(template_dir: Path, data_dir: Path) -> bool:
    if data_dir.exists():
        return False
    filling = data_dir.with_name(data_dir.name + ".initialising")
    shutil.rmtree(filling, ignore_errors=True)
    filling.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template_dir, filling, symlinks=True)
    (filling / TEMPLATE_STAMP).unlink(missing_ok=True)
    filling.rename(data_dir)
    return True


async def ensure_template(binaries: MariaDBBinaries, template_dir: Path) -> None:
    """Create (or refresh, if the server version changed) the template data directory."""
    await asyncio.to_thread(_build_template, binaries, template_dir)


async def provision_data_dir(template_dir: Path, data_dir: Path) -> bool:
    """Give `data_dir` a fresh copy of the template unless it exists; True if it was created."""
    return await asyncio.to_thread(_copy_template, template_dir, data_dir)
