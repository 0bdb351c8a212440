"""What per-image confusion entries cost (issue 12): memory, counting time, saved-state size.

``python benchmarks/bench_image_rows.py`` measures, for Cityscapes-like images (19 classes,
1024 x 2048) and ADE20K-like images (150 classes, 512 x 683, 8-20 classes per image):

* entries per image (non-zero cells of the image's table, with void and ignored cells);
* counting time with ``per_image=True`` against ``per_image=False`` on the same batches
  (interleaved rounds, medians of per-round differences), per image;
* memory of the entries and the saved state's size and save/load time for 5,000 Cityscapes
  and 2,000 ADE20K images: the entries of the measured images repeated (with their own names)
  up to that many images.

``pytest benchmarks/bench_image_rows.py`` (``--benchmark-disable``) runs it on tiny data.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np
import pytest
from _timing import interleaved_seconds

from segiou import ConfusionMatrix
from segiou.images import ImageRows
from segiou.testing.synthetic import cityscapes_like


def ade_like(n: int, h: int = 512, w: int = 683, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """ADE20K-like class-id masks: 150 classes, 8-20 per image in coherent regions, ~15% wrong.

    Ground truth: regions drawn per coarse cell (24 px) from the image's classes (Zipf
    weights), 255 (ADE's "other", ignored) in ~8% of the cells. Predictions: per error cell
    (12 px), a class of the image in ~12% of them, any class in ~3%.
    """
    rng = np.random.default_rng(seed)
    gt = np.empty((n, h, w), np.uint8)
    pred = np.empty_like(gt)
    cell, err_cell = 24, 12
    for i in range(n):
        present = rng.choice(150, size=rng.integers(8, 21), replace=False)
        weights = 1 / np.arange(1, present.size + 1)
        coarse = rng.choice(present, size=(h // cell + 1, w // cell + 1), p=weights / weights.sum())
        coarse[rng.random(coarse.shape) < 0.08] = 255
        g = np.kron(coarse, np.ones((cell, cell), np.uint8))[:h, :w].astype(np.uint8)
        eh, ew = h // err_cell + 1, w // err_cell + 1
        kind = rng.random((eh, ew))
        other = np.where(kind < 0.12, rng.choice(present, size=(eh, ew)),
                         rng.integers(0, 150, size=(eh, ew)))  # fmt: skip
        up = np.ones((err_cell, err_cell), np.uint8)
        kind = np.kron(kind, up)[:h, :w]
        other = np.kron(other, up)[:h, :w].astype(np.uint8)
        p = np.where(kind < 0.15, other, g).astype(np.uint8)
        p[p == 255] = rng.choice(present)
        gt[i], pred[i] = g, p
    return gt, pred


def repeated(rows: ImageRows, n: int) -> ImageRows:
    """``rows`` repeated up to ``n`` images, each with its own name."""
    parts = []
    for start in range(0, n, rows.n):
        take = min(rows.n, n - start)
        part = rows.select(np.arange(take))
        parts.append(ImageRows(rows.k, tuple(f"img_{start + i:06d}" for i in range(take)),
                               (True,) * take, part.image, part.gt, part.pred, part.count))  # fmt: skip
    return ImageRows.concat(parts, rows.k)


def measure(name: str, labels: int, gt: np.ndarray, pred: np.ndarray, n_target: int,
            batch: int, rounds: int) -> dict[str, float]:  # fmt: skip
    """Every figure of one dataset kind (see the module docstring)."""
    n = len(gt)
    names = [f"im{i}" for i in range(n)]
    with_rows = ConfusionMatrix(labels, ignore_index=255, per_image=True)
    with_rows.update(gt, pred, names=names)
    rows = with_rows.images.rows
    assert rows is not None
    per_image = rows.count.size / n

    def count(keep: bool) -> None:
        cm = ConfusionMatrix(labels, ignore_index=255, per_image=keep)
        for s in range(0, n, batch):
            cm.update(gt[s : s + batch], pred[s : s + batch],
                      names=names[s : s + batch] if keep else None)  # fmt: skip

    t = interleaved_seconds({"rows": lambda: count(True), "plain": lambda: count(False)}, rounds)
    extra = statistics.median(a - b for a, b in zip(t["rows"], t["plain"], strict=True)) / n
    plain = statistics.median(t["plain"]) / n
    big = repeated(rows, n_target)
    entry_bytes = sum(a.nbytes for a in (big.image, big.gt, big.pred, big.count))
    name_bytes = sum(sys.getsizeof(s) for s in big.names)
    cm = ConfusionMatrix(labels, ignore_index=255, per_image=True)
    cm.add_tally(_tally(big), key="all", names=list(big.names), n_images=big.n)
    t0 = time.perf_counter()
    text = json.dumps(cm.to_dict(), separators=(",", ":"))
    t_save = time.perf_counter() - t0
    t0 = time.perf_counter()
    ConfusionMatrix.from_dict(json.loads(text))
    t_load = time.perf_counter() - t0
    out = {"entries_per_image": per_image, "count_ms_per_image": plain * 1e3,
           "extra_ms_per_image": extra * 1e3, "entries_mb": entry_bytes / 1e6,
           "names_mb": name_bytes / 1e6, "state_mb": len(text) / 1e6, "save_s": t_save,
           "load_s": t_load, "images": n_target}  # fmt: skip
    print(
        f"{name}: {per_image:.1f} entries per image (measured on {n} images); counting "
        f"{out['count_ms_per_image']:.2f} ms/image without per-image rows, "
        f"{out['extra_ms_per_image']:+.2f} ms/image with them "
        f"(= {out['extra_ms_per_image'] * n_target / 1e3:+.1f} s for {n_target:,} images); "
        f"{n_target:,} images: entries {out['entries_mb']:.1f} MB + names "
        f"{out['names_mb']:.1f} MB in memory, saved state {out['state_mb']:.1f} MB "
        f"(to_dict + JSON {t_save:.2f} s, parse + load {t_load:.2f} s)"
    )
    return out


def _tally(rows: ImageRows):  # type: ignore[no-untyped-def]
    from segiou._count import Tally

    t = rows.totals()
    return Tally(t["void"], t["ignored"], t["unexpected_gt"], t["unexpected_pred"], rows,
                 dense=t["counts"])  # fmt: skip


def main() -> int:
    gt, pred = cityscapes_like(32, 1024, 2048, seed=0)
    measure("Cityscapes-like (19 classes, 1024x2048)", 19, gt, pred, 5000, batch=8, rounds=5)
    del gt, pred
    gt, pred = ade_like(64, seed=0)
    measure("ADE20K-like (150 classes, 512x683)", 150, gt, pred, 2000, batch=16, rounds=5)
    return 0


def test_image_rows_figures() -> None:
    """Runs tiny (the figures' code keeps working); the entries' count matches the tables."""
    gt, pred = ade_like(4, 64, 96, seed=1)
    out = measure("ADE20K-like, tiny", 150, gt, pred, 10, batch=2, rounds=1)
    assert out["entries_per_image"] > 8
    assert out["images"] == 10


@pytest.mark.parametrize("n", [1, 7])
def test_repeated_keeps_every_entry(n: int) -> None:
    gt, pred = cityscapes_like(3, 32, 64, seed=2)
    cm = ConfusionMatrix(19, ignore_index=255, per_image=True).update(gt, pred, key="a")
    rows = cm.images.rows
    assert rows is not None
    big = repeated(rows, n)
    assert big.n == n
    assert big.count.sum() == sum(rows.select([i % 3]).count.sum() for i in range(n))


if __name__ == "__main__":
    sys.exit(main())
