"""Locating the MariaDB server binaries the local cluster runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from proxy.cluster.errors import ClusterError, MariaDBNotInstalled

# mariadbd lives in /usr/sbin on Debian, which is not on an ordinary user's PATH.
_EXTRA_DIRS = ("/usr/sbin", "/usr/local/sbin", "/usr/local/mysql/bin")
DEBIAN_PACKAGE = "mariadb-server"


@dataclass(frozen=True, slots=True)
class MariaDBBinaries:
    mariadbd: Path
    install_db: Path

    def version(self) -> str:
        """`mariadbd --version`, e.g. 'mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for ...'."""
        try:
            done = subprocess.run(
                [str(self.mariadbd), "--no-defaults", "--version"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise ClusterError(f"cannot run {self.mariadbd} --version: {e}") from e
        return done.stdout.strip()


def find_mariadb_binaries(search_path: str | None = None) -> MariaDBBinaries:
    """Find `mariadbd` and `mariadb-install-db`.

    `search_path` is a PATH-style list of directories; by default $PATH plus the sbin directories.
    Raises MariaDBNotInstalled naming the Debian package when either is missing.
    """
    if search_path is None:
        dirs = os.environ.get("PATH", "").split(os.pathsep) + list(_EXTRA_DIRS)
        search_path = os.pathsep.join(d for d in dirs if d)
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in ("mariadbd", "mariadb-install-db"):
        located = shutil.which(name, path=search_path)
        if located is None:
            missing.append(name)
        else:
            found[name] = Path(located)
    if missing:
        raise MariaDBNotInstalled(
            f"{' and '.join(missing)} not found (searched {search_path or '<empty path>'}); "
            f"install the MariaDB server, e.g. `apt-get install {DEBIAN_PACKAGE}` on Debian/Ubuntu"
        )
    return MariaDBBinaries(mariadbd=found["mariadbd"], install_db=found["mariadb-install-db"])
