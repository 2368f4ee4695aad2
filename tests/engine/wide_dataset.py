"""The wider data set of the differential testers: tables sharded on other vindex types
and with the column types real schemas have, loaded next to ``items``.

- ``accounts`` (commerce): sharded on a VARCHAR primary key ``code`` by
  ``unicode_loose_md5`` (codes in mixed case, with accents and trailing spaces, so a
  routed equality must find 'ACC5' for 'acc5' as the general_ci collation does);
  DECIMAL(12,3) balances (negative too), DOUBLE rates, DATE and DATETIME columns,
  NULLs and empty strings.
- ``entries`` (commerce): sharded on a non-unique ``customer_id`` by ``xxhash``, with a
  ``consistent_lookup`` (non-unique) vindex on ``account_code`` whose rows live in
  ``lookup.entries_code_idx`` (written by the Insert primitive, as an application would;
  not unique on (code, keyspace id): two entries of one code on one shard are two rows).
- ``regions`` (commerce): a reference table (every shard holds all rows), one region no
  account has.

Rows are generated from a fixed seed; the oracle database gets the same rows.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

ACCOUNTS_DDL = """CREATE TABLE IF NOT EXISTS accounts (
  code VARCHAR(20) NOT NULL PRIMARY KEY,
  customer_id BIGINT,
  region VARCHAR(12),
  balance DECIMAL(12,3),
  rate DOUBLE,
  opened DATE,
  last_seen DATETIME
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

ENTRIES_DDL = """CREATE TABLE IF NOT EXISTS entries (
  id BIGINT NOT NULL PRIMARY KEY,
  customer_id BIGINT NOT NULL,
  account_code VARCHAR(20) NOT NULL,
  amount DECIMAL(10,2),
  kind VARCHAR(8),
  booked DATE,
  KEY entries_customer (customer_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

REGIONS_DDL = """CREATE TABLE IF NOT EXISTS regions (
  region VARCHAR(12) NOT NULL PRIMARY KEY,
  zone VARCHAR(10),
  tax DECIMAL(5,2)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

CODE_IDX_DDL = """CREATE TABLE IF NOT EXISTS entries_code_idx (
  account_code VARCHAR(20) NOT NULL,
  keyspace_id VARBINARY(10) NOT NULL,
  KEY entries_code (account_code)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""

N_ACCOUNTS = 240
N_ENTRIES = 900
CODE_PREFIXES = ["acc", "ACC", "Acc", "åcc", "Ácc"]
REGION_VALUES = ["north", "North", "NORTH ", "süd", "sud", "", None, "east", "West", "west  "]
KIND_VALUES = ["debit", "Debit", "credit", "", None, "fee ", "FEE"]
REGION_ROWS = [("north", "n", "19.00"), ("sud", "s", "7.50"), ("east", None, "0.00"), ("west", "w", None),
               ("nowhere", "x", "1.25")]


def account_code(i: int) -> str:
    """Account ``i``'s code as written in ``accounts`` (the case and accent vary with ``i``)."""
    return f"{CODE_PREFIXES[i % len(CODE_PREFIXES)]}{i}" + (" " if i % 11 == 0 else "")


def _lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, (date, datetime)):
        return f"'{v}'"
    return str(v)


def account_rows() -> list[str]:
    rnd = random.Random(20261124)
    out = []
    for i in range(1, N_ACCOUNTS + 1):
        balance = None if rnd.random() < 0.08 else Decimal(rnd.randint(-500000, 900000)) / 1000
        rate = None if rnd.random() < 0.1 else rnd.choice([0.1, 0.25, -1.5, 2.0, 0.001, 3.75, 0.0])
        opened = None if rnd.random() < 0.07 else date(2019, 1, 1) + timedelta(days=rnd.randint(0, 2190))
        seen = None if rnd.random() < 0.1 else datetime(2023, 1, 1) + timedelta(seconds=rnd.randint(0, 86400 * 500))
        row = (account_code(i), rnd.randint(1, 60), rnd.choice(REGION_VALUES), balance, rate, opened, seen)
        out.append("(" + ", ".join(_lit(v) for v in row) + ")")
    return out


def entry_rows() -> list[str]:
    rnd = random.Random(20261125)
    out = []
    for i in range(1, N_ENTRIES + 1):
        n = rnd.randint(1, N_ACCOUNTS + 20)  # some entries name no account
        code = account_code(n).strip()
        code = rnd.choice([code, code.upper(), code.lower()])
        amount = None if rnd.random() < 0.06 else Decimal(rnd.randint(-30000, 30000)) / 100
        booked = None if rnd.random() < 0.05 else date(2022, 1, 1) + timedelta(days=rnd.randint(0, 900))
        row = (i, rnd.randint(1, 60), code, amount, rnd.choice(KIND_VALUES), booked)
        out.append("(" + ", ".join(_lit(v) for v in row) + ")")
    return out


def add_to_vschema(docs: dict[str, Any]) -> None:
    """The wide tables in vschema documents keyed by keyspace (``{"commerce": doc, ...}``)."""
    com, lkp = docs["commerce"], docs["lookup"]
    com.setdefault("vindexes", {}).update({
        "code_loose_md5": {"type": "unicode_loose_md5"},
        "cust_xxhash": {"type": "xxhash"},
        "entries_code_lkp": {"type": "consistent_lookup", "owner": "entries",
                             "params": {"table": "lookup.entries_code_idx", "from": "account_code",
                                        "to": "keyspace_id"}},
    })
    com["tables"]["accounts"] = {"column_vindexes": [{"column": "code", "name": "code_loose_md5"}]}
    com["tables"]["entries"] = {"column_vindexes": [{"column": "customer_id", "name": "cust_xxhash"},
                                                    {"column": "account_code", "name": "entries_code_lkp"}]}
    com["tables"]["regions"] = {"type": "reference"}
    lkp["tables"]["entries_code_idx"] = {}


ShardRun = Callable[[str, str, str], Awaitable[Any]]  # keyspace, shard, sql
Run = Callable[[str], Awaitable[Any]]


async def load_wide(shard_run: ShardRun, commerce_shards: list[str], lookup_shard: str, through_proxy: Run,
                    oracle: Run) -> None:
    """Create the wide tables (empty) on the shards and in the oracle, then insert the rows
    through ``through_proxy`` (the planner + Insert primitive, which writes the lookup rows)
    and into the oracle."""
    for shard in commerce_shards:
        for ddl in (ACCOUNTS_DDL, ENTRIES_DDL, REGIONS_DDL):
            await shard_run("commerce", shard, ddl)
        for t in ("accounts", "entries", "regions"):
            await shard_run("commerce", shard, f"DELETE FROM {t}")
    await shard_run("lookup", lookup_shard, CODE_IDX_DDL)
    await shard_run("lookup", lookup_shard, "DELETE FROM entries_code_idx")
    for ddl in (ACCOUNTS_DDL, ENTRIES_DDL, REGIONS_DDL):
        await oracle(ddl)
    for t in ("accounts", "entries", "regions"):
        await oracle(f"DELETE FROM {t}")
    regions = "insert into regions (region, zone, tax) values " + ", ".join(
        "(" + ", ".join(_lit(v) for v in r) + ")" for r in REGION_ROWS)
    for shard in commerce_shards:  # a reference table: the same rows on every shard
        await shard_run("commerce", shard, regions)
    await oracle(regions)
    for table, cols, rows in (
        ("accounts", "code, customer_id, region, balance, rate, opened, last_seen", account_rows()),
        ("entries", "id, customer_id, account_code, amount, kind, booked", entry_rows()),
    ):
        for start in range(0, len(rows), 200):
            sql = f"insert into {table} ({cols}) values " + ", ".join(rows[start:start + 200])
            await through_proxy(sql)
            await oracle(sql)
