"""The next send time after a send: now + ack_wait + clamp(min_backoff * 2^epoch * jitter)."""

from __future__ import annotations

from proxy.messaging.backoff import NS, backoff_ns, next_send_ns
from proxy.messaging.table import parse_message_table

COLUMNS = ["id", "priority", "epoch", "time_next", "time_acked", "message"]


def spec(extra: str = ""):
    return parse_message_table(
        "t", "vitess_message,vt_ack_wait=1,vt_purge_after=3,vt_batch_size=2,vt_cache_size=10,vt_poller_interval=1" + extra, COLUMNS
    )


def test_backoff_doubles_with_each_epoch():
    s = spec()
    assert [backoff_ns(s, e, 1.0) // NS for e in range(4)] == [1, 2, 4, 8]


def test_backoff_is_never_below_min_backoff():
    assert backoff_ns(spec(), 0, 0.7) == 1 * NS


def test_backoff_is_capped_by_max_backoff():
    assert backoff_ns(spec(",vt_min_backoff=1,vt_max_backoff=4"), 5, 1.3) == 4 * NS


def test_huge_epoch_saturates_instead_of_wrapping():
    assert backoff_ns(spec(",vt_max_backoff=60"), 200, 1.0) == 60 * NS


def test_next_send_adds_ack_wait_to_backoff():
    assert next_send_ns(spec(), 100, 1, 1.0) == 100 + 1 * NS + 2 * NS


def test_send_number_max_attempts_parks_the_message():
    s = spec(",vt_max_attempts=2")
    assert next_send_ns(s, 0, 0, 1.0) is not None
    assert next_send_ns(s, 0, 1, 1.0) is None
