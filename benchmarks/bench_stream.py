"""Streaming benchmark (issue 14): batches as training and evaluation loops send them.

Two ways to run it:

* ``python benchmarks/bench_stream.py [--runs N]`` measures every target of the issue in ``N``
  fresh processes (default 3) and prints each run, then one row per target: the median over
  runs of the ratio against its baseline (each measured in the same process, interleaved
  rounds, median of per-round ratios), the range over runs, the target and PASS/FAIL (on the
  median); then the first-call times (warm and cold cache). Fresh processes because on this
  machine class some processes run two-thread loops markedly slower for their whole life (see
  PERFORMANCE.md): one run alone can pass or fail a target by that.
* ``pytest benchmarks/bench_stream.py --benchmark-disable`` (CI) runs every case once on small
  data and checks that each counts what its baseline counts, so the file keeps working.

Every call is ``update()`` of an accumulator built once (19 classes + ignore 255), on
Cityscapes-like masks (:func:`segiou.testing.synthetic.cityscapes_like`). Baselines: the numpy
``bincount`` idiom, the same images in one call, the uint8 masks (for wider predictions; with
the time of merely reading both arrays, which bounds what wider dtypes can reach, and of
narrowing the predictions alone on one thread and on all),
``np.argmax(scores, axis=1)`` alone (for class scores).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numba as nb
import numpy as np
import pytest
from _timing import first_call_seconds, interleaved_seconds, median_ratio

from segiou import ConfusionMatrix
from segiou import _word_kernels as _words
from segiou.testing.synthetic import cityscapes_like

K = 19


def bincount_idiom(gt: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """The common numpy idiom (FCN / mmsegmentation style)."""
    k = (gt >= 0) & (gt < K)
    return np.bincount(K * gt[k].astype(np.int64) + pred[k], minlength=K * K)


def per_image(fn: Callable[[np.ndarray, np.ndarray], object], gt, pred) -> Callable[[], None]:
    """Call ``fn`` once per image of the batch."""

    def run() -> None:
        for i in range(gt.shape[0]):
            fn(gt[i], pred[i])

    return run


def scores_for(pred: np.ndarray, seed: int = 0) -> np.ndarray:
    """``N x K x H x W`` float32 logits whose argmax is mostly ``pred`` (noise elsewhere)."""
    rng = np.random.default_rng(seed)
    n, h, w = pred.shape
    s = rng.standard_normal((n, K, h, w), dtype=np.float32)
    onehot = np.zeros_like(s)
    np.put_along_axis(onehot, np.minimum(pred, K - 1)[:, None].astype(np.int64), 3.0, axis=1)
    return s + onehot


def bf16_bits(s: np.ndarray) -> np.ndarray:
    """bfloat16 bits (truncated) of float32 scores, as a PyTorch bfloat16 tensor's int16 view."""
    return (s.view(np.uint32) >> 16).astype(np.uint16)


# Not cache=True: pytest imports this file as 'benchmarks.<name>' (import-mode importlib),
# the script as '__main__', and a cache entry written by one cannot be loaded by the other.
@nb.njit(parallel=True, nogil=True)
def _read_both(g: np.ndarray, p: np.ndarray) -> int:
    s = 0
    for i in nb.prange(g.size):
        s += np.int64(g[i]) ^ np.int64(p[i])
    return s


@nb.njit(parallel=True, nogil=True)
def _narrow_spans(p: np.ndarray, workers: int) -> int:
    acc = 0
    for w in nb.prange(workers):
        buf = np.empty(4096, dtype=np.uint8)
        i0 = p.size * w // workers
        i1 = p.size * (w + 1) // workers
        bad = 0
        for b0 in range(i0, i1, 4096):  # segiou's own narrowing loop (the wide path's)
            m = min(4096, i1 - b0)
            bad += not _words._narrow_into(p[b0 : b0 + m], buf[:m])
        acc += bad + buf[0]
    return acc


