"""The figures of a scrape as plain data: what ``/debug/vars`` returns as JSON and what the
status page and the QPS history read (the same numbers ``/metrics`` shows)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Family:
    name: str
    type: str
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "help": self.help,
            "samples": [{"name": n, "labels": labels, "value": _json_number(v)} for n, labels, v in self.samples],
        }


def _json_number(v: float) -> float | str:
    return v if math.isfinite(v) else str(v)  # JSON has no inf/nan


class Figures:
    """Metric families by name (``shardgate_queries``, ...), from one registry collection."""

    def __init__(self, families: Iterable[Any]) -> None:
        self.families: dict[str, Family] = {}
        for metric in families:
            fam = Family(metric.name, metric.type, metric.documentation)
            fam.samples = [(s.name, dict(s.labels), float(s.value)) for s in metric.samples]
            self.families[metric.name] = fam

    @classmethod
    def collect(cls, registry: Any) -> Figures:
        return cls(registry.collect())

    def as_json(self) -> dict[str, Any]:
        return {name: fam.as_json() for name, fam in sorted(self.families.items())}

    def samples(self, family: str, sample: str | None = None) -> list[tuple[dict[str, str], float]]:
        """The samples of a family (``sample``: only those of that name, e.g. ``x_total``, ``x_bucket``)."""
        fam = self.families.get(family)
        if fam is None:
            return []
        return [(labels, v) for name, labels, v in fam.samples if sample is None or name == sample]

    def total(self, family: str, sample: str | None = None, **match: str) -> float:
        """The sum of a family's samples whose labels include ``match``."""
        return sum(
            v for labels, v in self.samples(family, sample)
            if all(labels.get(k) == want for k, want in match.items())
        )

    def by(self, family: str, sample: str | None, *keys: str) -> dict[tuple[str, ...], float]:
        """Samples summed by the values of labels ``keys``."""
        out: dict[tuple[str, ...], float] = {}
        for labels, v in self.samples(family, sample):
            k = tuple(labels.get(key, "") for key in keys)
            out[k] = out.get(k, 0.0) + v
        return out

    def histogram_buckets(self, family: str) -> list[tuple[float, float]]:
        """A histogram's cumulative buckets (upper bound, count), summed over its labels."""
        counts: dict[float, float] = {}
        for labels, v in self.samples(family, family + "_bucket"):
            le = float(labels["le"])
            counts[le] = counts.get(le, 0.0) + v
        return sorted(counts.items())


def quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """A quantile estimated from cumulative histogram buckets, as Prometheus'
    ``histogram_quantile`` does (linear inside the bucket); None without observations."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound
