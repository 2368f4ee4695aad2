"""SHOW [FULL] PROCESSLIST lists the proxy's client sessions."""

from __future__ import annotations

import uuid

from tests.proxy.sessions_support import query, run_in_thread, wait_for

_COLUMNS = ("Id", "User", "Host", "db", "Command", "Time", "State", "Info")


def _processlist(conn, full: bool = False) -> dict[int, dict[str, object]]:
    with conn.cursor() as c:
        c.execute("show full processlist" if full else "show processlist")
        assert tuple(d[0] for d in c.description) == _COLUMNS
        return {row[0]: dict(zip(_COLUMNS, row, strict=True)) for row in c.fetchall()}


def _client_address(conn) -> str:
    host, port = conn._sock.getsockname()[:2]
    return f"{host}:{port}"


def test_processlist_shows_connected_clients_with_their_fields(proxy) -> None:
    tag = f"pl_{uuid.uuid4().hex[:8]}"
    watcher, idle, busy = proxy.connect("commerce"), proxy.connect("lookup"), proxy.connect()
    try:
        running = f"select sleep(3) as `{tag}`"
        outcome = run_in_thread(busy, running)
        assert wait_for(lambda: _processlist(watcher).get(busy.thread_id(), {}).get("Command") == "Query")
        rows = _processlist(watcher)
        assert rows[idle.thread_id()] == {
            "Id": idle.thread_id(), "User": "root", "Host": _client_address(idle), "db": "lookup",
            "Command": "Sleep", "Time": rows[idle.thread_id()]["Time"], "State": "", "Info": None,
        }
        assert isinstance(rows[idle.thread_id()]["Time"], int) and rows[idle.thread_id()]["Time"] >= 0
        busy_row = rows[busy.thread_id()]
        assert (busy_row["User"], busy_row["Host"], busy_row["db"]) == ("root", _client_address(busy), None)
        assert (busy_row["Command"], busy_row["State"], busy_row["Info"]) == ("Query", "executing", running)
        me = rows[watcher.thread_id()]
        assert (me["db"], me["Command"], me["Info"]) == ("commerce", "Query", "show processlist")
        assert outcome.done.wait(10) and outcome.error is None
        # A client that leaves leaves the list.
        idle_id = idle.thread_id()
        idle.close()
        assert wait_for(lambda: idle_id not in _processlist(watcher))
    finally:
        for conn in (watcher, idle, busy):
            if conn.open:
                conn.close()


def test_processlist_time_counts_the_seconds_in_the_current_state(proxy) -> None:
    watcher, busy = proxy.connect(), proxy.connect()
    try:
        outcome = run_in_thread(busy, "select sleep(2.5)")
        assert wait_for(lambda: _processlist(watcher).get(busy.thread_id(), {}).get("Time", 0) >= 2, timeout=5)
        assert outcome.done.wait(10)
        assert _processlist(watcher)[busy.thread_id()]["Time"] <= 1  # idle since it ended
    finally:
        watcher.close()
        busy.close()


def test_show_processlist_truncates_statements_to_100_characters_and_full_shows_them_whole(proxy) -> None:
    watcher, busy = proxy.connect(), proxy.connect()
    try:
        running = "select sleep(3) as `" + "x" * 150 + "`"
        outcome = run_in_thread(busy, running)
        assert wait_for(lambda: _processlist(watcher).get(busy.thread_id(), {}).get("Command") == "Query")
        assert _processlist(watcher)[busy.thread_id()]["Info"] == running[:100]
        assert _processlist(watcher, full=True)[busy.thread_id()]["Info"] == running
        assert _processlist(watcher, full=True)[watcher.thread_id()]["Info"] == "show full processlist"
        assert outcome.done.wait(10)
    finally:
        watcher.close()
        busy.close()


def test_connection_ids_are_the_handshake_thread_ids_and_unique(proxy) -> None:
    conns = [proxy.connect() for _ in range(5)]
    try:
        ids = [c.thread_id() for c in conns]
        assert len(set(ids)) == 5 and all(i > 0 for i in ids)
        assert [query(c, "select connection_id()")[0][0] for c in conns] == ids
        assert query(conns[0], "select 1") == ((1,),)
        assert set(ids) <= set(_processlist(conns[0]))
    finally:
        for c in conns:
            c.close()