def narrow_alone(pred: np.ndarray, workers: int) -> int:
    """Narrow a wide array into 4096-byte buffers, its range checked, on ``workers`` threads.

    What the wider-dtype path does before counting, alone: one thread against all of them
    tells whether the machine's memory or each core bounds it.
    """
    return int(_narrow_spans(pred.reshape(-1), workers))


def read_floor(gt: np.ndarray, pred: np.ndarray) -> int:
    """Merely read both arrays once (all threads): the memory-bound floor."""
    return int(_read_both(gt.reshape(-1), pred.reshape(-1)))


@dataclass
class Row:
    """One target: ``ratio`` (or a time) compared with ``limit`` by ``op``."""

    name: str
    value: str
    ratio: float
    op: str  # "<=", ">=" or "<"
    limit: float
    unit: str = "x"  # of the limit, as printed

    @property
    def target(self) -> str:
        return f"{self.op} {self.limit:g}{'' if self.unit == 'x' else ' '}{self.unit}"

    def meets(self, ratio: float) -> bool:
        return {"<=": ratio <= self.limit, ">=": ratio >= self.limit, "<": ratio < self.limit}[
            self.op
        ]

    @property
    def good(self) -> bool:
        return self.meets(self.ratio)


def _ratio_row(name, t, num, den, unit, scale, op, limit) -> Row:  # type: ignore[no-untyped-def]
    r = median_ratio(t[num], t[den])
    value = f"{statistics.median(t[num]) * scale:8.3f} {unit} vs {statistics.median(t[den]) * scale:8.3f}"
    return Row(name, value, r, op, limit)


