"""Loose collation keys (UCA level 1) exactly as Vitess's ``unicode_loose_*`` vindexes
compute them.

Vitess (``go/vt/vtgate/vindexes/unicode.go`` with its vendored copy of x/text's
collation code): the value must be valid UTF-8; trailing ASCII spaces are trimmed
(MySQL ignores them); then the string is turned into collation elements with
x/text's root table (CLDR 23, Unicode 6.2.0, see ``xtext_collation_table``) and the
key is the sequence of non-zero primary weights, each as 2 big-endian bytes when it is
at most 0x7FFF, else as 3 bytes with the top bit set. Variable elements (spaces,
punctuation) keep their primary weight (non-ignorable), so case, accents and width
are ignored but spaces and punctuation are not.

This module re-implements, in Python, how x/text walks its table: a UTF-8 trie maps
the next character to a collation element, which is either a plain element, an
expansion (several elements), a contraction (the longest sequence of following
characters that the table lists, including the discontiguous matches UCA allows
over non-blocking combining marks), or a compatibility decomposition (looked up
character by character). Characters the table lacks get x/text's implicit primary.
Elements of combining marks are put in canonical order while iterating, so an input
that is not in NFD gets the key of its NFD form.

Known limit: Python's ``unicodedata`` (Unicode 14 on Python 3.11) stands in for Go's
normalization tables (Unicode 15) for combining classes and decompositions, which
only matters for characters added in Unicode 15.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from vschema.vindexes.xtext_collation_table import CollationTable, load_collation_table

# Collation element (``colltab.Elem``) layout, from x/text's internal/colltab.
_MAX_CE = 0xAFFFFFFF
_MAX_CONTRACT = 0xDFFFFFFF
_MAX_EXPAND = 0xEFFFFFFF
_FIRST_NON_PRIMARY = 0x80000000
_LAST_SPECIAL_PRIMARY = 0xA0000000
_PRIMARY_VALUE_MASK = 0x3FFFFE00
_PRIMARY_SHIFT = 9
_TYPE_1 = 0x40000000
_TYPE_3_OR_4 = 0x80000000
_TYPE_4 = 0xA0000000
_DEFAULT_SECONDARY = 0x20

_NORMAL, _CONTRACTION, _EXPANSION, _DECOMPOSE = range(4)

# Implicit primaries (x/text colltab.implicitPrimary).
_COMMON_UNIFIED_OFFSET = 0x10000
_RARE_UNIFIED_OFFSET = 0x20000
_OTHER_OFFSET = 0x50000

# Code points with the Unicode ``Ideographic`` property (PropList.txt, Unicode 15),
# the table Go's ``unicode.Ideographic`` holds.
_IDEOGRAPHIC_RANGES = (
    (0x3006, 0x3007),
    (0x3021, 0x3029),
    (0x3038, 0x303A),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFA6D),
    (0xFA70, 0xFAD9),
    (0x16FE4, 0x16FE4),
    (0x17000, 0x187F7),
    (0x18800, 0x18CD5),
    (0x18D00, 0x18D08),
    (0x1B170, 0x1B2FB),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B739),
    (0x2B740, 0x2B81D),
    (0x2B820, 0x2CEA1),
    (0x2CEB0, 0x2EBE0),
    (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A),
    (0x31350, 0x323AF),
)

_FIRST_HANGUL, _LAST_HANGUL = 0xAC00, 0xD7A3
_NO_INDEX = 0xFF
_MAX_COMBINING = 30  # x/text: elements of longer runs of combining marks are not reordered


class CollationKeyError(ValueError):
    """The value cannot be given a collation key (it is not valid UTF-8)."""


def element_type(ce: int) -> int:
    if ce <= _MAX_CE:
        return _NORMAL
    if ce <= _MAX_CONTRACT:
        return _CONTRACTION
    if ce <= _MAX_EXPAND:
        return _EXPANSION
    return _DECOMPOSE


def element_primary(ce: int) -> int:
    if ce >= _FIRST_NON_PRIMARY:
        if ce > _LAST_SPECIAL_PRIMARY:
            return 0
        return ce & 0xFFFF
    return (ce & _PRIMARY_VALUE_MASK) >> _PRIMARY_SHIFT


def element_ccc(ce: int) -> int:
    """Canonical combining class carried by an element (0 for most)."""
    if ce & _TYPE_3_OR_4:
        if ce & _TYPE_4 == _TYPE_3_OR_4:
            return (ce >> 16) & 0xFF
        return (ce >> 20) & 0xFF
    return 0


def implicit_primary(cp: int) -> int:
    """x/text's primary weight for a code point its table does not list."""
    if any(lo <= cp <= hi for lo, hi in _IDEOGRAPHIC_RANGES):
        if 0x4E00 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF:
            return cp + _COMMON_UNIFIED_OFFSET
        return cp + _RARE_UNIFIED_OFFSET
    return cp + _OTHER_OFFSET


