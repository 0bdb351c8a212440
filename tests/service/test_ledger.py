"""The ledger in process (no HTTP): what it keeps in memory, and what it counts, per batch."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.service import _totals
from segiou.service._ledger import CreateRun, Ledger, Run, run_settings
from segiou.service.storage import SQLiteStorage
from segiou.service.wire import encode_masks


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "db.sqlite"


@pytest.fixture
def ledger(db: Path) -> Iterator[Ledger]:
    led = Ledger(SQLiteStorage(db))
    yield led
    led.stop()
    led.storage.close()


def create(ledger: Ledger, name: str, k: int, **options: object) -> Run:
    settings, template = run_settings({"name": name, "labels": k, **options})
    ledger.submit(CreateRun(settings, template, time.time())).result(timeout=60)
    return ledger.runs[name]


def put_masks(
    ledger: Ledger, run: Run, key: str, gt: np.ndarray, pred: np.ndarray
) -> dict[str, object]:
    chunks, _, ctype = encode_masks(gt, pred)
    body = b"".join(bytes(c) for c in chunks)
    return ledger.submit(ledger.prepare(run, key, ctype, body)).result(timeout=60)


def tiny(k: int, i: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.full((1, 2, 2), i % k, np.uint16)
    return g, np.roll(g, 1)


def test_waiting_states_and_a_first_read_stay_within_a_byte_budget(
    db: Path, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of many classes kept each committed batch's whole K x K state until the next read
    or until 256 waited (128 MiB a batch at K=4096: 34 GB for 256), and its first read after
    a restart decoded every stored state before merging any (2 GB for 6 batches)."""
    k, n = 256, 24  # a state holds 512 KiB of counts; the budget below holds about three
    monkeypatch.setattr(_totals, "FOLD_BYTES", 2 << 20)
    run = create(ledger, "wide", k)
    local = ConfusionMatrix(k)
    put_masks(ledger, run, "first", *tiny(k, 0))
    local.update(*tiny(k, 0), key="first")
    ledger.total("wide")  # the first read: later batches wait in memory
    one = _totals.footprint(k, 0)
    for i in range(1, n):
        put_masks(ledger, run, f"k{i}", *tiny(k, i))
        local.update(*tiny(k, i), key=f"k{i}")
        waiting, size = run.sums.pending
        assert size <= 2 * _totals.FOLD_BYTES + one, (i, waiting, size)
    deadline = time.monotonic() + 30
    while run.sums.pending[1] >= _totals.FOLD_BYTES and time.monotonic() < deadline:
        time.sleep(0.05)  # the fold thread the last commit started
    assert run.sums.pending[1] < _totals.FOLD_BYTES
    assert ledger.total("wide") == local
    assert run.sums.pending == (0, 0)
    # a restart: the first read merges the stored states a few at a time
    again = Ledger(SQLiteStorage(db))
    try:
        tracemalloc.start()
        try:
            total = again.total("wide")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert total == local
        assert peak < 4 * _totals.FOLD_BYTES + 4 * one, peak  # not n states at once
    finally:
        again.stop()
        again.storage.close()