def run_targets(big: bool = True, rounds: int = 7, notes: list[str] | None = None) -> list[Row]:
    """Measure every target; ``big=False`` shrinks the data (a smoke run).

    ``notes`` collects lines without a target (the read floors of the wider dtypes).
    """
    rows: list[Row] = []
    notes = [] if notes is None else notes
    cm = ConfusionMatrix(K, ignore_index=255)
    update = cm.update
    # 1. fixed cost: 64 x 64 tiles, one per call
    n = 512 if big else 16
    g, p = cityscapes_like(n, 64, 64, seed=1)
    z = np.zeros_like(g)  # constant tiles: the fixed cost (Python, kernel call) alone
    t = interleaved_seconds({"segiou": per_image(update, g, p), "numpy": per_image(bincount_idiom, g, p),
                             "constant": per_image(update, z, z)}, rounds)  # fmt: skip
    us = statistics.median(t["segiou"]) / n * 1e6
    rows.append(Row("64x64 tiles one per call: us per call", f"{us:8.2f} us", us, "<=", 5, "us"))
    us0 = statistics.median(t["constant"]) / n * 1e6
    rows.append(Row("64x64 constant one per call (fixed cost)", f"{us0:8.2f} us", us0, "<=", 5,
                    "us"))  # fmt: skip
    rows.append(_ratio_row("64x64 one per call: x numpy idiom", t, "numpy", "segiou", "us/call",
                           1e6 / n, ">=", 3))  # fmt: skip
    # 2. 512 x 512, one per call
    n = 32 if big else 2
    g, p = cityscapes_like(n, 512, 512, seed=2)
    px = g.size
    t = interleaved_seconds({"per": per_image(update, g, p), "batch": lambda: update(g, p),
                             "numpy": per_image(bincount_idiom, g, p)}, rounds)  # fmt: skip
    rows.append(_ratio_row("512x512 one per call / one call", t, "per", "batch", "ns/px", 1e9 / px,
                           "<=", 1.5))  # fmt: skip
    rows.append(_ratio_row("512x512 one per call: x numpy idiom", t, "numpy", "per", "ns/px",
                           1e9 / px, ">=", 12))  # fmt: skip
    # 3. 1024 x 2048, one per call
    n = 8 if big else 2
    h, w = (1024, 2048) if big else (256, 512)
    g, p = cityscapes_like(n, h, w, seed=3)
    px = g.size
    t = interleaved_seconds({"per": per_image(update, g, p), "batch": lambda: update(g, p)}, rounds)
    rows.append(_ratio_row(f"{h}x{w} one per call / one call", t, "per", "batch", "ns/px", 1e9 / px,
                           "<=", 1.15))  # fmt: skip
    # 4. argmax outputs: wider predictions against the uint8 path, same masks, and the time of
    # merely reading both arrays on all threads (wider arrays are more bytes to read)
    for gd, pd in (("uint8", "int64"), ("int64", "int64"), ("uint8", "int32")):
        g2, p2 = g.astype(gd), p.astype(pd)
        t = interleaved_seconds(
            {"wide": lambda: update(g2, p2), "u8": lambda: update(g, p),  # noqa: B023
             "floor": lambda: read_floor(g2, p2)},  # noqa: B023
            rounds,
        )  # fmt: skip
        notes.append(f"{gd}/{pd}: merely reading both arrays takes "
                     f"{statistics.median(t['floor']) / px * 1e9:.3f} ns/px = "
                     f"{median_ratio(t['floor'], t['u8']):.2f}x the uint8 path; segiou is "
                     f"{median_ratio(t['wide'], t['floor']):.2f}x that read")  # fmt: skip
        rows.append(_ratio_row(f"{n}x{h}x{w} {gd}/{pd} / uint8", t, "wide", "u8", "ns/px",
                               1e9 / px, "<=", 1.5))  # fmt: skip
        if gd == "uint8":
            threads = nb.get_num_threads()
            tn = interleaved_seconds(
                {"one": lambda: narrow_alone(p2, 1),  # noqa: B023
                 "all": lambda: narrow_alone(p2, threads)},  # noqa: B023
                rounds,
            )  # fmt: skip
            one, u8 = statistics.median(tn["one"]), statistics.median(t["u8"])
            turns = (one + threads * u8) / threads  # a thread narrows alone while others count
            notes.append(f"{gd}/{pd}: narrowing the predictions alone takes "
                         f"{one / px * 1e9:.3f} ns/px on one thread, "
                         f"{statistics.median(tn['all']) / px * 1e9:.3f} on {threads}; if a "
                         f"thread cannot count while its own reads are in flight, threads "
                         f"taking turns at the memory need at least {turns / px * 1e9:.3f} "
                         f"ns/px = {turns / u8:.2f}x the uint8 path")  # fmt: skip
    # 5. class scores, argmax fused: against np.argmax alone
    n = 4 if big else 1
    g, p = cityscapes_like(n, 512, 512, seed=4) if big else cityscapes_like(n, 64, 96, seed=4)
    s32 = scores_for(p)
    cases = {"float32": (s32, None, s32), "float16": (s32.astype(np.float16), None, s32.astype(np.float16)),
             "bfloat16 bits": (bf16_bits(s32), "bfloat16", s32)}  # fmt: skip
    for name, (s, sd, base) in cases.items():
        t = interleaved_seconds({"fused": lambda: update(g, s, scores_axis=1, scores_dtype=sd),  # noqa: B023
                                 "argmax": lambda: np.argmax(base, axis=1)}, rounds)  # noqa: B023  # fmt: skip
        per = statistics.median(t["fused"]) / s.size * 1e9
        row = _ratio_row(f"scores {name} {s.shape}: fused / np.argmax", t, "fused", "argmax", "ms",
                         1e3, "<=", 1.2)  # fmt: skip
        row.value += f" ({per:.3f} ns per class per px)"
        rows.append(row)
    # memory: fused against argmax + counting
    peaks = {}
    for label, fn in (("fused", lambda: update(g, s32, scores_axis=1)),
                      ("argmax+count", lambda: update(g, np.argmax(s32, axis=1)))):  # fmt: skip
        tracemalloc.start()
        tracemalloc.reset_peak()
        fn()
        peaks[label] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    rows.append(Row("scores: peak traced memory fused, bytes per pixel",
                    f"{peaks['fused'] / 2**20:8.2f} MiB vs {peaks['argmax+count'] / 2**20:8.2f} "
                    "MiB for argmax + count", peaks["fused"] / g.size, "<", 1, "B/px"))  # fmt: skip
    return rows


