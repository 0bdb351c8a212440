"""Boundary IoU benchmark (issue 13): segiou's bit-set erosion vs plain counting and scipy.

Two ways to run it:

* ``python benchmarks/bench_boundary.py`` prints ns/pixel on Cityscapes-like 1024 x 2048 masks
  (19 classes + 255) for: plain counting (``update`` of an accumulator built once, one kernel
  thread, as an engine task counts), counting with Boundary IoU (width 2% of the diagonal:
  46 px), and the plain reference (scipy's ``binary_erosion`` per class, as the paper's code
  erodes with OpenCV), all in the same run, interleaved, medians of per-round ratios. Targets:
  Boundary IoU at least 10x faster than the reference, counting with it within 3x of counting
  without it.
* ``pytest benchmarks/bench_boundary.py`` runs the same cases under pytest-benchmark, one group,
  the ratio in ``extra_info``; ``--benchmark-disable`` (CI) runs each once on small data and
  checks the numbers against the reference.
"""

from __future__ import annotations

import statistics
import sys

import numpy as np
import pytest
from _timing import interleaved_seconds, median_ratio

from segiou import ConfusionMatrix
from segiou.testing.synthetic import cityscapes_like

K = 19
TARGET_VS_SCIPY = 10.0  # x faster than scipy's erosion per class
TARGET_VS_COUNT = 3.0  # counting with Boundary IoU within 3x of counting without


def scipy_reference(gt: np.ndarray, pred: np.ndarray, d: int) -> np.ndarray:
    """The paper's way: per image and class, pad, erode d times (3 x 3), subtract."""
    from scipy.ndimage import binary_erosion

    out = np.zeros((3, K), dtype=np.int64)
    square = np.ones((3, 3), dtype=bool)
    for g, p in zip(gt, pred, strict=True):
        valid = g < K
        for c in range(K):
            sides = []
            for m in (g == c, p == c):
                er = binary_erosion(np.pad(m, 1), square, iterations=d)[1:-1, 1:-1]
                sides.append(m & ~er)
            out[:, c] += [(sides[0] & sides[1] & valid).sum(), (sides[0] & valid).sum(),
                          (sides[1] & valid).sum()]  # fmt: skip
    return out


def counters(boundary: object) -> ConfusionMatrix:
    """An accumulator built once (one kernel thread, as an engine task counts)."""
    return ConfusionMatrix(K, ignore_index=255, threads=1, boundary=boundary)


def main() -> int:
    n, h, w = 4, 1024, 2048
    gt, pred = cityscapes_like(n, h, w, seed=0)
    px = gt.size
    d = round(0.02 * np.hypot(h, w))
    plain, bnd = counters(None), counters(True)
    t = interleaved_seconds(
        {
            "count": lambda: plain.update(gt, pred),
            "count+boundary": lambda: bnd.update(gt, pred),
            "scipy": lambda: scipy_reference(gt[:1], pred[:1], d),
        },
        rounds=5,
    )
    count = statistics.median(t["count"])
    both = statistics.median(t["count+boundary"])
    ref = statistics.median(t["scipy"])
    # the scipy reference ran on one image of the n: compare per pixel
    scipy_per = [s / (px / n) for s in t["scipy"]]
    boundary_per = [(b - c) / px for b, c in zip(t["count+boundary"], t["count"], strict=True)]
    vs_scipy = median_ratio(scipy_per, boundary_per)
    vs_count = median_ratio(t["count+boundary"], t["count"])
    ok = vs_scipy >= TARGET_VS_SCIPY and vs_count <= TARGET_VS_COUNT
    print(f"Cityscapes-like masks {n} x {h} x {w}, width {d} px (2% of the diagonal)")
    print(f"  plain counting (1 thread):        {count / px * 1e9:7.3f} ns/px")
    print(f"  counting + Boundary IoU:          {both / px * 1e9:7.3f} ns/px "
          f"({vs_count:.2f}x counting; target <= {TARGET_VS_COUNT:.0f}x)")  # fmt: skip
    print(f"  Boundary IoU alone (difference):  {statistics.median(boundary_per) * 1e9:7.3f} ns/px")
    print(f"  scipy erosion per class:          {ref / (px / n) * 1e9:7.1f} ns/px "
          f"(segiou's Boundary IoU {vs_scipy:.0f}x faster; target >= {TARGET_VS_SCIPY:.0f}x)")  # fmt: skip
    end_to_end(gt, pred)
    want = scipy_reference(gt[:1], pred[:1], d)
    one = counters(True)
    one.update(gt[:1], pred[:1])
    same = bool(np.array_equal(one.extras.boundary_total, want))
    print(f"  counts equal the reference: {same}; {'PASS' if ok and same else 'FAIL'}")
    return 0 if ok and same else 1


def end_to_end(gt: np.ndarray, pred: np.ndarray) -> None:
    """The engine from a zstd Zarr store (one chunk per image), with and without (no target)."""
    import tempfile

    from segiou.io.zarr import create_stack
    from segiou.parallel import count_stores

    n, h, w = gt.shape
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in (("gt", gt), ("pred", pred)):
            create_stack(f"{tmp}/s.zarr", n=n, height=h, width=w, path=name)[:] = data

        def run(boundary: object) -> object:
            return count_stores(f"{tmp}/s.zarr/gt", f"{tmp}/s.zarr/pred", labels=K,
                                ignore_index=255, boundary=boundary, scheduler="threads")  # fmt: skip

        t = interleaved_seconds({"plain": lambda: run(None), "boundary": lambda: run(True)}, 3)
    px = gt.size
    print(f"  end to end from Zarr (threads): plain {statistics.median(t['plain']) / px * 1e9:.3f}"
          f" ns/px, with Boundary IoU {statistics.median(t['boundary']) / px * 1e9:.3f} ns/px "
          f"({median_ratio(t['boundary'], t['plain']):.2f}x)")  # fmt: skip


# -- pytest-benchmark -------------------------------------------------------------------------
_MEDIANS: dict[str, float] = {}


@pytest.fixture(scope="module")
def data(request: pytest.FixtureRequest) -> tuple[np.ndarray, np.ndarray, int]:
    small = request.config.getoption("benchmark_disable")
    h, w = (64, 128) if small else (1024, 2048)
    gt, pred = cityscapes_like(1 if small else 2, h, w, seed=0)
    return gt, pred, round(0.02 * np.hypot(h, w))


@pytest.mark.parametrize("method", ["count", "count+boundary", "scipy"])
def test_boundary(benchmark, data, method: str) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("scipy")
    gt, pred, d = data
    benchmark.group = "boundary"
    if method == "scipy":
        out = benchmark(scipy_reference, gt, pred, d)
    else:
        cm = counters(True if method == "count+boundary" else None)
        benchmark(cm.update, gt, pred)
        out = None
        if method == "count+boundary":  # check the numbers once, on a fresh accumulator
            fresh = counters(True)
            fresh.update(gt, pred)
            out = fresh.extras.boundary_total
    if out is not None:
        np.testing.assert_array_equal(out, scipy_reference(gt, pred, d))
    if benchmark.stats is not None:
        med = benchmark.stats.stats.median
        _MEDIANS[method] = med
        benchmark.extra_info["ns_per_px"] = med / gt.size * 1e9
        if method == "count+boundary" and "count" in _MEDIANS:
            benchmark.extra_info["x_count"] = med / _MEDIANS["count"]


if __name__ == "__main__":
    sys.exit(main())