def _implicit_element(primary: int) -> int:
    return _TYPE_1 | (primary << _PRIMARY_SHIFT) | _DEFAULT_SECONDARY


def _rune_at(data: bytes, pos: int) -> tuple[str, int]:
    """The character starting at ``pos`` of valid UTF-8 and its length in bytes."""
    lead = data[pos]
    size = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    return data[pos : pos + size].decode("utf-8"), size


@lru_cache(maxsize=4096)
def _nfd_properties(char: str) -> tuple[int, int, int]:
    """(combining class of the first and of the last character of the NFD form, number
    of leading non-starters in it), as Go's ``norm.Properties`` reports them."""
    nfd = unicodedata.normalize("NFD", char)
    leading = 0
    for c in nfd:
        if unicodedata.combining(c) == 0:
            break
        leading += 1
    return unicodedata.combining(nfd[0]), unicodedata.combining(nfd[-1]), leading


def _first_boundary(data: bytes, start: int) -> int:
    """Offset from ``start`` of the first NFD segment boundary, or -1 (norm.FirstBoundary:
    before a character whose decomposition starts with a starter, or once more than 30
    non-starters have been seen)."""
    pos, non_starters = start, 0
    while pos < len(data):
        char, size = _rune_at(data, pos)
        leading = _nfd_properties(char)[2]
        non_starters += leading
        if non_starters > _MAX_COMBINING or leading == 0:
            return pos - start
        pos += size
    return -1


class _ContractionScanner:
    """Matches the longest contraction in x/text's contraction trie (``ctScanner``)."""

    def __init__(
        self, entries: tuple[tuple[int, int, int, int], ...], index: int, n: int, s: bytes
    ):
        self.entries = entries
        self.states = index
        self.n = n
        self.s = s
        self.index = 0
        self.pindex = 0
        self.done = False

    def scan(self, p: int) -> int:
        rune_start = p
        s, states, n = self.s, self.states, self.n
        i = 0
        while i < n and p < len(s):
            low, high, next_n, result = self.entries[states + i]
            c = s[p]
            if c >= low:
                if c == low:
                    p += 1
                    if result != _NO_INDEX:
                        self.index, self.pindex = result, p
                    if next_n != 0:
                        i, states, n = 0, states + high + n, next_n
                        if p >= len(s) or s[p] & 0xC0 != 0x80:
                            self.states, self.n, rune_start = states, n, p
                    else:
                        self.done = True
                        return p
                    continue
                if next_n == 0 and c <= high:
                    p += 1
                    self.done = True
                    self.index = c - low + result
                    self.pindex = p
                    return p
            i += 1
        return rune_start


