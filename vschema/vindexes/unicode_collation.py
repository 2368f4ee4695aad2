"""Placeholder; replaced below."""

from __future__ import annotations


class CollationKeyError(ValueError):
    pass


def loose_collation_key(data: bytes) -> bytes:
    raise CollationKeyError("not implemented")
