"""Fixtures for the service tests: the in-process fake model backend and every use case over a
real SQLite file and real tokenizers (tests/fakes/fake_provider.py)."""

from __future__ import annotations

import pytest

from tests.fakes.fake_provider import FakeProvider, close, fake_services


@pytest.fixture
def provider():
    return FakeProvider()


@pytest.fixture
async def services(provider, tmp_path):
    services = fake_services(tmp_path, provider)
    yield services
    await close(services)
