"""MySQL column types (as SHOW COLUMNS prints them) -> the Arrow/Spark types the data source reads."""

from __future__ import annotations

import pyarrow as pa
import pytest

from proxy.spark.column_types import UnsupportedColumnType, arrow_type_of
from proxy.spark.options import OptionError, ProxyAddress, SourceOptions


@pytest.mark.parametrize(
    ("mysql_type", "arrow_type"),
    [
        ("tinyint(4)", pa.int8()),
        ("tinyint(1)", pa.int8()),
        ("tinyint(3) unsigned", pa.int16()),
        ("smallint(6)", pa.int16()),
        ("mediumint(9) unsigned", pa.int32()),
        ("int(11)", pa.int32()),
        ("int(10) unsigned", pa.int64()),
        ("bigint(20)", pa.int64()),
        ("bigint(20) unsigned", pa.decimal128(20, 0)),
        ("decimal(10,2)", pa.decimal128(10, 2)),
        ("decimal(65,30)", pa.string()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("date", pa.date32()),
        ("datetime(6)", pa.timestamp("us")),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("longtext", pa.string()),
        ("json", pa.string()),
        ("varchar(64)", pa.string()),
        ("enum('a','b')", pa.string()),
        ("time", pa.string()),
        ("blob", pa.binary()),
        ("varbinary(128)", pa.binary()),
        ("bit(8)", pa.binary()),
    ],
)
def test_column_type_maps_to(mysql_type: str, arrow_type: pa.DataType) -> None:
    assert arrow_type_of(mysql_type) == arrow_type


def test_unknown_column_type_is_refused() -> None:
    with pytest.raises(UnsupportedColumnType):
        arrow_type_of("vector(3)")


def test_url_gives_host_port_and_credentials() -> None:
    assert ProxyAddress.parse("mysql://app:s%40cret@10.0.0.1:3306") == ProxyAddress("10.0.0.1", 3306, "app", "s@cret")


def test_table_option_must_name_its_keyspace() -> None:
    with pytest.raises(OptionError):
        SourceOptions.parse({"table": "customer"})
