"""The shared keyspace-id vectors decoded from Vitess's own vindex tests.

/work's ``shared/vindex_vectors.json`` sits beside the repository (``../shared``); each
vector names its input's SQL type, and its expected keyspace id as hex or
``DestinationNone`` (maps to no shard).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

VECTORS_PATH = Path(__file__).resolve().parents[3] / "shared" / "vindex_vectors.json"


def load_vectors() -> dict[str, Any]:
    with VECTORS_PATH.open(encoding="utf-8") as fh:
        return json.load(fh)


def decode_input(vector: dict[str, Any]) -> object:
    """The Python value a SQL value of the vector's type arrives as."""
    kind, value = vector["input_type"], vector["input"]
    if kind == "NULL":
        return None
    if kind in ("Int64", "Uint64", "Int32"):
        return int(value)
    if kind == "Float64":
        return float(value)
    if kind == "VarChar":
        return str(value)
    if kind == "VarBinary":
        return str(value).encode("utf-8")
    raise ValueError(f"unknown vector input type {kind}")


def expected_keyspace_id(vector: dict[str, Any]) -> bytes | None:
    hexed = vector["keyspace_id_hex"]
    return None if hexed == "DestinationNone" else bytes.fromhex(hexed)


def vector_cases() -> list[tuple[str, dict[str, Any]]]:
    """(vindex type, vector) for every vector of every vindex in the file."""
    doc = load_vectors()
    return [
        (vtype, vector)
        for vtype, section in doc.items()
        if not vtype.startswith("_")
        for vector in section["vectors"]
    ]


def case_id(case: tuple[str, dict[str, Any]]) -> str:
    vtype, vector = case
    shown = vector["input_ascii"] if vector["input_ascii"] is not None else vector["input"]
    return f"{vtype}-{vector['input_type']}-{shown}"
