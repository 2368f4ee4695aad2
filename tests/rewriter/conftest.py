from __future__ import annotations

import pytest

from tests.rewriter.vschema_fixture import make_vschema


@pytest.fixture(scope="session")
def vschema():
    return make_vschema()
