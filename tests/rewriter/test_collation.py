"""Collation keys reproduce utf8mb4_general_ci equality and order."""

from __future__ import annotations

import pytest

from rewriter.collation import general_ci_key


@pytest.mark.parametrize(("a", "b"), [
    ("abc", "ABC"),
    ("e", "é"),
    ("E", "è"),
    ("B ", "B"),
    ("straße", "strase"),
    ("😀", "😁"),
])
def test_equal_under_general_ci(a, b):
    assert general_ci_key(a) == general_ci_key(b)


@pytest.mark.parametrize(("a", "b"), [
    ("a", "b"),
    ("Z", "_"),
    ("a", "aa"),
    ("", "a"),
])
def test_ordered_under_general_ci(a, b):
    assert general_ci_key(a) < general_ci_key(b)
