"""Fixtures for the sink tests (the test API server, ``k8s_server``, is tests/conftest.py's)."""

from __future__ import annotations

import pytest

from tests.k8s_api_server import FakeKubeAPI


@pytest.fixture
def api_client(k8s_server: FakeKubeAPI) -> object:
    """The real kubernetes ApiClient, talking HTTP to the test server."""
    import kubernetes

    cfg = kubernetes.client.Configuration()
    cfg.host = k8s_server.url
    cfg.retries = 0
    return kubernetes.client.ApiClient(cfg)
