"""The manager's cache: Vitess's order, bounded size, duplicate no-op, in flight, discard."""

from __future__ import annotations

from proxy.messaging.cache import CachedMessage, MessageCache


def msg(i: int, priority: int = 50, time_next: int = 0) -> CachedMessage:
    return CachedMessage(id=str(i).encode(), priority=priority, time_next=time_next, epoch=0, row=(str(i).encode(),))


def ids(batch: list[CachedMessage]) -> list[bytes]:
    return [m.id for m in batch]


def test_lower_priority_value_pops_first_then_newest_time_next():
    c = MessageCache(10)
    for m in (msg(1, 50, 10), msg(2, 10, 5), msg(3, 50, 20), msg(4, 10, 7)):
        c.add(m)
    assert ids(c.pop(10)) == [b"4", b"2", b"3", b"1"]


def test_full_cache_rejects_add():
    c = MessageCache(1)
    assert c.add(msg(1))
    assert not c.add(msg(2))


def test_adding_a_queued_id_is_an_accepted_no_op():
    c = MessageCache(10)
    c.add(msg(1))
    assert c.add(msg(1))
    assert len(c) == 1


def test_popped_id_stays_in_flight_until_released():
    c = MessageCache(10)
    c.add(msg(1))
    c.pop(1)
    c.add(msg(1))
    assert len(c) == 0
    c.release([b"1"])
    c.add(msg(1))
    assert len(c) == 1


def test_pop_respects_limit():
    c = MessageCache(10)
    for i in range(5):
        c.add(msg(i))
    assert len(c.pop(2)) == 2
    assert len(c) == 3


def test_pop_with_filter_leaves_rejected_messages_queued():
    c = MessageCache(10)
    for i in range(4):
        c.add(msg(i))
    taken = c.pop(10, accept=lambda m: int(m.id) % 2 == 0)
    assert sorted(ids(taken)) == [b"0", b"2"]
    assert sorted(ids(c.pop(10))) == [b"1", b"3"]


def test_discard_drops_acked_ids_from_the_queue():
    c = MessageCache(10)
    for i in range(3):
        c.add(msg(i))
    assert c.discard([b"1", b"9"]) == 1
    assert sorted(ids(c.pop(10))) == [b"0", b"2"]


def test_adding_a_commits_messages_skips_known_in_flight_and_unacked_ids_and_keeps_vitess_order():
    c = MessageCache(10)
    c.add(msg(1, 50, 10))
    c.add(msg(2))
    c.pop(1)  # 1 goes (newest time_next first within a priority), 2 stays queued
    assert c.add_new([msg(1), msg(2), msg(3, 10, 5), msg(4, 50, 20), msg(5)], skip={b"5"})
    # 1 in flight, 2 already queued, 5 sent and not acked: only 3 and 4 were added.
    assert len(c) == 3
    assert ids(c.pop(10)) == [b"3", b"4", b"2"]


def test_adding_a_commits_messages_stops_when_the_cache_is_full():
    c = MessageCache(2)
    assert not c.add_new([msg(1), msg(2), msg(3)], skip=())
    assert ids(c.pop(10)) == [b"1", b"2"]
