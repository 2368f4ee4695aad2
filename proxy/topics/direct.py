"""Direct publishes: ids assigned in the write, for publishes whose transaction the proxy owns
(pure text builders, no I/O).

An autocommit ``INSERT INTO topic (cols) VALUES (...), ...`` (and a REST publish without a
transaction pointer) is sent to the topic's shard as ONE multi-statement, so its rows are
written with their ids and no sequencer pass ever has to UPDATE them (the pass's per-row
UPDATE, ~17-20 us of shard CPU a row, was what kept 100-message transactions at 0.27-0.34 of
the raw ceiling: BENCHMARKS.md, "topicdirect")::

    SET @_sg_ms = NULL, ...;
    BEGIN;
    SELECT last_ms, last_seq INTO @_sg_lms, @_sg_lseq FROM _tms_topics
      WHERE name = 'topic' AND generation > 0 FOR UPDATE;     -- the mark, locked to COMMIT
    SELECT <first id's ms, NULL if committed rows wait for a pass>, <its position> INTO @_sg_ms, @_sg_p;
    INSERT INTO _tms_topic (cols, seq, publish_time) VALUES (..., @_sg_p + <i>, @_sg_ms), ...;
    SET @_sg_pk = LAST_INSERT_ID();                            -- the first row's key
    [the next publishers' INSERTs, when several go together: proxy.topics.batch;]
    SELECT SUM(payload_bytes) INTO @_sg_b FROM _tms_topic WHERE _pk >= @_sg_pk AND seq >= 0;
    UPDATE _tms_topics SET last_ms = @_sg_ms, last_seq = @_sg_p + <n - 1>, messages = messages + n,
      bytes = bytes + @_sg_b WHERE name = 'topic' AND @_sg_ms IS NOT NULL;
    COMMIT

The ids follow the rule of ``ids.assign`` (the shard's clock, never behind the mark), but a
script's rows share one millisecond: the first row's position is ``@_sg_p`` in millisecond
``@_sg_ms``, row ``i`` gets ``(@_sg_ms, @_sg_p + i)`` with ``i`` a literal in the row's text
(MariaDB leaves the order in which a VALUES row's expressions are evaluated undefined: no row
reads a variable another row or column assigns); when the rows do not fit in the rest of the
mark's millisecond (past sequence 0xFFFF), they start the next one at 0 (a script has at most
``MAX_ROWS`` rows; a bigger INSERT keeps the deferred path). That form costs the shard ~1.7 us a
row less than the rolling one (``(@_sg_p + i) MOD 65536, @_sg_ms + (@_sg_p + i) DIV 65536``:
10.2 against 11.9 us a row for the INSERT alone, BENCHMARKS.md "topicwrite"). The mark moves
to the last row's id, all from the row locked. That lock is held to COMMIT, so
direct publishes and sequencer passes (``ShardTopicStore.sequence``) of every proxy take ids one
at a time, each after the mark the previous one committed: see ``proxy.topics.sequencer`` for
why that is commit order with no late arrivals. When committed rows still wait for a pass (a
client's transaction, a one-message publish), the rows go without ids too (``@_sg_ms`` NULL, so
``publish_time`` is; the mark's UPDATE affects no row: result ``MARKED``), so that the pass
orders them after those (by insert order) rather than before: the sender then wakes the sequencer as for any deferred
write. Such rows then take the log's own defaults, as a deferred INSERT's rows do, by UPDATEs
of their keys (``defaults_statements``) that the sender runs after the COMMIT and before it
answers: 0 / -1 on the current layout, so the pass updates them in place
(``proxy.topics.schema``), NULL (unchanged) on logs laid out before it. ``DEFAULT(col)`` reads
the table written, so a log's layout needs no tracking (a log replaced under a running proxy,
tests/topics/test_log_layout.py, is written as it is now). ``publish_time IS NULL`` keeps it to
rows still waiting (a pass may have given them ids already). The keys are each INSERT's insert
id and row count (consecutive with ``innodb_autoinc_lock_mode`` 0 or 1, MariaDB's default 1),
named one by one (``_pk IN (...)``): a range (``BETWEEN``) also locks the key after it under
REPEATABLE READ, and when that is an open transaction's row (a client publishing in a
transaction meanwhile) the UPDATE, and so the publish's answer, waited for that transaction
(seen on 10.11: a 3 s lock wait timeout reached; the key list, 10 ms). Any wait is cut to 1 s
(``SET STATEMENT innodb_lock_wait_timeout``: with ``innodb_autoinc_lock_mode`` 2 the keys may be
other sessions' rows): the rows then keep NULL, which reads as "no id" too. Not in the script, where every publish would pay it: an
``IFNULL(<id>, DEFAULT(col))`` in each row cost the shard ~3 us a message, an UPDATE after each
INSERT ("Impossible WHERE" when the rows took ids) ~40 us a publisher (BENCHMARKS.md, "topicfix").
The ``bytes`` counter adds the rows' ``payload_bytes`` (their lengths as MariaDB stored
them), read back by a plain (consistent, non-locking) SELECT of the rows from ``@_sg_pk``, the
first INSERT's first key (``LAST_INSERT_ID()``; keys only grow, whatever
``innodb_autoinc_lock_mode``): of the rows from there on only this script's have an id
(``seq >= 0``: ids are written under the mark's lock, which this script holds; other sessions'
rows inserted meanwhile wait for a pass, and under REPEATABLE READ are not even visible). A
range of the primary key, not of ``message_id`` (100 lookups through the secondary index), and
not a subquery of the mark's UPDATE (a locking read: it locked the range, and made a concurrent
deferred INSERT wait for this COMMIT): ~3 us a row less (BENCHMARKS.md, "topicwrite"). The
first key rather than the largest key the first read sees (``MAX(_pk)``, no ``SET``: the same
cost, measured): that read steps back over every row at the end of the log the script cannot
see (a client's open transaction), and the range after it too.

A multi-statement stops at its first error with its transaction still open: whoever sends the
script rolls it back (or closes the connection) on any error, and answers that error; the
client's answer on success is the INSERT's own OK (result ``ANSWER`` of ``RESULTS``).

Only what can be rewritten exactly is: a plain ``INSERT INTO`` (no IGNORE / priority, no ON
DUPLICATE KEY, no row alias, no comment) into the log table with a column list of view
columns but ``publish_time``, and rows of a VALUES list. Anything else keeps the deferred path
(NULL ids, a pass), which interleaves with this one correctly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from proxy.topics.ids import MAX_SEQ
from proxy.topics.names import META_TABLE
from proxy.topics.schema import NOW_MS, sql_string, view_condition
from sqltext.lexer import split_top_level

# A script goes as one COM_QUERY packet (the fast path's links send no more; MariaDB's default
# max_allowed_packet is 16 MiB): a bigger one keeps the deferred path (the ids add ~25 bytes a row).
MAX_SCRIPT_BYTES = 0xFFFFFF - 1
# What the ids add to a row's text at most, and the characters a script surely fits in (each
# character at most 4 bytes in utf-8, the script's own statements well within 4096): below that,
# a script goes as one packet without being encoded to count its bytes.
ID_CHARS_PER_ROW = 32
SAFE_SCRIPT_CHARS = MAX_SCRIPT_BYTES // 4 - 4096
# SET, BEGIN, SELECT .. FOR UPDATE, SELECT .. INTO, INSERT, SET, SELECT .. INTO, UPDATE, COMMIT
RESULTS = 9
ANSWER = 4  # the INSERT's result: the client's answer
MARKED = 7  # the mark's UPDATE: 1 row affected when the rows took ids, 0 when they wait for a pass
# A script's rows share one millisecond (its sequences 0..0xFFFF): more keep the deferred path.
MAX_ROWS = MAX_SEQ + 1

_PLAIN_INSERT = re.compile(r"^\s*insert\s+into\s+$", re.I)
_VALUES = re.compile(r"\s*values?\s*(?=\()", re.I)
# Quoted strings and identifiers whole (default sql_mode: the caller declines ANSI_QUOTES /
# NO_BACKSLASH_ESCAPES sessions' text with quotes or backslashes), parentheses, and what
# makes the text something this scanner does not read (a comment, an unclosed quote).
# Loops unrolled (a run of plain characters at a time): 100 rows of 100-byte strings took 433 us
# with one alternation per character, 119 us so (Python's re reads a character class at ~7 ns
# a character: matching rows whole, or validating the list with one fullmatch, was no faster).
_TOKEN = re.compile(
    r"""'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"|`[^`]*(?:``[^`]*)*`|[()]|/\*|#|--|['"`;]""",
    re.S,
)
_PLAIN_LIST = re.compile(r"^[A-Za-z0-9_$\s,]*$")


