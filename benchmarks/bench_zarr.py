"""End-to-end Zarr benchmark (issue 3): read + decode + count, and peak memory.

``python benchmarks/bench_zarr.py`` builds zstd-compressed Zarr v3 stores (Zarr's default codec)
of Cityscapes-like masks (1024 x 2048 uint8) with 1024 x 2048 chunks and 512 x 512 chunks and
measures, in the same run and on the same store:

* ``zarr-read``: zarr-python merely reading both arrays image by image on one thread;
* ``dask-naive``: ``dask.array.from_zarr`` + ``map_blocks(count)`` + ``sum(split_every=8)`` on the
  threaded scheduler (``count`` is segiou's own single-threaded kernel, so this isolates the
  read path and graph overhead);
* ``segiou``: :func:`segiou.parallel.evaluate_zarr` on the threaded scheduler (2 cores);
* ``decode-only``: no counting at all, only the chunk files read and decoded with numcodecs into
  reused buffers on 2 threads: the floor of any engine that decodes the store's zstd, so
  dask-naive / decode-only bounds what any such engine can reach against dask-naive.

Targets: segiou >= 4x faster than dask-naive and no slower than zarr-read (16 images; 64 images
with 1024 x 2048 chunks show how the ratio moves with the dataset's size). Then peak RSS of
segiou on 200 images vs 20 images, each in a fresh process. ``pytest benchmarks/bench_zarr.py``
runs a small version (and under ``--benchmark-disable``, once, quickly).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from _timing import interleaved_seconds, median_ratio

from segiou._count import IGNORE, ImageCounter, Lookup
from segiou.io.zarr import create_stack
from segiou.parallel import evaluate_zarr
from segiou.testing.synthetic import cityscapes_like

K = 19
_MAP = {**{i: i for i in range(K)}, 255: IGNORE}


def build_store(
    root: Path, n: int, h: int, w: int, chunks: tuple[int, int], distinct: int = 20
) -> Path:
    """Write ``gt`` and ``pred`` stacks of ``n`` images (``distinct`` different ones, repeated)."""
    gt_a = create_stack(root / "gt.zarr", n=n, height=h, width=w, chunks=chunks,
                        names=[f"img{i:05d}" for i in range(n)], overwrite=True)  # fmt: skip
    pr_a = create_stack(root / "pred.zarr", n=n, height=h, width=w, chunks=chunks,
                        names=[f"img{i:05d}" for i in range(n)], overwrite=True)  # fmt: skip
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for i in range(n):
        j = i % distinct
        if j not in cache:
            g, p = cityscapes_like(1, h, w, seed=100 + j)
            cache[j] = (g[0], p[0])
        gt_a[i], pr_a[i] = cache[j]
    return root


def zarr_read(root: Path) -> int:
    """zarr-python reading both arrays image by image (no counting)."""
    import zarr

    g = zarr.open_array(root / "gt.zarr", mode="r")
    p = zarr.open_array(root / "pred.zarr", mode="r")
    s = 0
    for i in range(g.shape[0]):
        s += int(g[i][0, 0]) + int(p[i][0, 0])
    return s


def _count_block(g: np.ndarray, p: np.ndarray) -> np.ndarray:
    c = ImageCounter(Lookup(K, _MAP, _MAP))
    c.add(np.ascontiguousarray(g), np.ascontiguousarray(p))
    return c.finish()[None, None, None]


def dask_naive(root: Path) -> np.ndarray:
    """The straightforward dask.array pipeline."""
    import dask.array as da

    g = da.from_zarr(str(root / "gt.zarr"))
    p = da.from_zarr(str(root / "pred.zarr"))
    chunks = (*(tuple(1 for _ in c) for c in g.chunks), (K + 2,), (K + 2,))
    parts = da.map_blocks(_count_block, g, p, new_axis=[3, 4], chunks=chunks, dtype=np.int64)
    return parts.sum(axis=(0, 1, 2), split_every=8).compute(scheduler="threads")


def decode_only(root: Path, pool: ThreadPoolExecutor) -> int:
    """Read and decode every chunk of both arrays (2 threads, reused buffers), no counting."""
    import numcodecs

    local = threading.local()
    jobs = []
    for name in ("gt.zarr", "pred.zarr"):
        meta = json.loads((root / name / "zarr.json").read_text())
        assert [c["name"] for c in meta["codecs"]] == ["bytes", "zstd"], meta["codecs"]
        size = int(np.prod(meta["chunk_grid"]["configuration"]["chunk_shape"]))
        jobs += [(f, size) for f in sorted((root / name / "c").rglob("*")) if f.is_file()]
    codec = numcodecs.Zstd()

    def work(job: tuple[Path, int]) -> None:
        f, size = job
        buf = getattr(local, "buf", None)
        if buf is None or buf.size != size:
            buf = local.buf = np.empty(size, np.uint8)
        codec.decode(f.read_bytes(), out=buf)

    return len(list(pool.map(work, jobs)))


def segiou_eval(root: Path) -> np.ndarray:
    cm = evaluate_zarr(root / "gt.zarr", root / "pred.zarr", labels=K, ignore_index=255,
                       scheduler="threads")  # fmt: skip
    return cm.counts


_RSS_CODE = """
import json, resource, sys, time
from segiou.parallel import evaluate_zarr
root = sys.argv[1]
t0 = time.perf_counter()
cm = evaluate_zarr(root + "/gt.zarr", root + "/pred.zarr", labels=19, ignore_index=255,
                   scheduler="threads")
