"""The fast Zarr reader and its fallback to zarr's public API give the same counts and errors.

``segiou.io._zarr_fast`` holds every zarr internal the reader uses. Here each internal is
switched off in turn (as a zarr release that moved it would), and the readers must still read
the same values, refuse the same missing ground-truth chunks and report the same corrupt ones,
for a local store and for an fsspec store (``memory://``, read through the store's async API).
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.errors import ChunkError
from segiou.io import _zarr_fast
from segiou.io.zarr import create_stack, open_masks
from segiou.parallel import count_stores

#: Every combination of internals switched off (all on is the fast path itself).
SWITCHES = [
    dict(zip(("sync", "prototype", "metadata"), on, strict=True))
    for on in itertools.product([True, False], repeat=3)
]


@pytest.fixture(params=SWITCHES, ids=lambda s: "+".join(k for k, v in s.items() if v) or "none")
def internals(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    for name, on in request.param.items():
        monkeypatch.setattr(_zarr_fast.INTERNALS, name, on)
    return request.param


def _masks(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gt = rng.integers(0, 4, size=(3, 20, 24), dtype=np.uint8)
    pred = np.where(rng.random(gt.shape) < 0.3, rng.integers(0, 4, gt.shape), gt).astype(np.uint8)
    gt[0, :3, :5] = 255
    return gt, pred


def _write(url: str, data: np.ndarray) -> None:
    arr = create_stack(url, n=data.shape[0], height=data.shape[1], width=data.shape[2],
                       chunks=(8, 10))  # fmt: skip
    arr[:] = data


@pytest.mark.parametrize("where", ["local", "memory"])
def test_every_reader_counts_the_same(
    tmp_path: Path, where: str, internals: dict[str, bool]
) -> None:
    gt, pred = _masks()
    base = str(tmp_path) if where == "local" else f"memory://{uuid.uuid4().hex}"
    _write(f"{base}/gt.zarr", gt)
    _write(f"{base}/pred.zarr", pred)
    fast = _zarr_fast.INTERNALS.metadata and (where == "local" or _zarr_fast.INTERNALS.prototype)
    ms = open_masks(f"{base}/gt.zarr")
    assert (ms.arrays[0].read_spec.codecs is not None) == _zarr_fast.INTERNALS.metadata
    assert (ms.arrays[0]._decoder().codecs is not None) == fast  # which path is exercised
    cm = count_stores(f"{base}/gt.zarr", f"{base}/pred.zarr", labels=4, ignore_index=255,
                      scheduler="synchronous")  # fmt: skip
    ref = ConfusionMatrix(4, ignore_index=255).update(gt, pred)
    np.testing.assert_array_equal(cm.counts, ref.counts)
    assert cm.n_ignored == ref.n_ignored


def test_chunk_keys_come_from_the_metadata_document_without_the_encoder(tmp_path: Path) -> None:
    import zarr

    for fmt, chunks in ((3, (1, 8, 10)), (2, (1, 8, 10))):
        arr = zarr.create_array(store=str(tmp_path / f"v{fmt}.zarr"), shape=(2, 16, 20),
                                chunks=chunks, dtype="uint8", zarr_format=fmt)  # fmt: skip
        fast = _zarr_fast._chunk_key_parts(arr)
        _zarr_fast.INTERNALS.metadata = False
        try:
            fallback = _zarr_fast._chunk_key_parts(arr)
        finally:
            _zarr_fast.INTERNALS.metadata = True
        assert fast == fallback == (("c/", "/") if fmt == 3 else ("", "."))


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_missing_ground_truth_chunk_is_refused_by_every_reader(
    tmp_path: Path, where: str, internals: dict[str, bool]
) -> None:
    import fsspec

    gt, pred = _masks(1)
    base = str(tmp_path) if where == "local" else f"memory://{uuid.uuid4().hex}"
    _write(f"{base}/gt.zarr", gt)
    _write(f"{base}/pred.zarr", pred)
    fs, root = fsspec.core.url_to_fs(f"{base}/gt.zarr")
    fs.rm(f"{root}/c/1/1/1")  # image 1, chunk row 1, column 1
    with pytest.raises(ChunkError, match=r"chunk \(1, 1, 1\)"):
        count_stores(f"{base}/gt.zarr", f"{base}/pred.zarr", labels=4, ignore_index=255,
                     scheduler="synchronous")  # fmt: skip
    filled = count_stores(f"{base}/gt.zarr", f"{base}/pred.zarr", labels=4, ignore_index=255,
                          missing_gt_chunks="fill", scheduler="synchronous")  # fmt: skip
    gt[1, 8:16, 10:20] = 0  # the fill value
    ref = ConfusionMatrix(4, ignore_index=255).update(gt, pred)
    np.testing.assert_array_equal(filled.counts, ref.counts)


def test_run_sync_falls_back_to_a_private_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    async def answer() -> int:
        return 42

    assert _zarr_fast.run_sync(answer()) == 42
    monkeypatch.setattr(_zarr_fast.INTERNALS, "sync", False)
    assert _zarr_fast.run_sync(answer()) == 42
