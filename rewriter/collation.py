"""Comparison keys that reproduce MySQL collation order at the proxy.

When the proxy merges ordered shard streams, groups rows or removes duplicates, it
must compare values as the shards did. Shard tables use MariaDB's default
``utf8mb4_general_ci``: case-insensitive, accent-insensitive per character, trailing
spaces ignored (PAD SPACE). ``general_ci_key`` maps a string to a key with that
equality and order; binary collations compare raw bytes.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

# charset/collation ids whose comparison is byte-wise
BINARY_COLLATIONS = frozenset({63, 46, 47, 48, 65, 83, 84, 93, 94, 95, 98})


@lru_cache(maxsize=65536)
def _char_weight(ch: str) -> str:
    if ch < "\x80":
        return ch.upper()
    if ch > "\uffff":
        return "\ufffd"  # general_ci gives every supplementary character one weight
    base = unicodedata.normalize("NFD", ch)[0]
    if base == "ß":
        return "S"
    return base.upper()[:1] or base


def general_ci_fold(s: str) -> str:
    """Each character replaced by its ``utf8mb4_general_ci`` weight, one for one
    (trailing spaces kept): what ``LIKE`` matches under that collation."""
    return s.upper() if s.isascii() else "".join(_char_weight(c) for c in s)


@lru_cache(maxsize=131072)
def general_ci_key(s: str) -> str:
    s = s.rstrip(" ")
    if s.isascii():
        return s.upper()
    return "".join(_char_weight(c) for c in s)
