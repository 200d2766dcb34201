from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.identity.issuer import Issuer, serve


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    yield from serve()
