"""Small batches of many classes: what an update (and the Dask engine) costs per batch.

``python benchmarks/bench_many_classes.py`` prints, per case, segiou's median time and peak
memory against a baseline measured in the same run (interleaved rounds, median of per-round
ratios):

* ``update()`` of an accumulator built once, against the numpy ``bincount`` idiom adding the
  batch into a ``K x K`` matrix (``np.bincount(K * gt + pred, minlength=K * K)``: a table of
  every cell per call, as segiou made before it counted such batches into their cells);
* ``evaluate_zarr`` of a small store (synchronous scheduler), against reading both stores.

``pytest benchmarks/bench_many_classes.py --benchmark-disable`` (CI) runs each case once, small,
and checks that segiou counts what the baseline counts.
"""

from __future__ import annotations

import argparse
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr
from _timing import interleaved_seconds, median_ratio

from segiou import ConfusionMatrix
from segiou.parallel import evaluate_zarr


def idiom_into(acc: np.ndarray, gt: np.ndarray, pred: np.ndarray) -> None:
    """The numpy idiom: a ``K*K`` bincount per call, added into the accumulator."""
    k = acc.shape[0]
    acc += np.bincount(k * gt.reshape(-1).astype(np.int64) + pred.reshape(-1),
                       minlength=k * k).reshape(k, k)  # fmt: skip


def masks(k: int, shape: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ground truth of random classes; predictions right on 70% of the pixels."""
    rng = np.random.default_rng(seed)
    gt = rng.integers(0, k, shape).astype(np.uint16)
    pred = np.where(rng.random(shape) < 0.7, gt, rng.integers(0, k, shape)).astype(np.uint16)
    return gt, pred


def peak_mb(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def update_case(k: int, shape: tuple[int, ...], per_image: bool, rounds: int) -> dict[str, float]:
    gt, pred = masks(k, shape)
    cm = ConfusionMatrix(k, per_image=per_image)
    acc = np.zeros((k, k), np.int64)
    times = interleaved_seconds({"segiou": lambda: cm.update(gt, pred),
                                 "idiom": lambda: idiom_into(acc, gt, pred)}, rounds)  # fmt: skip
    return {
        "segiou_ms": 1e3 * float(np.median(times["segiou"])),
        "idiom_ms": 1e3 * float(np.median(times["idiom"])),
        "ratio": median_ratio(times["segiou"], times["idiom"]),
        "segiou_peak_mb": peak_mb(lambda: cm.update(gt, pred)),
        "idiom_peak_mb": peak_mb(lambda: idiom_into(acc, gt, pred)),
    }


def store_case(k: int, shape: tuple[int, int, int], rounds: int) -> dict[str, float]:
    gt, pred = masks(k, shape, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, a in (("gt", gt), ("pred", pred)):
            z = zarr.create_array(str(Path(tmp, f"{name}.zarr")), shape=a.shape,
                                  chunks=(1, *a.shape[1:]), dtype=a.dtype)  # fmt: skip
            z[:] = a
            paths.append(str(Path(tmp, f"{name}.zarr")))

        def run() -> None:
            evaluate_zarr(*paths, labels=k, scheduler="synchronous")

        def read() -> None:
            for p in paths:
                zarr.open_array(p, mode="r")[:]

        times = interleaved_seconds({"segiou": run, "read": read}, rounds)
        return {
            "segiou_s": float(np.median(times["segiou"])),
            "read_s": float(np.median(times["read"])),
            "ratio": median_ratio(times["segiou"], times["read"]),
            "segiou_peak_mb": peak_mb(run),
            "matrix_mb": k * k * 8 / 2**20,
        }


UPDATES = [(4096, (4, 4), False), (4096, (4, 4), True), (4096, (8, 64, 64), False),
           (1024, (64, 64), False), (1024, (16, 32, 32), True), (300, (64, 64), False),
           (510, (64, 64), False)]  # fmt: skip
STORES = [(4096, (40, 64, 64)), (1024, (40, 128, 128))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print("update() of one batch, against the numpy idiom into a K x K matrix")
    for k, shape, per in UPDATES:
        r = update_case(k, shape, per, args.rounds)
        print(f"  K={k:5d} batch {shape!s:14s} per_image={per!s:5s}: {r['segiou_ms']:8.3f} ms "
              f"(idiom {r['idiom_ms']:8.3f} ms, segiou/idiom {r['ratio']:.3f}); peak "
              f"{r['segiou_peak_mb']:.1f} MB (idiom {r['idiom_peak_mb']:.1f} MB)")  # fmt: skip
    print("evaluate_zarr (synchronous), against reading both stores")
    for k, shape in STORES:
        r = store_case(k, shape, max(3, args.rounds // 2))
        print(f"  K={k:5d} store {shape!s:14s}: {r['segiou_s']:.3f} s (read {r['read_s']:.3f} s, "
              f"{r['ratio']:.1f}x); peak {r['segiou_peak_mb']:.1f} MB (the accumulator's "
              f"matrix: {r['matrix_mb']:.1f} MB)")  # fmt: skip
    return 0


@pytest.mark.parametrize(
    ("k", "shape", "per_image"), [(300, (4, 4), False), (300, (2, 4, 4), True)]
)
def test_updates_count_what_the_idiom_counts(k: int, shape: tuple[int, ...], per_image: bool):
    gt, pred = masks(k, shape)
    cm = ConfusionMatrix(k, per_image=per_image).update(gt, pred)
    acc = np.zeros((k, k), np.int64)
    idiom_into(acc, gt, pred)
    np.testing.assert_array_equal(cm.counts, acc)
    assert update_case(k, shape, per_image, rounds=1)["ratio"] > 0


def test_the_engine_counts_what_the_idiom_counts(tmp_path: Path) -> None:
    k = 300
    gt, pred = masks(k, (3, 8, 8), seed=1)
    paths = []
    for name, a in (("gt", gt), ("pred", pred)):
        z = zarr.create_array(str(tmp_path / f"{name}.zarr"), shape=a.shape, chunks=(1, 8, 8),
                              dtype=a.dtype)  # fmt: skip
        z[:] = a
        paths.append(str(tmp_path / f"{name}.zarr"))
    acc = np.zeros((k, k), np.int64)
    idiom_into(acc, gt, pred)
    np.testing.assert_array_equal(evaluate_zarr(*paths, labels=k).counts, acc)
    assert store_case(k, (2, 8, 8), rounds=1)["ratio"] > 0


if __name__ == "__main__":
    raise SystemExit(main())
