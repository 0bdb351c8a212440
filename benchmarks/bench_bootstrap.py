"""Bootstrap benchmark (issue 12): 1,000 resamples over 5,000 images x 19 classes, target < 5 s.

Two ways to run it:

* ``python benchmarks/bench_bootstrap.py`` times :func:`segiou.stats.bootstrap` (every metric,
  exact resamples: weights times per-image sums) against the same resamples done one at a time
  in a plain Python loop (each resample's entries summed into a confusion matrix, then
  :func:`segiou.evaluate`), on a subset of the resamples, interleaved, medians; it checks that
  both give the same numbers and prints the time, the ratio and the target.
* ``pytest benchmarks/bench_bootstrap.py`` runs the same under pytest-benchmark;
  ``--benchmark-disable`` (CI) runs it once on small data so the file keeps working.

Data: per-image confusion entries of Cityscapes-like masks (19 classes, 7 categories, ignored
and void pixels), 100 images of 256 x 512 counted once, then repeated with their counts scaled
(x1..x4) up to the number of images.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import pytest
from _timing import interleaved_seconds

from segiou import ConfusionMatrix, evaluate
from segiou.images import ImageRows
from segiou.labels import load_spec
from segiou.stats import bootstrap, resample_weights
from segiou.testing.synthetic import cityscapes_like

SPEC = load_spec("cityscapes")
TARGET_SECONDS = 5.0  # 1,000 resamples x 5,000 images x 19 classes
K = 19


def make_rows(n_images: int, seed: int = 0) -> ImageRows:
    """Per-image entries of ``n_images`` Cityscapes-like images (100 distinct, scaled copies)."""
    base_n = min(100, n_images)
    gt, pred = cityscapes_like(base_n, 256, 512, seed=seed)
    cm = ConfusionMatrix(SPEC, gt_ids="class", per_image=True).update(gt, pred, key="base")
    rows = cm.images.rows
    assert rows is not None
    rng = np.random.default_rng(seed)
    parts = []
    for start in range(0, n_images, base_n):
        take = min(base_n, n_images - start)
        part = rows.select(np.arange(take))
        scale = rng.integers(1, 5, size=take)[part.image]
        parts.append(ImageRows(K, tuple(f"im{start + i}" for i in range(take)), (True,) * take,
                               part.image, part.gt, part.pred, part.count * scale))  # fmt: skip
    return ImageRows.concat(parts, K)


def loop_reference(rows: ImageRows, weights: np.ndarray) -> list[dict[str, float]]:
    """The same resamples, one at a time: sum the drawn images' entries, then evaluate.

    Unit ``j`` of the weights is the ``j``-th image in name order (as :func:`bootstrap` draws).
    """
    out = []
    order = np.array(sorted(range(rows.n), key=rows.names.__getitem__))
    for w in weights:
        per_image = np.empty(rows.n, dtype=np.int64)
        per_image[order] = w
        table = np.zeros((K + 2, K + 2), dtype=np.int64)
        np.add.at(table, (rows.gt, rows.pred), rows.count * per_image[rows.image])
        r = evaluate(table[:K, :K], void=table[:K, K], spec=SPEC, preset="cityscapes")
        out.append(r.summary | {"iou": r.per_class["iou"]})
    return out


def run_bootstrap(rows: ImageRows, resamples: int) -> object:
    return bootstrap(rows, spec=SPEC, preset="cityscapes", resamples=resamples, seed=0)


def check_same(rows: ImageRows, resamples: int, subset: int) -> None:
    """The vectorised replicates equal the loop's, resample for resample (first ``subset``)."""
    b = run_bootstrap(rows, resamples)
    w = resample_weights(rows.n, subset, seed=0)
    for r, ref in enumerate(loop_reference(rows, w)):
        for key in ("miou", "fwiou", "pixel_accuracy", "mean_accuracy", "kappa", "category_miou"):
            np.testing.assert_allclose(b.replicates[key][r], ref[key], rtol=1e-12)  # type: ignore[attr-defined]
        np.testing.assert_allclose(b.replicates["iou"][r], ref["iou"], rtol=1e-12)  # type: ignore[attr-defined]


def main() -> int:
    n, resamples, loop_resamples = 5000, 1000, 20
    t0 = time.perf_counter()
    rows = make_rows(n)
    print(f"data: {rows.n} images, {rows.count.size:,} entries "
          f"({rows.count.size / rows.n:.1f} per image), built in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    check_same(rows, 50, 10)
    w = resample_weights(rows.n, loop_resamples, seed=0)
    t = interleaved_seconds(
        {"vectorised": lambda: run_bootstrap(rows, resamples),
         "loop": lambda: loop_reference(rows, w)},
        rounds=5,
    )  # fmt: skip
    vec = statistics.median(t["vectorised"])
    loop_each = statistics.median(t["loop"]) / loop_resamples
    ratio = statistics.median(
        (lp / loop_resamples * resamples) / v
        for lp, v in zip(t["loop"], t["vectorised"], strict=True)
    )
    ok = vec < TARGET_SECONDS
    print(
        f"{resamples} resamples x {n} images x {K} classes (every metric, categories too): "
        f"{vec:.2f} s (rounds {min(t['vectorised']):.2f}-{max(t['vectorised']):.2f}), target < "
        f"{TARGET_SECONDS:.0f} s: {'PASS' if ok else 'FAIL'}\n"
        f"plain Python loop, one resample at a time (entries summed, then evaluate): "
        f"{loop_each * 1e3:.1f} ms per resample = {loop_each * resamples:.1f} s for {resamples}; "
        f"vectorised is {ratio:.0f}x faster (median of per-round ratios)"
    )
    return 0 if ok else 1


# -- pytest-benchmark -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rows(request: pytest.FixtureRequest) -> ImageRows:
    small = request.config.getoption("benchmark_disable")
    return make_rows(200 if small else 5000)


def test_bootstrap(benchmark, rows: ImageRows, request: pytest.FixtureRequest) -> None:  # type: ignore[no-untyped-def]
    small = request.config.getoption("benchmark_disable")
    resamples = 50 if small else 1000
    benchmark.group = "bootstrap"
    benchmark(run_bootstrap, rows, resamples)
    if benchmark.stats is not None:
        benchmark.extra_info["seconds"] = benchmark.stats.stats.median
        assert benchmark.stats.stats.median < TARGET_SECONDS
    check_same(rows, resamples, 5)  # the numbers, not only the time


def test_loop_reference(benchmark, rows: ImageRows) -> None:  # type: ignore[no-untyped-def]
    w = resample_weights(rows.n, 5, seed=0)
    benchmark.group = "bootstrap"
    benchmark(loop_reference, rows, w)


if __name__ == "__main__":
    sys.exit(main())
