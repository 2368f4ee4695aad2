"""The SparkSession settings every Spark test, job and benchmark shares."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

MARIADB_JDBC_JAR = Path("/usr/share/java/mariadb-java-client.jar")


def spark_session_builder(app_name: str, master: str = "local[2]") -> Any:
    """local[2], the Debian MariaDB JDBC jar, no UI, 2 shuffle partitions, UTC."""
    from pyspark.sql import SparkSession

    # Python workers (where the data source runs) must use this interpreter and its packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", str(MARIADB_JDBC_JAR))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
    )
