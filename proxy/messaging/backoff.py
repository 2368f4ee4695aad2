"""When a sent message becomes due again (Vitess's postpone formula) or is parked."""

from __future__ import annotations

import random

from proxy.messaging.table import MessageTableSpec

NS = 1_000_000_000
JITTER_LOW = 0.666666
JITTER_SPAN = 0.666666


def jitter() -> float:
    """Uniform in [0.666, 1.333), as Vitess's postpone."""
    return JITTER_LOW + random.random() * JITTER_SPAN


def backoff_ns(spec: MessageTableSpec, epoch: int, jitter_factor: float) -> int:
    """clamp(min_backoff * 2^epoch * jitter, min_backoff, max_backoff), in nanoseconds.

    Computed with Python integers so a large epoch saturates at the cap instead of wrapping
    around as a 64-bit shift would."""
    min_ns = int(spec.min_backoff * NS)
    raw = int((min_ns << min(epoch, 62)) * jitter_factor)
    value = max(raw, min_ns)
    if spec.max_backoff > 0:
        value = min(value, int(spec.max_backoff * NS))
    return value


def next_send_ns(spec: MessageTableSpec, now_ns: int, epoch: int, jitter_factor: float) -> int | None:
    """The ``time_next`` a postpone writes for a message sent with ``epoch`` (before increment).

    ``None`` parks the message: the send about to happen is its ``vt_max_attempts``-th."""
    if spec.max_attempts > 0 and epoch + 1 >= spec.max_attempts:
        return None
    return now_ns + int(spec.ack_wait * NS) + backoff_ns(spec, epoch, jitter_factor)
