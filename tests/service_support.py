"""Helpers of the service tests (tests/service) and the service benchmark."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from pathlib import Path
from typing import Any

#: The shared test server's body limit (MiB): small, so that 413 needs no large body.
MAX_BODY_MB = 1


def raw_request(
    url: str, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """One raw request (no client-side checks, no retries): status and the parsed reply."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, data


def npy_record(descr: str, shape: tuple[int, ...], data: bytes = b"", *, pad: bool = True) -> bytes:
    """A ``.npy`` record with any header (numpy writes no negative dimension), padded to 64.

    ``pad=False``: without the padding after the data, as an npz member (``np.savez``).
    """
    head = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    head += b" " * (-(10 + len(head) + 1) % 64) + b"\n"
    rec = b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head + data
    return rec + b"\0" * (-len(rec) % 64 if pad else 0)


def batches_after_start(folder: Path) -> int:
    """Open the service's database ``folder/x.db`` as a restart would; return its one run's batches."""
    from segiou.service.storage import SQLiteStorage

    s = SQLiteStorage(folder / "x.db")
    try:
        (run,) = s.load()
        assert len(run.batches) == run.record.batches
        return run.record.batches
    finally:
        s.close()
