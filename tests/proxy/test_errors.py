"""``proxy.errors``: what a client sees of the proxy's own failures."""

from __future__ import annotations

import logging

import pytest

from proxy.errors import ER_UNKNOWN_ERROR, internal_error


def test_an_internal_failure_reaches_the_client_as_1105_without_python_text(caplog: pytest.LogCaptureFixture) -> None:
    try:
        {}["secret-key"]
    except KeyError as e:
        with caplog.at_level(logging.ERROR, logger="proxy.errors"):
            err = internal_error(e, connection_id=42)
    assert (err.code, err.sqlstate) == (ER_UNKNOWN_ERROR, "HY000")
    assert "secret-key" not in err.message and "KeyError" not in err.message
    assert "connection 42" in err.message
    # The operator's log has it whole: the exception, its traceback and the connection.
    (record,) = [r for r in caplog.records if r.name == "proxy.errors"]
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert record.__dict__["connection_id"] == 42
