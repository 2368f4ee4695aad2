"""TPC-H data: DuckDB's dbgen (the `tpch` extension, shipped inside the PyPI package
`duckdb-extension-tpch`), split per shard by the project's own hash vindex.

``generate(sf, shards)`` writes, once per (scale factor, shard list), tab-separated files that
MariaDB's ``LOAD DATA`` reads with ``FIELDS TERMINATED BY '\\t' ESCAPED BY ''``:

    <cache>/tpch/sf<sf>-<shards>-v<N>/
        lineitem.-80.tsv  lineitem.80-.tsv  ...    sharded tables, one file per shard
        nation.tsv  region.tsv                     reference tables (every shard gets all rows)
        manifest.json                              row counts per file and per table

dbgen is deterministic (fixed seeds), so the files are the same on every machine; a finished
directory is reused (it appears by an atomic rename, so concurrent runs never see half of one).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from vschema.loader import load_keyspace, load_vschema_file

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VSCHEMA_PATH = HERE / "tpch_vschema.json"
SCHEMA_PATH = HERE / "schema.sql"
DEFAULT_CACHE = REPO / ".shardgate" / "tpch"
SHARDS = ("-80", "80-")
FORMAT_VERSION = 1

# Load order: small tables first; every table's rows are written in primary key order.
TABLES: dict[str, str] = {
    "region": "r_regionkey",
    "nation": "n_nationkey",
    "supplier": "s_suppkey",
    "customer": "c_custkey",
    "part": "p_partkey",
    "partsupp": "ps_partkey, ps_suppkey",
    "orders": "o_orderkey",
    "lineitem": "l_orderkey, l_linenumber",
}


@dataclass(frozen=True)
class Dataset:
    sf: float
    shards: tuple[str, ...]
    path: Path
    manifest: dict

    @property
    def row_counts(self) -> dict[str, int]:
        """Rows per table (all shards together)."""
        return {t: m["rows"] for t, m in self.manifest["tables"].items()}

    def is_reference(self, table: str) -> bool:
        return self.manifest["tables"][table]["reference"]

    def files(self, table: str, shard: str | None) -> list[Path]:
        """The file(s) holding `table`'s rows for `shard` (None: every row of the table)."""
        m = self.manifest["tables"][table]
        if m["reference"]:
            return [self.path / m["files"]["*"]["file"]]
        if shard is None:
            return [self.path / m["files"][s]["file"] for s in self.shards]
        return [self.path / m["files"][shard]["file"]]


def tpch_extension_path() -> Path:
    """The `tpch` extension binary inside the installed `duckdb-extension-tpch` wheel."""
    import duckdb
    import duckdb_extension_tpch

    root = Path(duckdb_extension_tpch.__file__).resolve().parent / "extensions"
    wanted = root / f"v{duckdb.__version__}" / "tpch.duckdb_extension"
    if wanted.is_file():
        return wanted
    found = sorted(root.rglob("tpch.duckdb_extension"))
    if not found:
        raise RuntimeError(f"no tpch.duckdb_extension under {root}: is duckdb-extension-tpch installed?")
    raise RuntimeError(
        f"duckdb {duckdb.__version__} but duckdb-extension-tpch ships {[p.parent.name for p in found]}: "
        "install matching versions (see pyproject.toml)"
    )


def _sf_name(sf: float) -> str:
    return f"{sf:g}"


def generate(sf: float, shards: tuple[str, ...] = SHARDS, cache: Path | None = None) -> Dataset:
    """The TPC-H data at scale factor `sf`, split over `shards`, generated once and cached."""
    cache = Path(os.environ.get("SHARDGATE_TPCH_CACHE", cache or DEFAULT_CACHE))
    final = cache / f"sf{_sf_name(sf)}-{'_'.join(shards)}-v{FORMAT_VERSION}"
    manifest_path = final / "manifest.json"
    if not manifest_path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=cache))
        try:
            _write(sf, shards, tmp)
            try:
                tmp.rename(final)
            except OSError:
                if not manifest_path.is_file():  # lost a race to a complete copy: fine
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    manifest = json.loads(manifest_path.read_text())
    return Dataset(sf=sf, shards=tuple(shards), path=final, manifest=manifest)


def _shard_of_keys(keys: list[int], table: str, shards: tuple[str, ...]) -> list[str]:
    """Each key's shard, by the table's primary vindex in the tpch vschema."""
    ks = load_keyspace("tpch", load_vschema_file(VSCHEMA_PATH), list(shards))
    vindex = ks.table(table).primary_vindex.vindex
    return [ks.shard_for(ksid) for ksid in vindex.map(keys)]


def _write(sf: float, shards: tuple[str, ...], out: Path) -> None:
    import duckdb

    started = time.monotonic()
    con = duckdb.connect()
    con.execute(f"LOAD '{tpch_extension_path()}'")
    con.execute(f"CALL dbgen(sf={sf!r})")
    vschema = load_vschema_file(VSCHEMA_PATH)
    tables: dict[str, dict] = {}
    for table, pk in TABLES.items():
        tdoc = vschema["tables"][table]
        if tdoc.get("type") == "reference":
            name = f"{table}.tsv"
            rows = _copy(con, f"select * from {table} order by {pk}", out / name)
            tables[table] = {"reference": True, "rows": rows, "files": {"*": {"file": name, "rows": rows}}}
            continue
        column = tdoc["column_vindexes"][0]["column"]
        keys = [k for (k,) in con.execute(f"select distinct {column} from {table} order by 1").fetchall()]
        mapping = out / f".{table}.map.tsv"
        with mapping.open("w") as f:
            for key, shard in zip(keys, _shard_of_keys(keys, table, shards), strict=True):
                f.write(f"{key}\t{shard}\n")
        con.execute(
            f"create temp table map_{table} as select * from read_csv('{mapping}', delim='\t', header=false, "
            "columns={'k': 'BIGINT', 's': 'VARCHAR'})"
        )
        mapping.unlink()
        files = {}
        for shard in shards:
            name = f"{table}.{shard}.tsv"
            rows = _copy(
                con,
                f"select t.* from {table} t semi join map_{table} m on t.{column} = m.k and m.s = '{shard}' "
                f"order by {pk}",
                out / name,
            )
            files[shard] = {"file": name, "rows": rows}
        tables[table] = {"reference": False, "rows": sum(f["rows"] for f in files.values()), "files": files,
                         "column": column}
    con.close()
    manifest = {"sf": sf, "shards": list(shards), "format": FORMAT_VERSION, "tables": tables,
                "seconds": round(time.monotonic() - started, 3)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _copy(con, select: str, path: Path) -> int:
    """Write `select`'s rows to `path` as LOAD DATA reads them; returns the row count."""
    # TPC-H text has no tab, newline, backslash or quote; refuse quietly wrong files anyway.
    con.execute(f"copy ({select}) to '{path}' (format csv, delimiter '\t', header false, quote '', escape '')")
    rows = con.execute(f"select count(*) from ({select})").fetchone()[0]
    with path.open("rb") as f:
        lines = sum(buf.count(b"\n") for buf in iter(lambda: f.read(1 << 20), b""))
    if lines != rows:
        raise RuntimeError(f"{path.name}: {lines} lines for {rows} rows (a value holds a tab or newline?)")
    return rows