def row_ends(text: str) -> list[int] | None:
    """The index of each row's closing parenthesis in ``text``, a VALUES list ``(...), (...)``
    and nothing after it; None when it is anything else. Read by tokens: strings and quoted
    names whole, parentheses, and what ends the scan."""
    ends: list[int] = []
    depth = 0
    last = 0  # end of the last token read at depth 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "(":
            if depth == 0:
                gap = text[last : m.start()].strip()
                if gap != ("," if ends else ""):
                    return None  # between rows: one comma
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth < 0:
                return None
            if depth == 0:
                ends.append(m.start())
                last = m.end()
        elif len(tok) < 2 or tok in ("/*", "--"):
            return None  # a comment, an unclosed quote, a second statement
        elif depth == 0:
            return None  # a quoted word between rows
    if depth != 0 or not ends or text[last:].strip():
        return None  # unbalanced, or something after the rows (ON DUPLICATE KEY, an alias)
    return ends


def _column_names(inner: str) -> list[str] | None:
    if _PLAIN_LIST.match(inner):
        return [c.strip().lower() for c in inner.split(",")]
    names = []
    for c in split_top_level(inner):
        if not (c.startswith("`") and c.endswith("`")) or "." in c:
            return None
        names.append(c[1:-1].replace("``", "`").lower())
    return names


