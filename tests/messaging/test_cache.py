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


def test_a_commits_run_popped_in_parts_keeps_vitess_order_with_other_messages():
    c = MessageCache(100)
    c.add(msg(100, 50, 10))  # older: after the commit's newer time_next
    c.add(msg(200, 10, 1))  # a lower priority value: first
    assert c.add_new([msg(i, 50, 20) for i in range(1, 8)], skip=())
    c.add(msg(300, 50, 20))  # same priority and time_next, added after the commit: after its rows
    assert ids(c.pop(3)) == [b"200", b"1", b"2"]
    assert ids(c.pop(2)) == [b"3", b"4"]
    assert ids(c.pop(10)) == [b"5", b"6", b"7", b"300", b"100"]


def test_messages_of_a_run_acked_while_queued_are_not_popped_and_the_rest_keep_their_order():
    c = MessageCache(1000)
    assert c.add_new([msg(i) for i in range(200)], skip=())
    assert c.discard([str(i).encode() for i in range(0, 200, 2)]) == 100  # compacts the heap too
    c.add(msg(1000))
    assert ids(c.pop(3)) == [b"1", b"3", b"5"]
    assert c.discard([b"7", b"9"]) == 2
    assert ids(c.pop(1000)) == [str(i).encode() for i in range(11, 200, 2)] + [b"1000"]


def test_filtered_pop_inside_a_run_leaves_the_rejected_messages_in_their_places():
    c = MessageCache(100)
    assert c.add_new([msg(i) for i in range(1, 9)], skip=())
    assert ids(c.pop(2, accept=lambda m: int(m.id) % 3 == 0)) == [b"3", b"6"]
    assert ids(c.pop(3)) == [b"1", b"2", b"4"]
    assert ids(c.pop(10)) == [b"5", b"7", b"8"]


def test_a_message_queued_again_under_a_popped_id_is_not_taken_with_the_old_run():
    c = MessageCache(100)
    assert c.add_new([msg(1), msg(2)], skip=())
    c.discard([b"1"])
    newer = msg(1, 10, 0)  # polled again, with a new priority
    assert c.add(newer)
    taken = c.pop(10)
    assert ids(taken) == [b"1", b"2"] and taken[0] is newer
    assert len(c) == 0
