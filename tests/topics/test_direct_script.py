"""The text of a direct publish (proxy/topics/direct.py), without a shard: which INSERTs are
rewritten, where each row's ids go, and what keeps the deferred path."""

from __future__ import annotations

import pytest

from proxy.topics import direct
from proxy.topics.store import ShardTopicStore
from sqltext.quoting import bytes_literal

HEAD = "INSERT INTO `_tms_t`"


def _script(rest: str) -> tuple[str, int] | None:
    """The script of one publisher's INSERT, and its rows; None: the deferred path."""
    ins = direct.read_direct(f"{HEAD} {rest}", len("INSERT INTO "), len(HEAD), "t")
    return None if ins is None else (direct.publish_script((ins,)), ins.rows)


def test_each_row_gets_the_id_columns_before_its_closing_parenthesis_whatever_its_strings_hold():
    built = _script(
        """(payload, n) VALUES ('a)(b''c', 1), (CONCAT('x', ')'), (2)) ,( "q\\")", -3)"""
    )
    assert built is not None
    script, rows = built
    assert rows == 3
    statements = script.split(";")
    assert len(statements) == direct.RESULTS
    insert = statements[direct.ANSWER]

    def ids(i: int) -> str:  # row i's position as a literal: no row reads another's assignment
        return f", @_sg_p + {i}, @_sg_ms"

    assert insert == (
        f"{HEAD} (payload, n, seq, publish_time) VALUES ('a)(b''c', 1{ids(0)}),"
        f""" (CONCAT('x', ')'), (2){ids(1)}) ,( "q\\")", -3{ids(2)})"""
    )
    assert ":=" not in script
    assert "messages = messages + 3" in statements[direct.MARKED]


@pytest.mark.parametrize(
    "rest",
    [
        "(payload) VALUES ('a') ON DUPLICATE KEY UPDATE payload = 'b'",
        "(payload) VALUES ('a') AS new",
        "(payload) VALUES ('a') /* a comment */",
        "(payload) VALUES ('a' -- a comment\n)",
        "(payload) VALUES ('a'), ('b",
        "(payload) VALUES ('a'),",
        "(payload) VALUES ('a') ('b')",
        "(payload, publish_time) VALUES ('a', 1)",
        "(payload) SELECT 'a'",
        "VALUES ('a')",
        "(payload) VALUES ('a'); DROP TABLE x",
    ],
)
def test_what_is_not_rewritten_exactly_keeps_the_deferred_path(rest):
    assert _script(rest) is None


def test_insert_ignore_and_priorities_keep_the_deferred_path():
    for verb in ("INSERT IGNORE INTO", "INSERT LOW_PRIORITY INTO", "INSERT"):
        sql = f"{verb} `_tms_t` (payload) VALUES ('a')"
        start = sql.index("`")
        assert direct.read_direct(sql, start, start + len("`_tms_t`"), "t") is None, verb


def test_a_script_beyond_one_packet_keeps_the_deferred_path():
    rows = ",".join(["('" + "y" * 250 + "')"] * 60000)  # 15 MB, and ~4 MB of ids
    assert _script(f"(payload) VALUES {rows}") is None
    assert _script("(payload) VALUES ('" + "y" * 5_000_000 + "')") is not None


def test_a_batch_script_gives_each_insert_its_own_statement_and_the_next_positions():
    """Several publishers' INSERTs in one script (proxy/topics/batch.py): each its own statement
    (its own OK, result ``answer_at(j)``), row positions continuing from one INSERT to the next
    (one contiguous id range, in queue order), one mark UPDATE to the last row (``marked_at``)."""
    first = direct.read_insert(
        f"{HEAD} (payload) VALUES ('a'), ('b')", len("INSERT INTO "), len(HEAD), "t"
    )
    second = direct.read_insert(
        f"{HEAD} (`payload`) VALUES ('c')", len("INSERT INTO "), len(HEAD), "t"
    )
    third = direct.read_insert(
        f"{HEAD} (payload) VALUES ('d'), ('e'), ('f')", len("INSERT INTO "), len(HEAD), "t"
    )
    assert first is not None and second is not None and third is not None
    statements = direct.publish_script([first, second, third]).split(";")
    assert len(statements) == direct.results(3) == direct.RESULTS + 2

    def ids(i: int) -> str:
        return f", @_sg_p + {i}, @_sg_ms"

    assert [statements[direct.answer_at(j)] for j in range(3)] == [
        f"{HEAD} (payload, seq, publish_time) VALUES ('a'{ids(0)}), ('b'{ids(1)})",
        f"{HEAD} (`payload`, seq, publish_time) VALUES ('c'{ids(2)})",
        f"{HEAD} (payload, seq, publish_time) VALUES ('d'{ids(3)}), ('e'{ids(4)}), ('f'{ids(5)})",
    ]
    assert statements[direct.ANSWER + 1] == "SET @_sg_pk = LAST_INSERT_ID()"  # the first row's key
    mark = statements[direct.marked_at(3)]
    assert (
        mark.startswith("UPDATE")
        and "messages = messages + 6" in mark
        and "last_seq = @_sg_p + 5," in mark
    )
    assert statements[-1] == "COMMIT"
    # Alone, an INSERT's rows start at position 0 again (the script of one is the direct publish's).
    assert direct.publish_script([second]).split(";")[direct.ANSWER].endswith(f"('c'{ids(0)})")


def test_a_rest_publish_is_the_insert_the_sql_path_reads_and_keeps_the_deferred_path_beyond_one_packet():
    payloads = [b"a)(b'c", b"", b"\x00\xff" * 3]
    built = ShardTopicStore.direct_insert("t", payloads)
    values = ",".join(f"({bytes_literal(p)})" for p in payloads)
    assert built == direct.read_insert(f"{HEAD} (payload) VALUES {values}", len("INSERT INTO "), len(HEAD), "t")
    assert ShardTopicStore.direct_insert("t", [b"y" * 2_000_000] * 4) is not None  # 16 MB of script
    assert ShardTopicStore.direct_insert("t", [b"y" * 2_000_000] * 5) is None


def test_rows_that_went_without_ids_take_the_logs_defaults_by_their_keys_named_one_by_one_only_while_still_waiting():
    assert direct.defaults_statements("`_tms_t`", [(5, 6), (9, 9)]) == [
        "SET STATEMENT innodb_lock_wait_timeout = 1 FOR UPDATE `_tms_t` SET publish_time = DEFAULT(publish_time),"
        " seq = DEFAULT(seq) WHERE publish_time IS NULL AND _pk IN (5,6,9)"
    ]


def test_many_waiting_rows_take_their_defaults_in_statements_of_bounded_size():
    statements = direct.defaults_statements("`_tms_t`", [(1, 25_000)])
    assert len(statements) == 3
    named = [s[s.index("IN (") + 4 : -1].split(",") for s in statements]
    assert [len(n) for n in named] == [10_000, 10_000, 5_000]
    assert [int(k) for n in named for k in n] == list(range(1, 25_001))


def test_an_insert_of_more_rows_than_one_millisecond_holds_keeps_the_deferred_path():
    """A script's rows share one millisecond (sequences 0..0xFFFF): more keep the deferred path."""
    assert direct.MAX_ROWS == 65536
    assert _script("(payload) VALUES " + ",".join(["('a')"] * 65536)) is not None
    assert _script("(payload) VALUES " + ",".join(["('a')"] * 65537)) is None