def _row_ids(i: int) -> str:
    """What row ``i`` of a direct publish gets before its closing parenthesis: its seq and publish_time."""
    return f", @_sg_p + {i}, @_sg_ms"


# Rows 0..1023's texts, made once (~30 KB): formatting them per publish (five pieces a row, or an
# f-string) cost 100 rows ~9 us more than a constant suffix (142 -> 151 us; made once, 141-146 us).
_ROW_IDS = [_row_ids(i) for i in range(1024)]


@dataclass(frozen=True, slots=True)
class DirectInsert:
    """One publisher's INSERT, read for a direct publish: its text up to its VALUES list (the
    column list with ``seq, publish_time`` added), the list, where each row closes, and the
    log table's name as the statement spells it. ``text(offset)`` is the INSERT with its rows'
    ids at positions ``offset``.. of the script's range (``publish_script``: several
    publishers' INSERTs in one script, each its own statement and its own OK)."""

    head: str
    values: str
    ends: list[int]
    quoted_log: str
    topic: str

    @property
    def rows(self) -> int:
        return len(self.ends)

    @property
    def size(self) -> int:
        """At most this many characters in a script, its rows' ids included."""
        return len(self.head) + len(self.values) + ID_CHARS_PER_ROW * len(self.ends)

    def text(self, offset: int = 0) -> str:
        # Row i's position, @_sg_p + offset + i, with the number a literal in the row: MariaDB
        # leaves the order in which a VALUES row's expressions run undefined, so no row reads
        # what another row (or another column) assigned. One join for the whole list.
        values, rows = self.values, len(self.ends)
        if offset + rows <= len(_ROW_IDS):
            suffixes = _ROW_IDS[offset : offset + rows] if offset else _ROW_IDS
        else:
            suffixes = [_row_ids(offset + i) for i in range(rows)]
        pieces: list[str] = [self.head]
        pos = 0
        for end, suffix in zip(self.ends, suffixes, strict=False):  # the made-once list is longer
            pieces += (values[pos:end], suffix)
            pos = end
        pieces.append(values[pos:])
        return "".join(pieces)


def read_insert(sql: str, target_start: int, target_end: int, topic: str) -> DirectInsert | None:
    """``sql`` (an INSERT whose target, ``sql[target_start:target_end]``, is the topic's log
    table) read for a direct publish; None when it is not rewritten exactly (the deferred path
    runs it)."""
    if _PLAIN_INSERT.match(sql, 0, target_start) is None:
        return None
    rest = sql[target_end:]
    head = rest.lstrip()
    if not head.startswith("("):
        return None
    close = head.find(")")
    if close < 0:
        return None
    names = _column_names(head[1:close])
    if not names or "publish_time" in names or "seq" in names or "" in names:
        return None
    m = _VALUES.match(head, close + 1)
    if m is None:
        return None
    values_at = m.end()
    values = head[values_at:]
    ends = row_ends(values)
    if ends is None:
        return None
    text = "".join(
        (sql[:target_end], " ", head[:close], ", seq, publish_time)", head[close + 1 : values_at])
    )
    return DirectInsert(text, values, ends, sql[target_start:target_end], topic)


