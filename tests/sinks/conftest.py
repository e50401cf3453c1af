"""Fixtures for the sink and agent tests (the top-level tests/conftest.py is the lead's)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

from k8s_api_server import FakeKubeAPI  # noqa: E402


@pytest.fixture
def k8s_server() -> Iterator[FakeKubeAPI]:
    api = FakeKubeAPI().start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def api_client(k8s_server: FakeKubeAPI) -> object:
    """The real kubernetes ApiClient, talking HTTP to the test server."""
    import kubernetes

    cfg = kubernetes.client.Configuration()
    cfg.host = k8s_server.url
    cfg.retries = 0
    return kubernetes.client.ApiClient(cfg)