class _Weigher:
    """Collation elements of UTF-8 text from x/text's root table (``colltab.Table``)."""

    def __init__(self, table: CollationTable) -> None:
        self.t = table
        self.index0_base = table.lookup_offset * 64
        self.values0_base = table.values_offset * 64

    def lookup(self, data: bytes, pos: int) -> tuple[int, int]:
        """Trie value for the character at ``pos`` and its size (``Trie.lookup``)."""
        t = self.t
        c0 = data[pos]
        avail = len(data) - pos
        if c0 < 0x80:
            return t.values[self.values0_base + c0], 1
        if c0 < 0xC0:
            return 0, 1
        i = t.lookup[self.index0_base + c0]
        if c0 < 0xE0:
            if avail < 2:
                return 0, 0
            c1 = data[pos + 1]
            if c1 < 0x80 or c1 >= 0xC0:
                return 0, 1
            return t.values[(i << 6) + c1], 2
        if c0 < 0xF0:
            if avail < 3:
                return 0, 0
            c1 = data[pos + 1]
            if c1 < 0x80 or c1 >= 0xC0:
                return 0, 1
            i = t.lookup[(i << 6) + c1]
            c2 = data[pos + 2]
            if c2 < 0x80 or c2 >= 0xC0:
                return 0, 2
            return t.values[(i << 6) + c2], 3
        if c0 < 0xF8:
            if avail < 4:
                return 0, 0
            c1 = data[pos + 1]
            if c1 < 0x80 or c1 >= 0xC0:
                return 0, 1
            i = t.lookup[(i << 6) + c1]
            c2 = data[pos + 2]
            if c2 < 0x80 or c2 >= 0xC0:
                return 0, 2
            i = t.lookup[(i << 6) + c2]
            c3 = data[pos + 3]
            if c3 < 0x80 or c3 >= 0xC0:
                return 0, 3
            return t.values[(i << 6) + c3], 4
        return 0, 1

    def append_expansion(self, out: list[int], ce: int) -> None:
        i = ce & 0xFFFF
        n = self.t.expand_elem[i]
        out.extend(self.t.expand_elem[i + 1 : i + 1 + n])

    def append_next(self, out: list[int], data: bytes, pos: int) -> int:
        """Append the elements of the character (or contraction) at ``pos``; return the
        number of bytes consumed (``Table.appendNext``)."""
        ce, size = self.lookup(data, pos)
        kind = element_type(ce)
        if kind == _NORMAL:
            if ce == 0:
                char, _ = _rune_at(data, pos)
                cp = ord(char)
                if _FIRST_HANGUL <= cp <= _LAST_HANGUL:
                    # Hangul syllables are not in the table: weigh their jamo.
                    for jamo in unicodedata.normalize("NFD", char):
                        out.append(self.lookup(jamo.encode("utf-8"), 0)[0])
                    return size
                ce = _implicit_element(implicit_primary(cp))
            out.append(ce)
        elif kind == _EXPANSION:
            self.append_expansion(out, ce)
        elif kind == _CONTRACTION:
            size += self.match_contraction(out, ce, data[pos + size :])
        else:
            # Compatibility decomposition: the elements of each character of the NFKD
            # form (x/text then rewrites tertiary weights, which a primary key ignores).
            char, _ = _rune_at(data, pos)
            decomposed = unicodedata.normalize("NFKD", char).encode("utf-8")
            q = 0
            while q < len(decomposed):
                q += self.append_next(out, decomposed, q)
        return size

    def match_contraction(self, out: list[int], ce: int, suffix: bytes) -> int:
        """Match the contraction starting with the character just read; return the
        number of bytes of ``suffix`` it consumed (``Table.matchContraction``)."""
        n = ce & 0xF
        index = (ce >> 4) & 0xFFF
        offset = (ce >> 16) & 0x1FFF
        scan = _ContractionScanner(self.t.contract_entries, index, n, suffix)
        skipped = bytearray()  # interstitial characters of a discontiguous match
        skipped_used = 0
        p = scan.scan(0)
        if not scan.done and p < len(suffix) and suffix[p] >= 0x80:
            p0 = p
            char, size = _rune_at(suffix, p)
            lead, trail, _ = _nfd_properties(char)
            p += size
            if lead != 0:
                prev_ccc = trail
                end = _first_boundary(suffix, p)
                if end != -1:
                    scan.s = suffix[: p + end]
                while p < len(suffix) and not scan.done and suffix[p] >= 0x80:
                    char, size = _rune_at(suffix, p)
                    lead, trail, _ = _nfd_properties(char)
                    if lead == 0 or prev_ccc >= lead:
                        break
                    prev_ccc = trail
                    pp = scan.scan(p)
                    if pp != p:
                        skipped += suffix[p0:p]
                        if scan.pindex == pp:
                            skipped_used = len(skipped)
                        p = p0 = pp
                    else:
                        p += size
        ce = self.t.contract_elem[scan.index + offset]
        if element_type(ce) == _NORMAL:
            out.append(ce)
        else:
            self.append_expansion(out, ce)
        rest = bytes(skipped[:skipped_used])
        q = 0
        while q < len(rest):
            q += self.append_next(out, rest, q)
        return scan.pindex


