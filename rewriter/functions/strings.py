"""String functions: CONCAT, CONCAT_WS, LENGTH/CHAR_LENGTH, UPPER/LOWER, SUBSTRING/MID,
LEFT/RIGHT, TRIM/LTRIM/RTRIM, REPLACE, LPAD/RPAD, LOCATE/INSTR/POSITION, REVERSE, REPEAT,
SPACE, SUBSTRING_INDEX, ASCII, FIELD, ELT, HEX, MD5, SHA1, CRC32.

MySQL's rules: NULL in any argument gives NULL (CONCAT_WS skips NULL values, not a NULL
separator); numbers and dates take their text form; lengths and positions count
characters (LENGTH counts bytes of utf8mb4); positions are 1-based, a negative SUBSTRING
position counts from the end; LOCATE matches with the collation (``utf8mb4_general_ci``:
case and accents ignored), while REPLACE, TRIM and SUBSTRING_INDEX match exactly. A
binary string argument makes the operation byte-wise and the result binary.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from rewriter.collation import general_ci_fold
from rewriter.functions.bits import as_uint64
from rewriter.functions.signature import INT, STRING, Compile, Fn, Function, fixed, refuse, strict
from rewriter.functions.values import as_int, as_number, comparable, is_number, to_text

# MariaDB's default max_allowed_packet: REPEAT/LPAD/RPAD/SPACE results longer than it are NULL
MAX_ALLOWED_PACKET = 16 * 1024 * 1024


def _chars(values: tuple[Any, ...]) -> tuple[list[str], bool]:
    """The arguments as strings of characters; a binary one makes every argument bytes,
    one character per byte (latin-1)."""
    if any(isinstance(v, bytes) for v in values):
        return [(v if isinstance(v, bytes) else to_text(v).encode()).decode("latin-1") for v in values], True
    return [to_text(v) for v in values], False


def _out(s: str, binary: bool) -> str | bytes:
    return s.encode("latin-1") if binary else s


def _string_op(impl: Callable[..., str | None], ints: tuple[int, ...] = ()) -> Callable[..., Any]:
    """``impl`` over text arguments (the positions in ``ints`` as integers), the result
    text or binary as the arguments are."""

    def run(*values: Any) -> Any:
        texts, binary = _chars(values)
        args: list[Any] = [as_int(v) if i in ints else t for i, (v, t) in enumerate(zip(values, texts, strict=True))]
        r = impl(*args)
        return None if r is None else _out(r, binary)

    return run


def _args(e: exp.Expression, *names: str) -> list[exp.Expression]:
    return [e.args[n] for n in names if e.args.get(n) is not None]


def _concat(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(x) for x in e.expressions], _string_op(lambda *parts: "".join(parts)))


def _concat_ws(e: exp.Expression, c: Compile) -> Fn:
    sep, *parts = [c(x) for x in e.expressions]

    def concat_ws(row: list[Any], bv: Mapping[str, Any]) -> Any:
        s = sep(row, bv)
        if s is None:
            return None
        values = [v for v in (f(row, bv) for f in parts) if v is not None]
        return _string_op(lambda sp, *ps: sp.join(ps))(s, *values)

    return concat_ws


def _length(e: exp.Expression, c: Compile) -> Fn:
    def length(v: Any) -> int:
        if isinstance(v, bytes):
            return len(v)
        return len(to_text(v).encode("utf-8", "surrogateescape")) if byte_length else len(to_text(v))

    byte_length = bool(e.args.get("binary")) or (isinstance(e, exp.Anonymous) and str(e.this).upper() == "OCTET_LENGTH")
    return strict([c(e.this if not isinstance(e, exp.Anonymous) else e.expressions[0])], length)


def _case_map(upper: bool) -> Callable[[str], str]:
    def one(ch: str) -> str:
        m = ch.upper() if upper else ch.lower()
        return m if len(m) == 1 else ch  # no multi-character mappings (ß stays ß)

    return lambda s: s.upper() if upper and s.isascii() else s.lower() if s.isascii() else "".join(map(one, s))


def _upper_lower(upper: bool) -> Callable[[exp.Expression, Compile], Fn]:
    mapping = _case_map(upper)

    def compile_(e: exp.Expression, c: Compile) -> Fn:
        return strict([c(e.this)], lambda v: v if isinstance(v, bytes) else mapping(to_text(v)))

    return compile_


def substring(s: str, pos: int, length: int | None) -> str:
    n = len(s)
    if pos == 0 or pos > n or -pos > n:
        return ""
    start = pos - 1 if pos > 0 else n + pos
    if length is None:
        return s[start:]
    return s[start:start + length] if length > 0 else ""


def _substring(e: exp.Expression, c: Compile) -> Fn:
    if isinstance(e, exp.Anonymous):  # MID(s, pos, len)
        if len(e.expressions) != 3:
            raise refuse(e)
        args = e.expressions
    else:
        args = _args(e, "this", "start", "length")
    fns = [c(x) for x in args]
    if len(fns) == 2:
        return strict(fns, _string_op(lambda s, p: substring(s, p, None), ints=(1,)))
    return strict(fns, _string_op(substring, ints=(1, 2)))


def _left_right(left: bool) -> Callable[[exp.Expression, Compile], Fn]:
    def take(s: str, n: int) -> str:
        if n <= 0:
            return ""
        return s[:n] if left else s[-n:]

    return lambda e, c: strict([c(e.this), c(e.expression)], _string_op(take, ints=(1,)))


def trim(s: str, rem: str, leading: bool, trailing: bool) -> str:
    if not rem:
        return s
    if leading:
        while s.startswith(rem):
            s = s[len(rem):]
    if trailing:
        while s.endswith(rem):
            s = s[:-len(rem)]
    return s


def _trim(e: exp.Expression, c: Compile) -> Fn:
    position = str(e.args.get("position") or "BOTH").upper()
    leading, trailing = position in ("BOTH", "LEADING"), position in ("BOTH", "TRAILING")
    if e.args.get("expression") is None:
        return strict([c(e.this)], _string_op(lambda s: trim(s, " ", leading, trailing)))
    return strict([c(e.this), c(e.expression)], _string_op(lambda s, r: trim(s, r, leading, trailing)))


def _replace(e: exp.Expression, c: Compile) -> Fn:
    def replace(s: str, old: str, new: str) -> str:
        return s.replace(old, new) if old else s

    return strict([c(x) for x in _args(e, "this", "expression", "replacement")], _string_op(replace))


def _pad(e: exp.Expression, c: Compile) -> Fn:
    left = bool(e.args.get("is_left"))
    if e.args.get("fill_pattern") is None:
        raise refuse(e)

    def pad(s: str, n: int, fill: str) -> str | None:
        if n < 0 or n > MAX_ALLOWED_PACKET:
            return None
        if n <= len(s):
            return s[:n]
        if not fill:
            return None
        need = n - len(s)
        padding = (fill * (need // len(fill) + 1))[:need]
        return padding + s if left else s + padding

    return strict([c(x) for x in _args(e, "this", "expression", "fill_pattern")], _string_op(pad, ints=(1,)))


def locate(needle: str, haystack: str, pos: int, binary: bool) -> int:
    """MariaDB's ``my_instr``: the collation compares the needle's bytes with as many bytes
    of the haystack, so a match ignores case and accents only between characters of the
    same utf8 length (``INSTR('Äb', 'a')`` is 0, ``INSTR('ab', 'A')`` is 1)."""
    if pos < 1 or pos > len(haystack) + 1:
        return 0
    if binary:
        return haystack.find(needle, pos - 1) + 1
    width = len(needle)
    folded, size = general_ci_fold(needle), len(needle.encode("utf-8", "surrogateescape"))
    for start in range(pos - 1, len(haystack) - width + 1):
        part = haystack[start:start + width]
        if general_ci_fold(part) == folded and len(part.encode("utf-8", "surrogateescape")) == size:
            return start + 1
    return 0


def _locate(e: exp.Expression, c: Compile) -> Fn:
    fns = [c(e.args["substr"]), c(e.this)] + ([c(e.args["position"])] if e.args.get("position") is not None else [])

    def run(*values: Any) -> int:
        texts, binary = _chars(values[:2])
        pos = as_int(values[2]) if len(values) > 2 else 1
        return locate(texts[0], texts[1], pos if pos is not None else 1, binary)

    return strict(fns, run)


def repeat(s: str, n: int) -> str | None:
    if n > 0 and len(s) * n > MAX_ALLOWED_PACKET:
        return None
    return s * max(n, 0)


def _repeat(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this), c(e.args["times"])], _string_op(repeat, ints=(1,)))


def _space(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this)], lambda n: repeat(" ", as_int(n) or 0))


def substring_index(s: str, delim: str, count: int) -> str:
    if count == 0 or not delim:
        return ""
    parts = s.split(delim)
    if count > 0:
        return delim.join(parts[:count])
    return delim.join(parts[count:])


def _substring_index(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(x) for x in _args(e, "this", "delimiter", "count")], _string_op(substring_index, ints=(2,)))


def _ascii(e: exp.Expression, c: Compile) -> Fn:
    def ascii_(v: Any) -> int:
        raw = v if isinstance(v, bytes) else to_text(v).encode("utf-8", "surrogateescape")
        return raw[0] if raw else 0

    return strict([c(e.this)], ascii_)


def _reverse(e: exp.Expression, c: Compile) -> Fn:
    return strict([c(e.this)], _string_op(lambda s: s[::-1]))


def _raw(v: Any) -> bytes:
    return v if isinstance(v, bytes) else to_text(v).encode("utf-8", "surrogateescape")


def _digest(name: str) -> Callable[[exp.Expression, Compile], Fn]:
    return lambda e, c: strict([c(e.this)], lambda v: hashlib.new(name, _raw(v)).hexdigest())


def _crc32(e: exp.Expression, c: Compile) -> Fn:
    if len(e.expressions) != 1:
        raise refuse(e)
    return strict([c(e.expressions[0])], lambda v: zlib.crc32(_raw(v)))


def _hex(e: exp.Expression, c: Compile) -> Fn:
    def hex_(v: Any) -> str:
        if isinstance(v, str | bytes):
            return _raw(v).hex().upper()
        return format(as_uint64(v), "X")  # a number: its 64-bit integer

    return strict([c(e.this)], hex_)


def _field(e: exp.Expression, c: Compile) -> Fn:
    """FIELD(x, a, b, ...): the position of the first argument equal to x, 0 if none (or x
    NULL); all strings compare as strings, all numbers as numbers, a mix as DOUBLE."""
    if len(e.expressions) < 2:
        raise refuse(e)
    fx, *items = [c(x) for x in e.expressions]

    def field(row: list[Any], bv: Mapping[str, Any]) -> int:
        x = fx(row, bv)
        if x is None:
            return 0
        values = [f(row, bv) for f in items]
        present = [x, *(v for v in values if v is not None)]
        if not all(isinstance(v, str | bytes) for v in present) and not all(is_number(v) for v in present):
            x = float(as_number(x))
            values = [None if v is None else float(as_number(v)) for v in values]
        for k, v in enumerate(values):
            if v is not None:
                a, b = comparable(x, v)
                if a == b:
                    return k + 1
        return 0

    return field


def _elt(e: exp.Expression, c: Compile) -> Fn:
    fn, items = c(e.this), [c(x) for x in e.expressions]

    def elt(row: list[Any], bv: Mapping[str, Any]) -> Any:
        n = as_int(fn(row, bv))
        if n is None or not 1 <= n <= len(items):
            return None
        return items[n - 1](row, bv)

    return elt


_TEXT = fixed(STRING)
FUNCTIONS: dict[type[exp.Expression] | str, Function] = {
    exp.Concat: Function(_concat, _TEXT),
    exp.ConcatWs: Function(_concat_ws, _TEXT),
    exp.Length: Function(_length, fixed(INT)),
    "OCTET_LENGTH": Function(_length, fixed(INT)),
    exp.Upper: Function(_upper_lower(True), _TEXT),
    exp.Lower: Function(_upper_lower(False), _TEXT),
    exp.Substring: Function(_substring, _TEXT),
    "MID": Function(_substring, _TEXT),
    exp.Left: Function(_left_right(True), _TEXT),
    exp.Right: Function(_left_right(False), _TEXT),
    exp.Trim: Function(_trim, _TEXT),
    exp.Replace: Function(_replace, _TEXT),
    exp.Pad: Function(_pad, _TEXT),
    exp.StrPosition: Function(_locate, fixed(INT)),
    exp.Repeat: Function(_repeat, _TEXT),
    exp.Space: Function(_space, _TEXT),
    exp.SubstringIndex: Function(_substring_index, _TEXT),
    exp.Ascii: Function(_ascii, fixed(INT)),
    exp.Reverse: Function(_reverse, _TEXT),
    exp.MD5: Function(_digest("md5"), _TEXT),
    exp.SHA: Function(_digest("sha1"), _TEXT),
    "CRC32": Function(_crc32, fixed(INT)),
    exp.Hex: Function(_hex, _TEXT),
    "FIELD": Function(_field, fixed(INT)),
    exp.Elt: Function(_elt, _TEXT),
}
