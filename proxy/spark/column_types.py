"""MySQL/MariaDB column types -> Spark and Arrow types, exactly.

The column list comes from `SHOW FULL COLUMNS` (the shard's own definition), not from result-set
metadata, because the definition says what the wire cannot: DECIMAL precision, UNSIGNED, JSON
(MariaDB stores it as LONGTEXT with a json_valid check, so it reads as a string either way).

    DECIMAL(p,s)        DecimalType(p,s)        (p > 38: StringType, Spark has no wider decimal)
    DATETIME            TimestampNTZType        (wall-clock time, no zone, as stored)
    TIMESTAMP           TimestampType           (an instant; read in UTC)
    DATE                DateType
    JSON/TEXT/CHAR/ENUM StringType
    BLOB/BINARY/BIT     BinaryType
    TIME                StringType              ("-838:59:59" does not fit a Spark type)
    BIGINT UNSIGNED     DecimalType(20,0)       (as Spark's JDBC reader does)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

_TYPE = re.compile(r"^(?P<base>[a-z]+)(?:\((?P<args>[^)]*)\))?(?P<rest>.*)$", re.I)

# Arrow types by kind; the Spark type is derived from the Arrow one (see spark_type).
_INTEGER_TYPES: dict[str, tuple[pa.DataType, pa.DataType]] = {
    # base: (signed, unsigned)
    "tinyint": (pa.int8(), pa.int16()),
    "smallint": (pa.int16(), pa.int32()),
    "mediumint": (pa.int32(), pa.int32()),
    "int": (pa.int32(), pa.int64()),
    "integer": (pa.int32(), pa.int64()),
    "bigint": (pa.int64(), pa.decimal128(20, 0)),
    "year": (pa.int16(), pa.int16()),
}
_STRING_BASES = {
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json", "enum", "set",
    "time", "uuid", "inet4", "inet6",
}
_BINARY_BASES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit", "geometry"}


class UnsupportedColumnType(ValueError):
    pass


@dataclass(frozen=True)
class ColumnSpec:
    """One table column: its name, declared MySQL type, nullability and Arrow type."""

    name: str
    mysql_type: str
    nullable: bool
    arrow_type: pa.DataType

    @property
    def is_binary(self) -> bool:
        return pa.types.is_binary(self.arrow_type)


def arrow_type_of(mysql_type: str) -> pa.DataType:
    """The Arrow type a column declared as `mysql_type` (SHOW COLUMNS' Type) reads as."""
    m = _TYPE.match(mysql_type.strip().lower())
    if not m:
        raise UnsupportedColumnType(f"cannot parse column type {mysql_type!r}")
    base, args, rest = m.group("base"), m.group("args"), m.group("rest")
    unsigned = "unsigned" in rest
    if base in _INTEGER_TYPES:
        if base == "tinyint" and args == "1" and not unsigned:
            # TINYINT(1) is MySQL's BOOLEAN, but it can hold -128..127: keep the number.
            return pa.int8()
        signed_type, unsigned_type = _INTEGER_TYPES[base]
        return unsigned_type if unsigned else signed_type
    if base in ("decimal", "numeric", "dec", "fixed"):
        precision, _, scale = (args or "10,0").partition(",")
        p, s = int(precision), int(scale or 0)
        return pa.decimal128(p, s) if p <= 38 else pa.string()
    if base == "float":
        return pa.float32()
    if base in ("double", "real"):
        return pa.float64()
    if base == "date":
        return pa.date32()
    if base == "datetime":
        return pa.timestamp("us")
    if base == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if base in _STRING_BASES:
        return pa.string()
    if base in _BINARY_BASES:
        return pa.binary()
    raise UnsupportedColumnType(f"no Spark type for column type {mysql_type!r}")


def column_spec(show_columns_row: tuple[Any, ...]) -> ColumnSpec:
    """From a `SHOW FULL COLUMNS` row: Field, Type, Collation, Null, Key, Default, ..."""
    name, mysql_type, _collation, null = (_text(v) for v in show_columns_row[:4])
    return ColumnSpec(name=name, mysql_type=mysql_type, nullable=null == "YES", arrow_type=arrow_type_of(mysql_type))


def spark_type(arrow_type: pa.DataType) -> Any:
    """The Spark SQL type that an Arrow column of `arrow_type` carries."""
    from pyspark.sql import types as T

    if pa.types.is_int8(arrow_type):
        return T.ByteType()
    if pa.types.is_int16(arrow_type):
        return T.ShortType()
    if pa.types.is_int32(arrow_type):
        return T.IntegerType()
    if pa.types.is_int64(arrow_type):
        return T.LongType()
    if pa.types.is_decimal(arrow_type):
        return T.DecimalType(arrow_type.precision, arrow_type.scale)
    if pa.types.is_float32(arrow_type):
        return T.FloatType()
    if pa.types.is_float64(arrow_type):
        return T.DoubleType()
    if pa.types.is_date32(arrow_type):
        return T.DateType()
    if pa.types.is_timestamp(arrow_type):
        return T.TimestampType() if arrow_type.tz else T.TimestampNTZType()
    if pa.types.is_string(arrow_type):
        return T.StringType()
    if pa.types.is_binary(arrow_type):
        return T.BinaryType()
    raise UnsupportedColumnType(f"no Spark type for Arrow type {arrow_type}")


def spark_schema(columns: list[ColumnSpec]) -> Any:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(c.name, spark_type(c.arrow_type), c.nullable) for c in columns])


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
