"""Binlog positions: a shard's MariaDB GTID position and the multi-shard VGTID.

A MariaDB GTID is ``domain-server-seq``; a shard's *position* is the last GTID committed
in each replication domain (``"11-11-7,0-1-3"``), which is exactly what
``@@gtid_binlog_pos`` reports and what ``@slave_connect_state`` accepts. Resuming from a
position is exclusive: the server sends what comes after it.

A VGTID is the position of every streamed shard, serialised the way Vitess/Debezium
store it: ``[{"keyspace": "ks", "shard": "-80", "gtid": "11-11-7"}]``. Gtid strings are
plain MariaDB positions; a Vitess-style ``"MariaDB/"`` flavor prefix is accepted on input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from proxy.cdc.errors import InvalidPositionError

MARIADB_FLAVOR_PREFIX = "MariaDB/"

# Special gtid values a caller may put in a VGTID entry instead of a real position.
GTID_CURRENT = "current"
GTID_BEGINNING = "beginning"
# A stream start (not a VGTID entry): copy the tables first, then stream from that copy.
GTID_SNAPSHOT = "snapshot"


@dataclass(frozen=True, slots=True, order=True)
class Gtid:
    """One MariaDB transaction id."""

    domain: int
    server: int
    seq: int

    @classmethod
    def parse(cls, text: str) -> Gtid:
        parts = text.strip().split("-")
        if len(parts) != 3:
            raise InvalidPositionError(f"not a MariaDB GTID (domain-server-seq): {text!r}")
        try:
            domain, server, seq = (int(p) for p in parts)
        except ValueError:
            raise InvalidPositionError(
                f"not a MariaDB GTID (domain-server-seq): {text!r}"
            ) from None
        return cls(domain, server, seq)

    def __str__(self) -> str:
        return f"{self.domain}-{self.server}-{self.seq}"

    def __reduce__(self) -> tuple:
        # Positions cross from the decoder processes with every transaction; the
        # dataclass's own pickle support (for frozen slots) looks its fields up each time.
        return (Gtid, (self.domain, self.server, self.seq))


class GtidPosition:
    """The last committed GTID per domain of one shard; immutable.

    Built once per transaction on the hot path, so the text form is computed lazily.
    """

    __slots__ = ("_by_domain", "_text")

    def __init__(self, gtids: Iterable[Gtid] = ()) -> None:
        self._by_domain: dict[int, Gtid] = {gtid.domain: gtid for gtid in gtids}
        self._text: str | None = None

    @classmethod
    def _of(cls, by_domain: dict[int, Gtid]) -> GtidPosition:
        position = cls.__new__(cls)
        position._by_domain = by_domain
        position._text = None
        return position

    @classmethod
    def parse(cls, text: str) -> GtidPosition:
        text = text.strip()
        if text.startswith(MARIADB_FLAVOR_PREFIX):
            text = text[len(MARIADB_FLAVOR_PREFIX) :]
        if not text:
            return cls()
        return cls(Gtid.parse(part) for part in text.split(",") if part.strip())

    def __reduce__(self) -> tuple:
        return (GtidPosition, (tuple(self._by_domain.values()),))

    def __str__(self) -> str:
        text = self._text
        if text is None:
            by_domain = self._by_domain
            text = self._text = ",".join(str(by_domain[d]) for d in sorted(by_domain))
        return text

    def __repr__(self) -> str:
        return f"GtidPosition({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidPosition) and self._by_domain == other._by_domain

    def __hash__(self) -> int:
        return hash(str(self))

    def __bool__(self) -> bool:
        return bool(self._by_domain)

    def __iter__(self) -> Iterator[Gtid]:
        return iter(self._by_domain.values())

    def includes(self, gtid: Gtid) -> bool:
        """True if ``gtid`` is at or before this position (already delivered)."""
        last = self._by_domain.get(gtid.domain)
        return last is not None and gtid.seq <= last.seq

    def advanced_to(self, gtid: Gtid) -> GtidPosition:
        """The position after committing ``gtid``."""
        by_domain = self._by_domain.copy()
        by_domain[gtid.domain] = gtid
        return GtidPosition._of(by_domain)


@dataclass(frozen=True, slots=True)
class ShardGtid:
    """One shard's entry in a VGTID. ``gtid`` may also be ``current``/``beginning``."""

    keyspace: str
    shard: str
    gtid: str

    def to_json_obj(self) -> dict[str, str]:
        return {"keyspace": self.keyspace, "shard": self.shard, "gtid": self.gtid}


class Vgtid:
    """The position of every shard of a stream; immutable, JSON-serialisable.

    One is made per delivered transaction, so a VGTID made from positions keeps them and
    builds its entries only when asked.
    """

    __slots__ = ("_positions", "_shard_gtids")

    def __init__(self, shard_gtids: Iterable[ShardGtid]) -> None:
        self._shard_gtids: tuple[ShardGtid, ...] | None = tuple(shard_gtids)
        self._positions: dict[tuple[str, str], GtidPosition] | None = None

    @classmethod
    def from_positions(cls, positions: Mapping[tuple[str, str], GtidPosition]) -> Vgtid:
        vgtid = cls.__new__(cls)
        vgtid._shard_gtids = None
        vgtid._positions = dict(positions)
        return vgtid

    @property
    def shard_gtids(self) -> tuple[ShardGtid, ...]:
        entries = self._shard_gtids
        if entries is None:
            assert self._positions is not None
            entries = self._shard_gtids = tuple(
                ShardGtid(ks, shard, str(pos)) for (ks, shard), pos in self._positions.items()
            )
        return entries

    @classmethod
    def from_json(cls, text: str | list | dict) -> Vgtid:
        """Parse our/Debezium's list form, or Vitess's ``{"shard_gtids": [...]}`` form."""
        try:
            data = json.loads(text) if isinstance(text, str) else text
        except json.JSONDecodeError as exc:
            raise InvalidPositionError(f"VGTID is not valid JSON: {exc}") from exc
        if isinstance(data, dict):
            data = data.get("shard_gtids")
        if not isinstance(data, list) or not data:
            raise InvalidPositionError(
                'a VGTID is a non-empty JSON list of {"keyspace", "shard", "gtid"}'
            )
        entries = []
        for item in data:
            if not isinstance(item, dict) or "keyspace" not in item or "gtid" not in item:
                raise InvalidPositionError(f"bad VGTID entry: {item!r}")
            if item.get("table_p_ks"):
                raise InvalidPositionError(
                    "VGTID entries with table_p_ks (a table copy in progress) are not supported"
                )
            entries.append(
                ShardGtid(str(item["keyspace"]), str(item.get("shard", "")), str(item["gtid"]))
            )
        return cls(entries)

    def to_json_obj(self) -> list[dict[str, str]]:
        return [sg.to_json_obj() for sg in self.shard_gtids]

    def to_json(self) -> str:
        return json.dumps(self.to_json_obj(), separators=(",", ":"))

    def position_of(self, keyspace: str, shard: str) -> str | None:
        if self._positions is not None:
            position = self._positions.get((keyspace, shard))
            return None if position is None else str(position)
        for sg in self.shard_gtids:
            if sg.keyspace == keyspace and sg.shard == shard:
                return sg.gtid
        return None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vgtid) and self.shard_gtids == other.shard_gtids

    def __hash__(self) -> int:
        return hash(self.shard_gtids)

    def __repr__(self) -> str:
        return f"Vgtid({self.to_json()})"
