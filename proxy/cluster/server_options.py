"""The command lines of `mariadbd` and `mariadb-install-db` for one local shard.

`--no-defaults` keeps the machine's own /etc/mysql configuration (and its system server on 3306)
out of the picture, so every setting a shard depends on is spelled out here.
"""

from __future__ import annotations

import os
from pathlib import Path

from proxy.cluster.binaries import MariaDBBinaries
from proxy.cluster.layout import LOCAL_HOST, TMP_DIRNAME, LocalShardSpec

# Several instances share a 2-core machine: keep memory and background work small. The same
# InnoDB sizing is used to initialise data dirs so the server never resizes the redo log at start.
INNODB_OPTIONS = (
    "--innodb-buffer-pool-size=64M",
    "--innodb-log-file-size=32M",
    "--innodb-log-buffer-size=8M",
)


def _run_as_options() -> list[str]:
    # mariadbd refuses to run as root unless told to; as another user --user is pointless.
    return ["--user=root"] if os.geteuid() == 0 else []


def install_db_command(
    binaries: MariaDBBinaries, data_dir: Path, extra_sql: Path, tmp_dir: Path
) -> list[str]:
    return [
        str(binaries.install_db),
        "--no-defaults",
        *_run_as_options(),
        f"--datadir={data_dir}",
        # root gets an empty mysql_native_password (not unix_socket), for TCP logins.
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        "--skip-name-resolve",
        f"--extra-file={extra_sql}",
        # Passed through to the bootstrap server; see the --tmpdir note in mariadbd_command.
        f"--tmpdir={tmp_dir}",
        *INNODB_OPTIONS,
    ]


def mariadbd_command(binaries: MariaDBBinaries, spec: LocalShardSpec) -> list[str]:
    return [
        str(binaries.mariadbd),
        "--no-defaults",
        *_run_as_options(),
        f"--datadir={spec.data_dir}",
        f"--port={spec.port}",
        f"--bind-address={LOCAL_HOST}",
        f"--socket={spec.socket_path}",
        f"--pid-file={spec.pid_file}",
        f"--log-error={spec.error_log}",
        # A private tmpdir: at start-up mariadbd deletes every `#sql*` file in its tmpdir, so a
        # shared /tmp lets one starting server destroy the temporary tables of another (the
        # machine's own MariaDB, a concurrent mariadb-install-db, another shard).
        f"--tmpdir={spec.tmp_dir}",
        f"--ignore-db-dirs={TMP_DIRNAME}",
        "--skip-name-resolve",
        # Binlog as CDC needs it (issue 5): row events with full images and column names, a
        # GTID domain per shard so one position can hold every shard.
        f"--server-id={spec.server_id}",
        f"--gtid-domain-id={spec.gtid_domain_id}",
        # Relative names live in the data dir and are listed relatively in the index, so a data
        # dir still works after it is moved (e.g. the checkout is renamed).
        f"--log-bin={spec.binlog_basename.name}",
        f"--log-bin-index={spec.binlog_basename.name}.index",
        "--binlog-format=ROW",
        "--binlog-row-image=FULL",
        "--binlog-row-metadata=FULL",
        "--log-slave-updates=ON",
        # A killed mariadbd loses nothing with these (the OS still holds the writes); only a
        # machine crash could, which a local development cluster accepts for the speed.
        "--innodb-flush-log-at-trx-commit=2",
        "--sync-binlog=0",
        *INNODB_OPTIONS,
        "--performance-schema=OFF",
        "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_general_ci",
        "--max-connections=1000",
        "--table-open-cache=1000",
        "--open-files-limit=16384",
    ]