def _primaries(weigher: _Weigher, data: bytes) -> list[int]:
    """Non-zero primary weights of ``data`` in canonical order (``colltab.Iter``)."""
    elems: list[int] = []
    primaries: list[int] = []
    p_next = 0
    n_done = 0  # elements before this index are final

    def append_next() -> bool:
        nonlocal p_next
        if p_next >= len(data):
            return False
        size = weigher.append_next(elems, data, p_next)
        p_next += size or 1
        return True

    def next_segment() -> bool:
        nonlocal n_done
        if n_done == len(elems) and not append_next():
            return False
        prev_ccc = element_ccc(elems[-1])
        if prev_ccc == 0:
            n_done = len(elems)
            return True
        if element_ccc(elems[n_done]) == 0:
            n_done += 1
            while n_done < len(elems) and element_ccc(elems[n_done]) == 0:
                n_done += 1
            return True
        # The segment starts with combining marks: gather them all in canonical order.
        while True:
            p = len(elems)
            if not append_next():
                break
            ccc = element_ccc(elems[p])
            if ccc == 0 or len(elems) - n_done > _MAX_COMBINING:
                n_done = p
                return True
            if ccc < prev_ccc:
                _reorder(elems, n_done, p, ccc)
            else:
                prev_ccc = ccc
        done = len(elems) != n_done
        n_done = len(elems)
        return done

    while next_segment():
        primaries.extend(w for w in map(element_primary, elems[:n_done]) if w > 0)
        del elems[:n_done]
        n_done = 0
    return primaries


def _reorder(elems: list[int], n_done: int, k: int, ccc: int) -> None:
    """Move the elements appended at ``k`` before earlier marks of higher class
    (``Iter.doNorm``)."""
    p = k - 1
    while p > n_done and ccc < element_ccc(elems[p - 1]):
        p -= 1
    elems[p:] = elems[k:] + elems[p:k]


@lru_cache(maxsize=1)
def _weigher() -> _Weigher:
    return _Weigher(load_collation_table())


def ensure_collation_table() -> None:
    """Load x/text's table now (raises CollationTableMissing if it is not installed)."""
    _weigher()


def encode_primaries(weights: list[int]) -> bytes:
    """x/text's key encoding: 2 bytes up to 0x7FFF, else 3 bytes with the top bit set."""
    key = bytearray()
    for w in weights:
        if w <= 0x7FFF:
            key += bytes((w >> 8, w & 0xFF))
        else:
            key += bytes(((w >> 16) | 0x80, (w >> 8) & 0xFF, w & 0xFF))
    return bytes(key)


def loose_collation_key(data: bytes) -> bytes:
    """The loose collation key Vitess hashes for a ``unicode_loose_*`` vindex value."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CollationKeyError(
            f"cannot normalize string containing invalid UTF-8: {data!r}"
        ) from exc
    return encode_primaries(_primaries(_weigher(), data.rstrip(b" ")))
