"""Security of ``segiou serve``: the bearer token, the loopback rule, the body limit, and a slow
upload that does not stall other requests."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
import tracemalloc
import urllib.parse
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from service_support import MAX_BODY_MB, npy_record, raw_request

from segiou.client import Client
from segiou.errors import PayloadError, RefusedError, UsageError
from segiou.service.server import check_bind, is_loopback, read_token
from segiou.service.wire import (
    CONTENT_JSON,
    CONTENT_MASKS_NPY,
    CONTENT_MASKS_NPZ,
    CONTENT_STATE_NPZ,
    decode_masks,
)
from segiou.testing.service import ServerProcess

TOKEN = "s3cret-token-0123456789abcdef"


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("token")
    (folder / "token").write_text(TOKEN + "\n")
    with ServerProcess(folder / "data", token_file=folder / "token") as s:
        yield s


def test_the_token_is_required_and_checked(token_server: ServerProcess) -> None:
    body = b'{"name": "t1", "labels": 3}'
    json_type = {"Content-Type": CONTENT_JSON}
    code, reply = raw_request(token_server.url, "POST", "/v1/runs", body, json_type)
    assert code == 401
    assert "needs a bearer token" in reply["message"]
    wrong = json_type | {"Authorization": "Bearer " + TOKEN[:-1] + "x"}
    code, reply = raw_request(token_server.url, "POST", "/v1/runs", body, wrong)
    assert (code, reply["message"]) == (401, "the bearer token is wrong")
    for path in ("/v1/runs", "/metrics", "/v1/runs/t1/state"):
        assert raw_request(token_server.url, "GET", path)[0] == 401
    assert raw_request(token_server.url, "GET", "/healthz")[0] == 200  # liveness stays open
    with Client(token_server.url, TOKEN, retries=0) as client:
        assert client.runs() == []  # nothing was created by the refused requests
        client.create_run("t1", 3)
        assert client.put_masks(np.zeros((2, 2), np.uint8), np.ones((2, 2), np.uint8), "k")[
            "outcome"] == "counted"  # fmt: skip
        assert client.state().n_pixels == 4
    with Client(token_server.url, "x" * 20, retries=0) as client, pytest.raises(RefusedError) as e:
        client.runs()
    assert e.value.status == 401


def test_without_a_token_only_loopback_is_served(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SEGIOU_TOKEN"}
    data = tmp_path / "never-created"
    done = subprocess.run(
        [sys.executable, "-m", "segiou", "serve", "--host", "0.0.0.0", "--port", "0",
         "--data", str(data)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "--host 0.0.0.0 is not a loopback address, and no token is set" in lines[0]
    assert "--token-file" in lines[0]
    assert not data.exists()  # refused before anything was created or bound


def test_check_bind_and_is_loopback() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("127.8.9.10")
    assert is_loopback("::1")
    assert is_loopback("[::1]")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("192.0.2.7")
    assert not is_loopback("::")
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", TOKEN)
    with pytest.raises(UsageError, match="is not a loopback address"):
        check_bind("192.0.2.7", None)


def test_tokens_must_be_long_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(UsageError, match="at least 16 printable ASCII characters"):
        read_token(short)
    wide = tmp_path / "wide"  # headers travel as latin-1: the client could never send it
    wide.write_text("sécret-token-0123456789", encoding="utf-8")
    with pytest.raises(UsageError, match="printable ASCII"):
        read_token(wide)
    with pytest.raises(UsageError, match="cannot be read"):
        read_token(tmp_path / "missing")
    monkeypatch.setenv("SEGIOU_TOKEN", TOKEN)
    assert read_token(None) == TOKEN
    (tmp_path / "good").write_text(f"  {TOKEN}\n")
    assert read_token(tmp_path / "good") == TOKEN  # the file wins over the variable
    monkeypatch.delenv("SEGIOU_TOKEN")
    assert read_token(None) is None


def test_a_body_over_the_limit_is_refused_with_413(client, run_name, snapshot, server) -> None:
    client.create_run(run_name, 3, per_image=True)
    before = snapshot(client, run_name)
    big = np.zeros((1, 1024, 1024), np.uint8)  # 2 MiB with the prediction: over 1 MiB
    with pytest.raises(RefusedError) as err:
        client.put_masks(big, big, "big")
    assert err.value.status == 413
    assert f"limit of {MAX_BODY_MB << 20:,} bytes" in str(err.value)
    # a chunked body (no Content-Length) is counted as it arrives
    parts = urllib.parse.urlsplit(server.url)
    import http.client

    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    chunks = (bytes(64 << 10) for _ in range(40))
    conn.request("PUT", f"/v1/runs/{run_name}/batches/chunked", body=chunks,
                 headers={"Content-Type": CONTENT_MASKS_NPY}, encode_chunked=True)  # fmt: skip
    assert conn.getresponse().status == 413
    conn.close()
    assert snapshot(client, run_name) == before


@pytest.mark.parametrize("form", ["masks", "state"])
def test_a_compressed_npz_inflating_past_the_limit_is_refused_with_413(
    client, run_name, snapshot, server, form: str
) -> None:
    """A deflated npz was inflated without a limit: 0.5 MB of body unpacked to 512 MiB."""
    client.create_run(run_name, 3, per_image=True)
    before = snapshot(client, run_name)
    zeros = np.zeros((1, 1024, 1024), np.uint8)  # 2 MiB inflated: over 1 MiB; ~4 KiB deflated
    buf = io.BytesIO()
    if form == "masks":
        np.savez_compressed(buf, gt=zeros, pred=zeros)
        ctype = CONTENT_MASKS_NPZ
    else:
        np.savez_compressed(buf, __state__=zeros.reshape(-1))
        ctype = CONTENT_STATE_NPZ
    assert len(buf.getvalue()) < 64 << 10
    status, reply = raw_request(server.url, "PUT", f"/v1/runs/{run_name}/batches/bomb",
                                buf.getvalue(), {"Content-Type": ctype})  # fmt: skip
    assert status == 413, reply
    assert reply["error"] == "PayloadError"
    size = 2 * (1 << 20) + 256 if form == "masks" else (1 << 20) + 128  # with .npy headers
    assert f"the npz's members hold {size:,} bytes once inflated" in reply["message"]
    assert f"limit of {MAX_BODY_MB << 20:,} bytes" in reply["message"]
    assert "--max-body-mb" in reply["message"]
    assert snapshot(client, run_name) == before
    small = np.zeros((1, 256, 256), np.uint8)  # under the limit once inflated: counted
    buf = io.BytesIO()
    np.savez_compressed(buf, gt=small, pred=small)
    status, reply = raw_request(server.url, "PUT", f"/v1/runs/{run_name}/batches/small",
                                buf.getvalue(), {"Content-Type": CONTENT_MASKS_NPZ})  # fmt: skip
    assert (status, reply["outcome"]) == (201, "counted")


def test_npz_members_are_bounded_by_the_limit_before_and_while_they_are_inflated() -> None:
    zeros = np.zeros(1 << 20, np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, gt=zeros, pred=zeros[:16])
    body = buf.getvalue()
    with pytest.raises(PayloadError, match=r"members hold 1,048,\d+ bytes once inflated") as err:
        decode_masks(body, CONTENT_MASKS_NPZ, limit=1 << 20)
    assert err.value.status == 413
    gt, _, _ = decode_masks(body, CONTENT_MASKS_NPZ, limit=2 << 20)
    assert gt.shape == zeros.shape
    # a directory understating a member's size is no way around the limit: what is inflated of
    # a member is what its .npy header declares, at most the size the directory gives
    head = npy_record("|u1", (4,), bytes(4), pad=False)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("gt.npy", head + bytes(32 << 20))  # 32 MiB more than declared
        z.writestr("pred.npy", head)
    lying = bytearray(zbuf.getvalue())
    entry = lying.index(b"PK\x01\x02")  # gt.npy's central directory entry: its file size
    lying[entry + 24 : entry + 28] = len(head).to_bytes(4, "little")
    tracemalloc.start()
    try:
        with pytest.raises(PayloadError, match=r"Bad CRC-32 for file 'gt\.npy'"):  # read to its
            decode_masks(bytes(lying), CONTENT_MASKS_NPZ, limit=1 << 20)  # stated end, no more
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20


@pytest.mark.parametrize("per_image", [False, True])
def test_masks_declaring_more_images_than_their_body_has_bytes_are_refused_at_once(
    client, run_name, snapshot, server, per_image: bool
) -> None:
    """256 bytes of masks of shape (2**40, 0, 8): the server made a label per image until it
    ran out of memory (11 GB). (10**6, 0, 8) is the same, small enough to be counted before."""
    client.create_run(run_name, 3, per_image=per_image)
    before = snapshot(client, run_name)
    for n in (10**6, 2**40):
        body = npy_record("|u1", (n, 0, 8)) * 2
        t0 = time.perf_counter()
        status, reply = raw_request(server.url, "PUT", f"/v1/runs/{run_name}/batches/k",
                                    body, {"Content-Type": CONTENT_MASKS_NPY})  # fmt: skip
        assert status == 400, reply
        assert reply["error"] == "PayloadError"
        assert (
            f"declares {n:,} images in 0 bytes of data and a body of 256 bytes"
            in (reply["message"])
        )
        assert time.perf_counter() - t0 < 5
        assert snapshot(client, run_name) == before
    body = npy_record("|u1", (256, 0, 8)) * 2  # one image a byte: counted
    status, reply = raw_request(server.url, "PUT", f"/v1/runs/{run_name}/batches/k", body,
                                {"Content-Type": CONTENT_MASKS_NPY})  # fmt: skip
    assert (status, reply["outcome"], reply["images"], reply["pixels"]) == (201, "counted", 256, 0)


def test_a_slow_upload_does_not_stall_other_requests(server, client, run_name) -> None:
    client.create_run(run_name, 3)
    parts = urllib.parse.urlsplit(server.url)
    slow = socket.create_connection((parts.hostname, parts.port), timeout=30)
    try:
        head = (f"PUT /v1/runs/{run_name}/batches/slow HTTP/1.1\r\nHost: x\r\n"
                f"Content-Type: {CONTENT_MASKS_NPY}\r\nContent-Length: 500000\r\n\r\n")  # fmt: skip
        slow.sendall(head.encode() + bytes(1000))  # and then nothing for a while
        t0 = time.perf_counter()
        for _ in range(5):
            assert client.health()["status"] == "ok"
            assert client.run_info(run_name)["batches"] == 0
        assert time.perf_counter() - t0 < 5
    finally:
        slow.close()
    assert client.run_info(run_name)["batches"] == 0  # the abandoned upload stored nothing