def results(publishers: int) -> int:
    """How many OKs a script of ``publishers`` INSERTs answers (``RESULTS`` for one)."""
    return RESULTS - 1 + publishers


def answer_at(j: int) -> int:
    """Publisher ``j``'s OK in a script (``ANSWER`` for the first; the first key's ``SET`` follows it)."""
    return ANSWER + j + (j > 0)


def marked_at(publishers: int) -> int:
    """The mark UPDATE's result in a script of ``publishers`` INSERTs (``MARKED`` for one)."""
    return MARKED - 1 + publishers


# Keys named per UPDATE of ``defaults_statements``: ~8 bytes each, far within one packet.
DEFAULT_KEYS_PER_STATEMENT = 10_000


def defaults_statements(quoted_log: str, keys: Sequence[tuple[int, int]]) -> list[str]:
    """After a direct publish whose rows went without ids: the UPDATEs that give those rows
    (``keys``: each INSERT's first and last ``_pk``, from its OK's insert id and row count) the
    log's defaults, each key by equality (see the module docstring)."""
    pks = [pk for first, last in keys for pk in range(int(first), int(last) + 1)]
    return [
        f"SET STATEMENT innodb_lock_wait_timeout = 1 FOR UPDATE {quoted_log} SET publish_time ="
        f" DEFAULT(publish_time), seq = DEFAULT(seq) WHERE publish_time IS NULL AND _pk IN"
        f" ({','.join(map(str, pks[i : i + DEFAULT_KEYS_PER_STATEMENT]))})"
        for i in range(0, len(pks), DEFAULT_KEYS_PER_STATEMENT)
    ]


# A row a direct publish feeds its followers (``feed_rows_sql``) stays unexpired this long yet.
FEED_MARGIN_MS = 1000


@dataclass(frozen=True, slots=True)
class FeedRows:
    """What a script adds for the followers' feed (``proxy.topics.feed``) of its topic: a
    SELECT of its rows as the view shows them (``columns``, the view's, quoted; ``ttl_seconds``,
    the view's TTL), answering rows only when the mark the script locked is ``after_ms``,
    ``after_seq``, the feed's position (its rows then follow the feed's last ones, with nothing
    between: every id is taken under that lock)."""

    columns: str
    ttl_seconds: int
    after_ms: int
    after_seq: int


def feed_rows_sql(quoted_log: str, rows: int, feed: FeedRows) -> str:
    """After a script's COMMIT: its ``rows`` rows, in id order, when its locked mark was the
    feed's position (none otherwise, nor when they went without ids: ``@_sg_ms`` NULL).

    Read back rather than built from the INSERTs' literals: the shard renders each value as a
    read of the view does (types, charsets, user columns' defaults). By the primary key from
    the first row's (``@_sg_pk``, as the bytes SELECT), the script's rows named by their ids
    (one millisecond, consecutive sequences: no other session's row has these), in key order,
    which is their id order (a statement's rows take increasing keys in row order, whatever
    ``innodb_autoinc_lock_mode``; the script's INSERTs run in order), stopping at the last one
    (LIMIT: rows other sessions inserted after them are not scanned). After the COMMIT, not
    before: a failed SELECT then costs only the followers' chunk, never the publish. The view's
    conditions (``schema.view_ddl``) apply: a row it would hide is not returned (the caller
    then feeds nothing: the count differs), and so is one that expires within ``FEED_MARGIN_MS``
    (a ``ttl_seconds`` 0 row, say): a row fed about when it expires reaches followers where a
    read of the view a moment later hides it. Such rows go through the feed's own read of the
    view instead, as before the feed was fed (whose clock is its statement's start: it too may
    return a row that expires right after, tests/topics/test_feed_from_publishes.py)."""
    return (
        f"SELECT {feed.columns} FROM {quoted_log} FORCE INDEX (PRIMARY) WHERE _pk >= @_sg_pk"
        f" AND @_sg_lms = {int(feed.after_ms)} AND @_sg_lseq = {int(feed.after_seq)}"
        f" AND publish_time = @_sg_ms AND seq BETWEEN @_sg_p AND @_sg_p + {rows - 1}"
        f" AND {view_condition(feed.ttl_seconds, FEED_MARGIN_MS)} ORDER BY _pk LIMIT {rows}"
    )