FIRST_CALL = (
    "import time, numpy as np; t0 = time.perf_counter(); import segiou; "
    "g = np.zeros((1024, 1024), np.uint8); "
    "segiou.ConfusionMatrix(19, ignore_index=255).update(g, g); "
    "segiou.ConfusionMatrix(19, ignore_index=255, threads=1).update(g[:8], g[:8]); "
    "print(time.perf_counter() - t0)"
)
#: What any Numba library pays before its first kernel runs: importing Numba, and Numba's
#: target registries, which it loads on the first compile or cache load (with scipy installed,
#: they import ``scipy.linalg`` to look for BLAS). numpy is imported before the clock starts,
#: as in :data:`FIRST_CALL` (the two are subtracted). Internal API, benchmark only.
NUMBA_FLOOR = (
    "import time, numpy; t0 = time.perf_counter(); import numba; "
    "from numba.core.registry import cpu_target; "
    "cpu_target.typing_context.refresh(); cpu_target.target_context.refresh(); "
    "print(time.perf_counter() - t0)"
)
#: Prefix: the process runs as if scipy were not installed (``import scipy`` fails), as in a
#: core install of segiou; Numba then skips its BLAS lookup.
_WITHOUT_SCIPY = "import sys; sys.modules['scipy'] = None; "
#: The streaming paths, each first called on its own (compile or cache load) after the above.
NEW_PATHS = (
    "import time, numpy as np, segiou; cm = segiou.ConfusionMatrix(19, ignore_index=255); "
    "g = np.zeros((2, 64, 64), np.uint8); cm.update(g, g); out = []; "
    "t0 = time.perf_counter(); cm.update(g[0], g[0]); out.append(time.perf_counter() - t0); "
    "t0 = time.perf_counter(); cm.update(g, g.astype(np.int64)); out.append(time.perf_counter() - t0); "
    "s = np.zeros((2, 19, 64, 64), np.float32); "
    "t0 = time.perf_counter(); cm.update(g, s, scores_axis=1); out.append(time.perf_counter() - t0); "
    "t0 = time.perf_counter(); cm.update(g, s.astype(np.float16), scores_axis=1); out.append(time.perf_counter() - t0); "
    "print(sum(out))"
)
_CHILD = "SEGIOU_BENCH_STREAM_CHILD"


