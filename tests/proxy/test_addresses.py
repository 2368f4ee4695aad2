"""Which hosts count as this machine's loopback (no TLS context, passwordless listening allowed)."""

from __future__ import annotations

import pytest

from proxy.addresses import is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.4.5", "::1", "localhost"])
def test_loopback_addresses_are_loopback(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["10.0.0.5", "0.0.0.0", "db.example.com", "::"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)
