"""A ``segiou serve`` process shared by the route tests (127.0.0.1, a port it picks)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")  # the service extra (part of the test extra)

from service_support import MAX_BODY_MB, raw_request

from segiou.client import Client
from segiou.testing.service import ServerProcess


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("serve"), max_body_mb=MAX_BODY_MB) as s:
        yield s


@pytest.fixture
def run_name(request: pytest.FixtureRequest) -> str:
    """A run name of its own for each test (the shared server keeps every run)."""
    tag = hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:48].strip("-") + "-" + tag


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, retries=0) as c:
        yield c


@pytest.fixture
def raw(server: ServerProcess) -> Callable[..., tuple[int, Any]]:
    """``raw(method, path, body=b"", headers=None)`` against the shared server."""
    return lambda *a, **k: raw_request(server.url, *a, **k)


def _snapshot(client: Client, run: str) -> tuple[Any, ...]:
    info = client.run_info(run)
    state = client.state(run).to_dict()
    state.pop("writer")
    return info["batches"], info["images"], info["pixels"], info["status"], state


@pytest.fixture
def snapshot() -> Callable[[Client, str], tuple[Any, ...]]:
    """``snapshot(client, run)``: what a refusal must not change (the totals, the whole state)."""
    return _snapshot