def _one_run() -> None:
    """Measure once in this process; print the rows and notes as one JSON line."""
    notes: list[str] = []
    rows = run_targets(notes=notes)
    print(json.dumps({"rows": [asdict(r) for r in rows], "notes": notes}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes (default 3)")
    args = parser.parse_args(argv)
    if os.environ.get(_CHILD):
        _one_run()
        return 0
    print(f"numba threads: {nb.get_num_threads()}; {args.runs} fresh processes")
    runs = []
    for r in range(args.runs):
        res = subprocess.run([sys.executable, __file__], env=os.environ | {_CHILD: "1"},
                             capture_output=True, text=True, check=True)  # fmt: skip
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        print(f"-- run {r + 1}")
        for d in runs[-1]["rows"]:
            row = Row(**d)
            print(f"   {row.name:56s} {row.value:52s} {row.ratio:7.2f} ({row.target}) "
                  f"{'PASS' if row.good else 'FAIL'}")  # fmt: skip
        for line in runs[-1]["notes"]:
            print(f"   {line}")
    print("-- median over runs")
    ok = True
    for i, d in enumerate(runs[0]["rows"]):
        row = Row(**d)
        ratios = [run["rows"][i]["ratio"] for run in runs]
        med = statistics.median(ratios)
        good = row.meets(med)
        ok &= good
        print(f"   {row.name:56s} {med:7.2f} (runs {min(ratios):.2f}-{max(ratios):.2f}) "
              f"(target {row.target}) {'PASS' if good else 'FAIL'}")  # fmt: skip
    ct = first_call_seconds(FIRST_CALL, warm_runs=5)
    good = ct["warm"] <= 0.6
    ok &= good
    print(f"first call incl. import: cold cache {ct['cold']:.2f} s, warm cache {ct['warm']:.2f} s "
          f"(5 processes: {ct['warm_min']:.2f}-{ct['warm_max']:.2f}) (target warm <= 0.6 s) "
          f"{'PASS' if good else 'FAIL'}")  # fmt: skip
    fl = first_call_seconds(NUMBA_FLOOR, warm_runs=5)
    try:
        import scipy  # noqa: F401

        with_scipy = "scipy installed: Numba's registries import scipy.linalg"
    except ImportError:
        with_scipy = "no scipy"
    print(f"   of which importing Numba and loading Numba's registries ({with_scipy}): "
          f"{fl['warm']:.2f} s ({fl['warm_min']:.2f}-{fl['warm_max']:.2f}); segiou's own part "
          f"{ct['warm'] - fl['warm']:.2f} s")  # fmt: skip
    bare = first_call_seconds(_WITHOUT_SCIPY + FIRST_CALL, warm_runs=5)
    bare_floor = first_call_seconds(_WITHOUT_SCIPY + NUMBA_FLOOR, warm_runs=5)
    print(f"   without scipy (a core install: Numba then imports no scipy.linalg): first call "
          f"{bare['warm']:.2f} s ({bare['warm_min']:.2f}-{bare['warm_max']:.2f}), of which "
          f"Numba and its registries {bare_floor['warm']:.2f} s "
          f"({bare_floor['warm_min']:.2f}-{bare_floor['warm_max']:.2f})")  # fmt: skip
    nt = first_call_seconds(NEW_PATHS)
    print(f"streaming paths' first calls (short way, int64 narrowing, float32 and float16 scores): "
          f"cold cache {nt['cold']:.2f} s (compile), warm cache {nt['warm']:.3f} s")  # fmt: skip
    return 0 if ok else 1


# -- pytest (CI: --benchmark-disable, small data) -----------------------------------------------
def test_targets_run_and_count_right(request: pytest.FixtureRequest) -> None:
    """Every row runs (small data unless benchmarking), and each path counts what its baseline does."""
    small = bool(request.config.getoption("benchmark_disable", default=True))
    notes: list[str] = []
    rows = run_targets(big=not small, rounds=1, notes=notes)
    assert len(rows) == 13
    assert len(notes) == 5
    assert all(r.meets(r.ratio) == r.good for r in rows)
    g, p = cityscapes_like(2, 64, 96, seed=5)
    one = ConfusionMatrix(K, ignore_index=255).update(g, p)
    many = ConfusionMatrix(K, ignore_index=255)
    for i in range(2):
        many.update(g[i], p[i])
    assert one == many
    assert ConfusionMatrix(K, ignore_index=255).update(g, p.astype(np.int64)) == one
    s = scores_for(p)
    fused = ConfusionMatrix(K, ignore_index=255).update(g, s, scores_axis=1)
    assert fused == ConfusionMatrix(K, ignore_index=255).update(g, np.argmax(s, axis=1))
    void_free = (g < K) & (p < K)  # the idiom adds void (255) predictions into other cells
    ref = np.bincount(K * g[void_free].astype(np.int64) + p[void_free], minlength=K * K)
    np.testing.assert_array_equal(one.counts.ravel(), ref)


if __name__ == "__main__":
    sys.exit(main())
