"""Pairwise box IoU benchmark: segiou's Numba kernel vs the plain numpy broadcast formula.

Two ways to run it:

* ``python benchmarks/bench_boxes.py`` prints, for 10,000 x 10,000 boxes in float32 and
  float64, the median time of each, the ratio, Mpairs/s, peak memory, a chunked-numpy variant
  (the best vectorised numpy can do) and the first-call compile times (cold and warm cache).
* ``pytest benchmarks/bench_boxes.py`` runs segiou and the numpy baseline under pytest-benchmark
  in one group per dtype, with the ratio, Mpairs/s and peak memory in ``extra_info``;
  ``--benchmark-disable`` (CI) runs each once on 500 x 500 boxes so the file keeps working.

Memory: a 10,000 x 10,000 float64 result is 800 MB; the broadcast baseline also holds several
(N, M, 2) temporaries, about 6 GB at its peak in float64.
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest
from _timing import first_call_seconds, median_seconds

from segiou.geometry.boxes import box_iou

N = 10_000
N_SMALL = 500


def numpy_broadcast_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The usual vectorised formula (torchvision's box_iou written in numpy)."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def numpy_chunked_iou(a: np.ndarray, b: np.ndarray, rows: int = 64) -> np.ndarray:
    """Vectorised numpy done carefully: row blocks, no (N, M, 2) temporaries, in-place ufuncs."""
    n, m = len(a), len(b)
    out = np.empty((n, m), a.dtype)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    t1, t2 = np.empty((rows, m), a.dtype), np.empty((rows, m), a.dtype)
    for s in range(0, n, rows):
        e = min(s + rows, n)
        blk, o, u, v = a[s:e], out[s:e], t1[: e - s], t2[: e - s]
        np.minimum(blk[:, 2:3], b[:, 2], out=u)
        np.maximum(blk[:, 0:1], b[:, 0], out=v)
        np.subtract(u, v, out=u)
        np.maximum(u, 0, out=u)
        np.minimum(blk[:, 3:4], b[:, 3], out=o)
        np.maximum(blk[:, 1:2], b[:, 1], out=v)
        np.subtract(o, v, out=o)
        np.maximum(o, 0, out=o)
        np.multiply(u, o, out=o)
        np.add(area_a[s:e, None], area_b, out=u)
        np.subtract(u, o, out=u)
        np.divide(o, u, out=o, where=u > 0)
    return out


def segiou_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(box_iou(a, b))


def make_boxes(n: int, dtype: type, seed: int) -> np.ndarray:
    """Seeded boxes in a 1000 x 1000 image, sides up to 100: about 1% of pairs overlap."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 1000, (n, 2))
    wh = rng.uniform(1, 100, (n, 2))
    return np.concatenate([xy, xy + wh], axis=1).astype(dtype)


def peak_mb(fn: Callable[[], object]) -> float:
    """Peak traced allocation of one call, in MB (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def compile_times() -> dict[str, float]:
    """First-call time in a fresh process: empty Numba cache (cold), then populated (warm)."""
    code = (
        "import time, numpy as np; t0 = time.perf_counter(); from segiou.geometry.boxes import box_iou; "
        "a = np.zeros((3, 4)); box_iou(a, a); box_iou(a.astype(np.float32), a.astype(np.float32)); "
        "print(time.perf_counter() - t0)"
    )
    return first_call_seconds(code)


def main() -> int:
    pairs = N * N
    for dtype in (np.float32, np.float64):
        a, b = make_boxes(N, dtype, 0), make_boxes(N, dtype, 1)
        seg = median_seconds(lambda: segiou_iou(a, b), 5)  # noqa: B023
        chunk = median_seconds(lambda: numpy_chunked_iou(a, b), 3)  # noqa: B023
        base = median_seconds(lambda: numpy_broadcast_iou(a, b), 3)  # noqa: B023
        mem_seg = peak_mb(lambda: segiou_iou(a, b))  # noqa: B023
        mem_base = peak_mb(lambda: numpy_broadcast_iou(a, b))  # noqa: B023
        print(
            f"{np.dtype(dtype).name} {N} x {N}: segiou {seg:.3f} s ({pairs / seg / 1e6:.0f} "
            f"Mpairs/s, peak {mem_seg:.0f} MB) | numpy broadcast {base:.3f} s (peak "
            f"{mem_base:.0f} MB) | {base / seg:.1f}x faster | chunked numpy {chunk:.3f} s "
            f"({chunk / seg:.1f}x segiou)"
        )
    ct = compile_times()
    print(f"first call incl. import: cold cache {ct['cold']:.2f} s, warm cache {ct['warm']:.2f} s")
    return 0


# -- pytest-benchmark -------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["float32", "float64"])
def boxes(request: pytest.FixtureRequest) -> tuple[str, int, np.ndarray, np.ndarray]:
    n = N_SMALL if request.config.getoption("benchmark_disable") else N
    dtype = np.dtype(request.param).type
    return request.param, n, make_boxes(n, dtype, 0), make_boxes(n, dtype, 1)


_MEDIANS: dict[tuple[str, str], float] = {}


@pytest.mark.parametrize("method", ["numpy_broadcast", "segiou"])
def test_pairwise_iou(benchmark, boxes, method: str) -> None:  # type: ignore[no-untyped-def]
    name, n, a, b = boxes
    fn = {"numpy_broadcast": numpy_broadcast_iou, "segiou": segiou_iou}[method]
    benchmark.group = f"pairwise-iou-{n}x{n}-{name}"
    fn(a[:10], b[:10])  # compile outside the timing
    rounds = 3 if method == "numpy_broadcast" else 7
    result = benchmark.pedantic(fn, args=(a, b), rounds=rounds, iterations=1, warmup_rounds=0)
    assert result.shape == (n, n)
    assert result.dtype == a.dtype
    if benchmark.stats is not None:
        med = benchmark.stats.stats.median
        _MEDIANS[(name, method)] = med
        benchmark.extra_info["Mpairs_per_s"] = n * n / med / 1e6
        benchmark.extra_info["peak_MB"] = peak_mb(lambda: fn(a, b))
        if method == "segiou" and (name, "numpy_broadcast") in _MEDIANS:
            ratio = _MEDIANS[(name, "numpy_broadcast")] / med
            benchmark.extra_info["x_faster_than_numpy_broadcast"] = ratio
            print(f"\n{name} {n}x{n}: segiou {med:.3f} s, {ratio:.1f}x faster than numpy broadcast")
    if method == "segiou":  # the benchmark also checks the numbers
        k = min(n, 1000)
        ref = numpy_broadcast_iou(a[:k], b[:k])
        if a.dtype == np.float64:
            np.testing.assert_array_equal(result[:k, :k], ref)
        else:  # segiou rounds a float64 computation once; numpy rounds each float32 step
            np.testing.assert_allclose(result[:k, :k], ref, rtol=2e-6, atol=1e-7)
    del result


if __name__ == "__main__":
    sys.exit(main())