def publish_script(inserts: Sequence[DirectInsert], feed: FeedRows | None = None, generation: int | None = None) -> str:
    """One direct publish of ``inserts`` (INSERTs into one topic, in this order): one mark lock,
    each INSERT its own statement (its own OK: affected rows, insert id, warnings), their rows
    one contiguous id range in this order, one mark UPDATE, one COMMIT; with ``feed``, then
    the SELECT of ``feed_rows_sql`` (the script's last answer, after its ``results`` OKs).
    With ``generation`` (the one the sender serves), the mark is locked only at that generation:
    a sender that has not yet seen a DROP + CREATE TOPIC made through another proxy writes its
    rows without ids (a pass gives them), so they are never handed to the old generation's
    followers (``proxy.topics.feed``)."""
    first = inserts[0]
    quoted_log = first.quoted_log
    name = sql_string(first.topic)
    body: list[str] = []
    offset = 0
    for ins in inserts:
        body += (ins.text(offset), ";SET @_sg_pk = LAST_INSERT_ID();" if not offset else ";")
        offset += ins.rows
    last = offset - 1
    # The next position in the mark's millisecond; rows that do not fit in the rest of it start
    # the next one (a script's rows share one: see the module docstring).
    position = f"IF({NOW_MS} <= @_sg_lms, @_sg_lseq + 1, 0)"
    spills = f"{position} + {offset} > {MAX_ROWS}"
    # Ids only when no committed row waits for a pass (read after the mark is locked): a row that
    # committed before this publish must not get its place after it (a publisher's one-message
    # publish, then its batch). Else the rows go without ids, for the pass with the others.
    ms = f"IF(@_sg_lms IS NULL OR EXISTS(SELECT 1 FROM {quoted_log} FORCE INDEX (message_id) WHERE message_id IS NULL AND pending = 0), NULL, GREATEST({NOW_MS}, @_sg_lms) + ({spills}))"
    return "".join((
        "SET @_sg_ms = NULL, @_sg_p = NULL, @_sg_lms = NULL, @_sg_lseq = NULL, @_sg_pk = NULL, @_sg_b = NULL;BEGIN;"
        # The mark, locked to COMMIT (none: not a live topic, the variables stay NULL).
        f"SELECT last_ms, last_seq INTO @_sg_lms, @_sg_lseq FROM {META_TABLE} WHERE name = {name}"
        f" AND generation {'> 0' if generation is None else f'= {int(generation)}'} FOR UPDATE;"
        # A consistent read, taken after the lock: every writer before this one has committed.
        f"SELECT {ms}, IF({spills}, 0, {position}) INTO @_sg_ms, @_sg_p;",
        *body,
        # The rows' bytes: the keys from the first row's, with ids (only this script's).
        f"SELECT SUM(payload_bytes) INTO @_sg_b FROM {quoted_log} FORCE INDEX (PRIMARY) WHERE _pk >= @_sg_pk AND seq >= 0;"
        # Affects 1 row when the rows took ids (MARKED), 0 when they went without.
        f"UPDATE {META_TABLE} SET last_ms = @_sg_ms, last_seq = @_sg_p + {last}, messages = messages + {offset},"
        f" bytes = bytes + IFNULL(@_sg_b, 0) WHERE name = {name} AND @_sg_ms IS NOT NULL;COMMIT",
        "" if feed is None else ";" + feed_rows_sql(quoted_log, offset, feed),
    ))  # fmt: skip


def fits(script: str) -> bool:
    """Whether ``script`` goes as one COM_QUERY packet."""
    return len(script) < MAX_SCRIPT_BYTES // 4 or len(script.encode("utf-8")) < MAX_SCRIPT_BYTES


def read_direct(sql: str, target_start: int, target_end: int, topic: str) -> DirectInsert | None:
    """``read_insert``, and None too when the script of this INSERT alone would not go as one
    packet, or has more than ``MAX_ROWS`` rows (the deferred path runs it)."""
    ins = read_insert(sql, target_start, target_end, topic)
    if ins is None or ins.rows > MAX_ROWS or (ins.size >= SAFE_SCRIPT_CHARS and not fits(publish_script((ins,)))):
        return None
    return ins