async def asgi(app: object, method: str, path: str, body: bytes, ctype: str) -> tuple[int, Any]:
    """One request straight into the ASGI app: status and parsed JSON reply."""
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return chunks.pop() if chunks else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    headers = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "query_string": b"", "headers": headers, "http_version": "1.1", "scheme": "http",
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": ""}  # fmt: skip
    await app(scope, receive, send)  # type: ignore[operator]
    return sent[0]["status"], json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def test_a_retry_is_not_counted_again_nor_beside_its_first_attempt(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client whose batch takes long to count (per-image rows of 4,096 classes: 0.3 s an
    image) times out and sends it again: each attempt was counted in full, in parallel on the
    worker threads, before the writer found it a duplicate."""
    from segiou.service._metrics import Metrics
    from segiou.service.app import create_app

    run = create(ledger, "slow", 3, per_image=True)
    app = create_app(ledger, metrics=Metrics(ledger.open_runs), workers=2)
    counted: list[str] = []
    prepare = ledger.prepare

    def slow_prepare(*args: Any) -> Any:
        counted.append(args[1])
        time.sleep(0.5)  # a long count: the retries arrive meanwhile
        return prepare(*args)

    monkeypatch.setattr(ledger, "prepare", slow_prepare)
    g = np.array([[[0, 1], [2, 1]]], np.uint8)
    chunks, _, ctype = encode_masks(g, g)
    body = b"".join(bytes(c) for c in chunks)
    path = "/v1/runs/slow/batches/k"

    async def attempts() -> list[tuple[int, Any]]:
        first = asyncio.ensure_future(asgi(app, "PUT", path, body, ctype))
        await asyncio.sleep(0.1)  # being counted
        retries = [asgi(app, "PUT", path, body, ctype) for _ in range(3)]
        return [await first, *await asyncio.gather(*retries)]

    replies = asyncio.run(attempts())
    assert counted == ["k"]  # counted once; the retries waited for it
    assert [s for s, _ in replies] == [201, 200, 200, 200]
    assert [r["outcome"] for _, r in replies] == ["counted"] + ["duplicate"] * 3
    assert all(r["pixels"] == 4 and r["images"] == 1 and r["batches"] == 1 for _, r in replies)
    status, reply = asyncio.run(asgi(app, "PUT", path, body, ctype))  # later: known at once
    assert (status, reply["outcome"], counted) == (200, "duplicate", ["k"])
    # other bytes under the key are counted and compared by content: 409 for other content ...
    other, _, _ = encode_masks(g[:, ::-1], g)
    status, reply = asyncio.run(asgi(app, "PUT", path, b"".join(bytes(c) for c in other), ctype))
    assert (status, reply["error"]) == (409, "ConflictError")
    # ... and a duplicate for the same content in another form (then known by its bytes too)
    state = ConfusionMatrix(3, per_image=True).update(g, g, key="k")
    as_json = json.dumps(state.to_dict()).encode()
    for _ in range(2):
        status, reply = asyncio.run(asgi(app, "PUT", path, as_json, "application/json"))
        assert (status, reply["outcome"]) == (200, "duplicate")
    assert counted == ["k", "k", "k"]
    assert ledger.total("slow") == state
    assert run.record.batches == 1


def test_a_small_body_that_inflates_to_much_is_read_off_the_event_loop(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """State bodies of up to 64 KiB were decoded on the event loop; a deflated npz
    (np.savez_compressed, accepted) of 38 KB inflates to 33 MB at 2,048 classes: decoding,
    checking and serialising it again held every other request (/healthz) for 3.4 s."""
    import io
    import threading

    from segiou.service._metrics import Metrics
    from segiou.service.app import create_app
    from segiou.service.wire import CONTENT_STATE_NPZ, _pack, encode_state

    k = 256
    create(ledger, "wide", k)
    app = create_app(ledger, metrics=Metrics(ledger.open_runs), workers=1)
    where: dict[str, str] = {}
    prepare = ledger.prepare

    def watched(*args: Any) -> Any:
        where[args[1]] = threading.current_thread().name
        return prepare(*args)

    monkeypatch.setattr(ledger, "prepare", watched)
    loop_thread = threading.current_thread().name  # asyncio.run runs the loop here

    def state(key: str) -> ConfusionMatrix:
        return ConfusionMatrix(k).update(*tiny(k, 1), key=key)

    arrays: dict[str, np.ndarray] = {}
    skeleton = json.dumps(_pack(state("bomb").to_dict(), arrays)).encode()
    buf = io.BytesIO()
    np.savez_compressed(buf, __state__=np.frombuffer(skeleton, np.uint8), **arrays)
    bomb = buf.getvalue()
    assert len(bomb) < 64 << 10 < sum(a.nbytes for a in arrays.values())
    small, _ = encode_state(ConfusionMatrix(3).to_dict(), binary=True)  # a run of 3 classes
    create(ledger, "narrow", 3)

    async def puts() -> list[int]:
        return [
            (await asgi(app, "PUT", "/v1/runs/wide/batches/bomb", bomb, CONTENT_STATE_NPZ))[0],
            (await asgi(app, "PUT", "/v1/runs/narrow/batches/small", small, CONTENT_STATE_NPZ))[0],
        ]

    assert asyncio.run(puts()) == [201, 201]
    assert where["bomb"] != loop_thread  # on a worker: the loop answered others meanwhile
    assert where["small"] == loop_thread  # a light body stays on the loop (no thread hop)
    assert ledger.total("wide") == state("bomb")


def test_numbered_sees_every_width_an_evaluator_numbers(db: Path, ledger: Ledger) -> None:
    """A run's numbered held numbers of up to 18 digits, an evaluator numbers partials up to 19:
    one that started at 10**18 - 1 sealed p.1000000000000000000, which numbered ignored, so the
    same evaluator restarted numbered it again and was refused (409)."""
    from segiou.service.wire import CONTENT_JSON

    run = create(ledger, "r", 3)
    keys = {"p": 10**18, "q": 10**19 - 1, "wide": 10**25}
    for i, (prefix, n) in enumerate(keys.items()):
        state = ConfusionMatrix(3).update(*tiny(3, i), key=f"{prefix}/{n}")
        body = json.dumps(state.to_dict()).encode()
        ledger.submit(ledger.prepare(run, f"{prefix}.{n}", CONTENT_JSON, body)).result(timeout=60)
    assert run.summary()["numbered"] == {"batches": keys, "inner": keys}
    again = Ledger(SQLiteStorage(db))  # rebuilt from the database alike
    try:
        assert again.runs["r"].summary()["numbered"] == {"batches": keys, "inner": keys}
    finally:
        again.stop()
        again.storage.close()


@pytest.mark.parametrize("fails", ["never", "reading", "folding"])
def test_batches_committed_during_a_first_read_count_once(
    db: Path, ledger: Ledger, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """The first read after a restart merges the stored states outside the run's lock: a batch
    committed meanwhile is in the total once, and once too after a first read that failed (no
    memory) while reading the stored states or folding that batch in, and is read again."""
    run = create(ledger, "r", 3)
    local = ConfusionMatrix(3)
    for i in range(3):
        put_masks(ledger, run, f"k{i}", *tiny(3, i))
        local.update(*tiny(3, i), key=f"k{i}")
    ledger.stop()
    ledger.storage.close()
    again = Ledger(SQLiteStorage(db))
    try:
        late = again.runs["r"]
        stored, merge_all = _totals._stored, _totals.merge_all
        calls: list[str] = []

        def reading(blob: bytes, where: str) -> tuple[ConfusionMatrix, int]:
            if not calls:  # a batch committed while the first read merges
                calls.append("late")
                put_masks(again, late, "late", *tiny(3, 1))
                if fails == "reading":
                    raise MemoryError
            return stored(blob, where)

        def folding(cms: list[ConfusionMatrix]) -> ConfusionMatrix:
            if fails == "folding" and "late" in cms[0].keys and "folded" not in calls:
                calls.append("folded")
                raise MemoryError
            return merge_all(cms)

        monkeypatch.setattr(_totals, "_stored", reading)
        monkeypatch.setattr(_totals, "merge_all", folding)
        local.update(*tiny(3, 1), key="late")
        if fails != "never":
            with pytest.raises(MemoryError):
                again.total("r")
        assert again.total("r") == local
        assert again.total("r") == local  # and later reads too
    finally:
        again.stop()
        again.storage.close()
