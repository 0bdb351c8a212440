"""The ledger in process (no HTTP): what it keeps in memory, and what it counts, per batch."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

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
