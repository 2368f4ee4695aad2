"""How long the sequencer waits between passes under load (proxy.topics.sequencer.pass_interval)."""

from __future__ import annotations

from proxy.topics.sequencer import (
    MAX_PASS_INTERVAL_S,
    MIN_PASS_INTERVAL_S,
    PACED_ROWS,
    PASS_SPACING,
    pass_interval,
)


def test_a_pass_of_few_rows_lets_the_next_start_after_the_short_interval() -> None:
    # A lone publisher, or commits a few milliseconds apart: whatever the pass took.
    assert pass_interval(0.002, 1) == MIN_PASS_INTERVAL_S
    assert pass_interval(0.5, 0) == MIN_PASS_INTERVAL_S
    assert pass_interval(0.002, PACED_ROWS - 1) == MIN_PASS_INTERVAL_S


def test_a_publisher_at_200_commits_a_second_is_never_spaced() -> None:
    # Even the longest interval gathers fewer rows than spacing needs: no wait that feeds itself.
    assert 200 * MAX_PASS_INTERVAL_S < PACED_ROWS


def test_a_pass_of_many_rows_spaces_the_next_by_what_it_took() -> None:
    took = 0.002
    assert pass_interval(took, PACED_ROWS) == PASS_SPACING * took
    assert pass_interval(0.0001, 40) == MIN_PASS_INTERVAL_S  # a quick pass: never sooner than before


def test_the_spacing_of_a_slow_pass_is_capped() -> None:
    assert pass_interval(1.0, 5000) == MAX_PASS_INTERVAL_S
    assert MIN_PASS_INTERVAL_S < MAX_PASS_INTERVAL_S