dt = time.perf_counter() - t0
print(json.dumps({"rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "seconds": dt, "pixels": cm.n_pixels}))
"""


def peak_rss(root: Path) -> dict[str, float]:
    """Peak RSS of a fresh process that evaluates the store."""
    out = subprocess.run([sys.executable, "-c", _RSS_CODE, str(root)], check=True,
                         capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ok = True
    h, w = 1024, 2048
    pool = ThreadPoolExecutor(2)
    with tempfile.TemporaryDirectory(prefix="segiou-bench-") as tmp:
        for n, chunks in ((16, (1024, 2048)), (16, (512, 512)), (64, (1024, 2048))):
            root = build_store(Path(tmp) / f"c{chunks[0]}", n, h, w, chunks)
            px = n * h * w
            np.testing.assert_array_equal(dask_naive(root)[:K, :K], segiou_eval(root))
            t = interleaved_seconds(
                {
                    "zarr": lambda: zarr_read(root),  # noqa: B023
                    "naive": lambda: dask_naive(root),  # noqa: B023
                    "segiou": lambda: segiou_eval(root),  # noqa: B023
                    "decode": lambda: decode_only(root, pool),  # noqa: B023
                },
                rounds=7,
            )
            tz, tn, ts, td = (
                statistics.median(t[m]) for m in ("zarr", "naive", "segiou", "decode")
            )
            vs_naive = median_ratio(t["naive"], t["segiou"])
            vs_zarr = median_ratio(t["zarr"], t["segiou"])
            bound = median_ratio(t["naive"], t["decode"])
            good = vs_naive >= 4.0 and vs_zarr >= 1.0
            ok &= good
            print(
                f"{n} images, chunks {chunks[0]}x{chunks[1]}: zarr-read (1 thread) "
                f"{tz / px * 1e9:5.2f} ns/px | dask-naive {tn / px * 1e9:5.2f} ns/px | segiou "
                f"{ts / px * 1e9:5.2f} ns/px ({px / ts / 1e6:5.0f} Mpx/s) | decode-only "
                f"{td / px * 1e9:5.2f} ns/px\n    {vs_naive:4.1f}x dask-naive (target >= 4x; "
                f"decode-only, with no counting at all, is {bound:4.1f}x), {vs_zarr:4.2f}x "
                f"zarr-read (target >= 1x) {'PASS' if good else 'FAIL'}"
            )
            shutil.rmtree(root)
        small = build_store(Path(tmp) / "m20", 20, h, w, (1024, 2048))
        big = build_store(Path(tmp) / "m200", 200, h, w, (1024, 2048))
        r20, r200 = peak_rss(small), peak_rss(big)
        grow = r200["rss_mib"] - r20["rss_mib"]
        good = grow < 64
        ok &= good
        print(
            f"peak RSS: 20 images {r20['rss_mib']:.0f} MiB ({r20['seconds']:.2f} s), 200 images "
            f"{r200['rss_mib']:.0f} MiB ({r200['seconds']:.2f} s, {r200['pixels'] / 1e6:.0f} Mpx); "
            f"growth {grow:+.0f} MiB (target: does not grow with the dataset, < 64 MiB) "
            f"{'PASS' if good else 'FAIL'}"
        )
    return 0 if ok else 1


# -- pytest-benchmark -------------------------------------------------------------------------
@pytest.fixture(
    scope="module", params=[(1024, 2048), (512, 512)], ids=["chunk1024x2048", "chunk512"]
)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    small = request.config.getoption("benchmark_disable")
    n, h, w = (2, 256, 512) if small else (8, 1024, 2048)
    ch = request.param if not small else (min(request.param[0], h), min(request.param[1], w))
    return build_store(tmp_path_factory.mktemp("zarr"), n, h, w, ch, distinct=n)


@pytest.mark.parametrize("method", ["zarr_read", "dask_naive", "segiou"])
def test_end_to_end(benchmark, store: Path, method: str) -> None:  # type: ignore[no-untyped-def]
    fn = {"zarr_read": zarr_read, "dask_naive": dask_naive, "segiou": segiou_eval}[method]
    benchmark.group = f"zarr-{store.name}"
    benchmark(fn, store)
    if method == "segiou":  # the benchmark also checks the numbers
        np.testing.assert_array_equal(dask_naive(store)[:K, :K], segiou_eval(store))


if __name__ == "__main__":
    sys.exit(main())
