"""Scale benchmark (issue 16): planning, graph size, scheduler overhead, per-core rate, and the
wall time they predict for 10^5 and 10^6 Cityscapes-size images on 10 to 1,000 workers.

``python benchmarks/bench_scale.py`` measures on this machine:

* **plan**: :func:`segiou.parallel.plan_ranges` on metadata-only stores (a Zarr array of
  ``N x 1024 x 2048`` whose chunks were never written, with Cityscapes-style names) of 10^4,
  10^5 and 10^6 images: median time, allocation peak (``tracemalloc``) and RSS growth, against
  the baseline measured in the same run: the per-image Python loop segiou 0.2 planned with
  (targets: 10^6 images in <= 1 s and <= 100 MiB);
* **graph**: the graph of a ``distributed`` run (tasks sized to 0.2 s at the per-core rate
  below, the job scattered to the workers): build time, and the bytes the client ships to the
  scheduler, serialized as ``Client.compute`` serializes them; and the job's own size, which
  goes to the workers once;
* **scheduler**: wall time per task of a graph shaped like segiou's (no-op counting tasks, a
  tree of no-op sums with fan-in 8) on a ``LocalCluster`` of 2 single-threaded worker
  processes, over 2,000 and 10,000 tasks. Scheduler, workers and client share this machine's 2
  cores, so this is an upper bound of what a scheduler with a core of its own costs;
* **per-core rate**: one thread counting Cityscapes-like 1024 x 2048 masks, in memory
  (segiou's single-threaded counter, as a task runs it) and end to end from a zstd Zarr store
  (read, decode, count: a task's work), against the numpy ``bincount`` idiom on one thread.

From these it prints the table the README shows: expected wall time of 10^5 and 10^6
Cityscapes-size images on 10, 100 and 1,000 single-threaded workers, and which of scheduling,
counting and reading from object storage bounds it. ``pytest benchmarks/bench_scale.py
--benchmark-disable`` (CI) runs every part once on tiny inputs so the file keeps working.
"""

from __future__ import annotations

import math
import os
import pickle
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _timing import interleaved_seconds, median_ratio, noop, noop_sum

from segiou import ConfusionMatrix
from segiou._count import IGNORE, ImageCounter, Lookup
from segiou.io.zarr import MaskSet, create_stack, open_masks
from segiou.parallel._graph import build_graph
from segiou.parallel._plan import (
    SCHEDULER_SECONDS,
    TASK_PIXELS,
    TASK_SECONDS,
    cluster_task_seconds,
    plan_ranges,
    task_units,
)
from segiou.parallel._tasks import Job, count_group
from segiou.testing.synthetic import cityscapes_like

K = 19
H, W = 1024, 2048  # Cityscapes
PLAN_TARGETS = {"seconds": 1.0, "mib": 100.0}  # for 10^6 images
SPLIT_EVERY = 8
# Object storage, from AWS's documentation (not measured here): "at least ... 5,500 GET/HEAD
# requests per second per partitioned Amazon S3 prefix" (S3 User Guide, optimizing
# performance), and for requests under 512 KB "median latencies are often in the tens of
# milliseconds range" (whitepaper "Best Practices Design Patterns: Optimizing Amazon S3
# Performance"): 30 ms here. A Cityscapes mask is ~50 KB in zstd (35-43x, PERFORMANCE.md).
S3_GET_PER_S = 5500.0
S3_LATENCY_S = 0.03


# -- stores ------------------------------------------------------------------------------------
def metadata_store(path: Path, n: int, h: int = H, w: int = W) -> str:
    """A stack of ``n`` images whose chunks were never written: metadata (and names) only."""
    import zarr

    arr = zarr.create_array(
        store=str(path),
        shape=(n, h, w),
        chunks=(1, h, w),
        dtype="uint8",
        fill_value=0,
        overwrite=True,
    )
    arr.attrs["segiou"] = {"names": [f"city{i % 50:02d}_{i:06d}_000019" for i in range(n)]}
    return str(path)


def data_store(root: Path, n: int, h: int, w: int, distinct: int = 8) -> tuple[str, str]:
    """zstd Zarr stacks (Zarr's default codec) of ``n`` Cityscapes-like pairs, 1 chunk each."""
    names = [f"img{i:05d}" for i in range(n)]
    g = create_stack(root / "gt.zarr", n=n, height=h, width=w, names=names, overwrite=True)
    p = create_stack(root / "pred.zarr", n=n, height=h, width=w, names=names, overwrite=True)
    pairs = [cityscapes_like(1, h, w, seed=40 + j) for j in range(min(n, distinct))]
    for i in range(n):
        gt, pred = pairs[i % len(pairs)]
        g[i], p[i] = gt[0], pred[0]
    return str(root / "gt.zarr"), str(root / "pred.zarr")


def job_for(gt: MaskSet, pred: MaskSet) -> Job:
    """The job ``count_stores`` builds for two stores with the same images in the same order."""
    cm = ConfusionMatrix(K, ignore_index=255, per_image=True)
    return Job(
        gt,
        pred,
        tuple(range(len(gt.names))),
        cm.spec,
        cm.gt_ids,
        cm.pred_ids,
        "raise",
        "error",
        255,
    )


# -- plan --------------------------------------------------------------------------------------
def per_image_plan(ms: MaskSet, pixels_per_task: int, min_tasks: int = 4) -> list[np.ndarray]:
    """Baseline: segiou 0.2's planner (c034ec6), a Python loop with a list per task."""
    n = len(ms.names)
    step = ms.arrays[0].chunks[0] if ms.layout == "stack" else 1
    units = [list(range(s, min(s + step, n))) for s in range(0, n, step)]
    total = sum(int(np.prod(ms.image_shape(i))) for i in range(n))
    target = max(1, min(pixels_per_task, total // max(1, min_tasks)))
    groups: list[list[int]] = []
    cur: list[int] = []
    px = 0
    for u in units:
        cur.extend(u)
        px += sum(int(np.prod(ms.image_shape(i))) for i in u)
        if px >= target:
            groups.append(cur)
            cur, px = [], 0
    if cur:
        groups.append(cur)
    return [np.array([(i, 0, ms.image_shape(i)[0]) for i in g], dtype=np.int64) for g in groups]


def plan_figures(ms: MaskSet, pixels_per_task: int, min_tasks: int, rounds: int) -> dict[str, Any]:
    """Median time and allocation peak (tracemalloc) of planning ``ms``."""
    ranges = plan_ranges(ms, pixels_per_task=pixels_per_task, min_tasks=min_tasks)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        plan_ranges(ms, pixels_per_task=pixels_per_task, min_tasks=min_tasks)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    try:
        plan_ranges(ms, pixels_per_task=pixels_per_task, min_tasks=min_tasks)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return {
        "seconds": statistics.median(times),
        "peak_mib": peak / 2**20,
        "tasks": len(ranges),
        "ranges": ranges,
    }


def check_covers(ms: MaskSet, ranges: np.ndarray) -> None:
    """Every image of ``ms`` is in exactly one task, in order."""
    units = np.concatenate([task_units(ms, r) for r in ranges] or [np.empty((0, 3), np.int64)])
    np.testing.assert_array_equal(units[:, 0], np.arange(len(ms.names)))
    assert (units[:, 1] == 0).all()
    assert (units[:, 2] == ms.image_shapes()[:, 0]).all()


# -- graph -------------------------------------------------------------------------------------
def shipped_bytes(obj: Any) -> int:
    """Bytes of the graph the client sends to the scheduler, serialized as
    ``distributed.Client.compute`` serializes it (dask's expression, ``optimize``d)."""
    from dask._expr import FinalizeCompute
    from dask.base import collections_to_expr
    from distributed.protocol.serialize import serialize, to_serialize

    expr = FinalizeCompute(collections_to_expr([obj], True)).optimize()
    header, frames = serialize(to_serialize(expr), on_error="raise")
    return len(pickle.dumps(header)) + sum(memoryview(f).nbytes for f in frames)


def graph_figures(client: Any, job: Job, ranges: np.ndarray) -> dict[str, float]:
    ref = client.scatter(job, broadcast=True, hash=False)
    t0 = time.perf_counter()
    graph = build_graph(ref, ranges, SPLIT_EVERY)
    built = time.perf_counter() - t0
    shipped = shipped_bytes(graph)
    return {
        "build_s": built,
        "shipped_bytes": shipped,
        "tasks": len(graph.__dask_graph__()),
        "job_bytes": len(pickle.dumps(job)),
    }


# -- scheduler overhead ------------------------------------------------------------------------
def noop_graph(n_tasks: int) -> Any:
    """A graph shaped like segiou's: ``n_tasks`` leaves, a tree of sums with fan-in 8."""
    from dask.delayed import Delayed

    run = f"noop-{time.perf_counter_ns()}"
    level: list[Any] = [(f"{run}-count", i) for i in range(n_tasks)]
    dsk: dict[Any, Any] = {k: (noop, i, (i, i + 1, 0, -1)) for i, k in enumerate(level)}
    depth = 0
    while len(level) > 1:
        nxt = [(f"{run}-sum-{depth}", j) for j in range(-(-len(level) // SPLIT_EVERY))]
        for j, key in enumerate(nxt):
            dsk[key] = (noop_sum, level[j * SPLIT_EVERY : (j + 1) * SPLIT_EVERY])
        level, depth = nxt, depth + 1
    return Delayed(level[0], dsk), len(dsk)


def scheduler_overhead(
    client: Any, n_tasks: int, rounds: int, scheduler_pid: int | None = None
) -> dict[str, float]:
    """Median wall time per task of the no-op graph, from ``compute`` to the result; with the
    scheduler's process id, also the scheduler's CPU time per task (what it costs on a core of
    its own)."""
    import psutil

    proc = psutil.Process(scheduler_pid) if scheduler_pid else None
    walls, cpus = [], []
    total = 0
    for _ in range(rounds + 1):  # the first round warms up the workers
        graph, total = noop_graph(n_tasks)
        c0 = sum(proc.cpu_times()[:2]) if proc else 0.0
        t0 = time.perf_counter()
        client.compute(graph).result()
        walls.append(time.perf_counter() - t0)
        cpus.append(sum(proc.cpu_times()[:2]) - c0 if proc else float("nan"))
    return {
        "wall_s": statistics.median(walls[1:]) / total,
        "cpu_s": statistics.median(cpus[1:]) / total,
        "tasks": total,
    }


@contextmanager
def subprocess_cluster(tmp: Path) -> Iterator[tuple[Any, int]]:
    """``dask scheduler`` and two ``dask worker --nthreads 1`` as processes of their own (as
    on a cluster); yields a connected Client and the scheduler's process id."""
    import subprocess

    from distributed import Client

    bin_dir = Path(sys.executable).parent
    dask = str(bin_dir / "dask") if (bin_dir / "dask").exists() else "dask"
    f = str(tmp / "scheduler.json")
    common = ["--scheduler-file", f, "--no-dashboard"]
    # the scheduler unpickles the graph: it imports the no-op tasks' module (_timing)
    here = str(Path(__file__).parent)
    path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    procs = [
        subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", "0", *common], **quiet
        )
    ]
    try:
        for _ in range(600):
            if Path(f).exists():
                break
            time.sleep(0.05)
        worker = [dask, "worker", "--no-nanny", "--nthreads", "1", *common]
        procs += [subprocess.Popen(worker, **quiet) for _ in range(2)]
        with Client(scheduler_file=f, timeout="30s") as client:
            client.wait_for_workers(2, timeout=60)
            yield client, procs[0].pid
    finally:
        for proc in reversed(procs):  # workers first: they exit at once with a scheduler
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def local_cluster() -> Iterator[Any]:
    """An in-process LocalCluster (2 workers x 1 thread) for the graph figures."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            # ":0": any free port (None means distributed's 8787, and a warning, an error in
            # the tests, whenever another cluster or dashboard on the machine holds it)
            n_workers=2,
            threads_per_worker=1,
            processes=False,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


# -- per-core rate -----------------------------------------------------------------------------
def bincount_idiom(gt: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """The common numpy idiom, one thread (the baseline)."""
    k = gt < K
    return np.bincount(K * gt[k].astype(np.int64) + pred[k], minlength=K * K)


def kernel_one_thread(pairs: list[tuple[np.ndarray, np.ndarray]]) -> Callable[[], None]:
    """segiou's single-threaded counter (what a task runs), image by image."""
    m = {**{i: i for i in range(K)}, 255: IGNORE}
    counter = ImageCounter(Lookup(K, m, m))

    def run() -> None:
        for g, p in pairs:
            counter.add(g, p)
            counter.finish()

    return run


def per_core_rate(tmp: Path, n: int, h: int, w: int, rounds: int) -> dict[str, float]:
    """ns/px on one thread: numpy idiom, segiou's kernel (in memory), a task (from zstd Zarr)."""
    g, p = data_store(tmp, n, h, w)
    job = job_for(open_masks(g), open_masks(p))
    units = task_units(job.gt, np.array([0, n, 0, -1]))
    gt, pred = cityscapes_like(min(n, 8), h, w, seed=40)
    pairs = list(zip(gt, pred, strict=True))
    kernel = kernel_one_thread(pairs)
    t = interleaved_seconds(
        {
            "bincount": lambda: [bincount_idiom(a, b) for a, b in pairs],
            "kernel": kernel,
            "task": lambda: count_group(job, units),
        },
        rounds=rounds,
    )
    mem_px, store_px = len(pairs) * h * w, n * h * w
    return {
        "bincount_ns": statistics.median(t["bincount"]) / mem_px * 1e9,
        "kernel_ns": statistics.median(t["kernel"]) / mem_px * 1e9,
        "task_ns": statistics.median(t["task"]) / store_px * 1e9,
        "kernel_x": median_ratio(t["bincount"], t["kernel"]),
        "task_x": median_ratio(
            [b / mem_px for b in t["bincount"]], [s / store_px for s in t["task"]]
        ),
    }


# -- the arithmetic ----------------------------------------------------------------------------
def predict(
    n_images: int,
    workers: int,
    ns_per_px: float,
    overhead_s: float,
    task_seconds: float | None = None,
) -> dict[str, float]:
    """Wall time of counting ``n_images`` Cityscapes-size pairs on ``workers`` threads.

    Tasks are sized as the engine sizes them on a cluster (:func:`cluster_task_seconds` of
    work at ``ns_per_px``, at least one per worker). Each bound assumes the others away:

    * counting: every thread busy, ``n_images * H * W * ns_per_px / workers``;
    * scheduling: the scheduler handles one task at a time (counting and sum tasks),
      ``overhead_s`` each;
    * object storage: each image costs two chunk reads (1024 x 2048 chunks), a thread reads
      one after the other at ``S3_LATENCY_S`` each before counting, and one S3 prefix serves
      ``S3_GET_PER_S`` requests per second.

    The expected wall time is the largest bound that applies (local disk or page cache:
    counting or scheduling; object storage: reading, requests or scheduling), plus a start-up
    of about a second (the probe, connecting, compiling on each worker) not shown.
    """
    px = H * W
    t_img = px * ns_per_px * 1e-9
    d = cluster_task_seconds(workers, task_seconds)
    per_task = max(1, int(d / t_img))
    tasks = max(min(workers, n_images), math.ceil(n_images / per_task))
    all_tasks = tasks + math.ceil(tasks / (SPLIT_EVERY - 1))
    counting = n_images * t_img / workers
    scheduling = all_tasks * overhead_s
    # from object storage the probe measures the reads too: tasks hold fewer images
    t_obj = t_img + 2 * S3_LATENCY_S
    tasks_obj = max(min(workers, n_images), math.ceil(n_images / max(1, int(d / t_obj))))
    reading = n_images * t_obj / workers
    requests = 2 * n_images / S3_GET_PER_S
    scheduling_obj = (tasks_obj + math.ceil(tasks_obj / (SPLIT_EVERY - 1))) * overhead_s
    return {
        "task_s": d,
        "tasks": tasks,
        "counting": counting,
        "scheduling": scheduling,
        "reading": reading,
        "requests": requests,
        "scheduling_obj": scheduling_obj,
        "local": max(counting, scheduling),
        "object_store": max(reading, requests, scheduling_obj),
    }


def _fmt(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"


def table(ns_per_px: float, overhead_s: float) -> str:
    """The README's scale table (markdown)."""
    lines = [
        (
            "| images | workers | task | tasks | counting | scheduling | local disk: expected "
            "(bound) | S3: reading, requests | S3: expected (bound) |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n in (10**5, 10**6):
        for w in (10, 100, 1000):
            for d in (None, TASK_SECONDS) if w * 2 * SCHEDULER_SECONDS > TASK_SECONDS else (None,):
                r = predict(n, w, ns_per_px, overhead_s, d)
                local = "scheduling" if r["scheduling"] > r["counting"] else "counting"
                obj = max(
                    ("reading", r["reading"]),
                    ("requests/s", r["requests"]),
                    ("scheduling", r["scheduling_obj"]),
                    key=lambda kv: kv[1],
                )[0]
                lines.append(
                    f"| {n:,} | {w:,} | {r['task_s']:.2g} s{'' if d is None else ' (fixed)'} | "
                    f"{r['tasks']:,.0f} | {_fmt(r['counting'])} | {_fmt(r['scheduling'])} | "
                    f"{_fmt(r['local'])} ({local}) | {_fmt(r['reading'])}, "
                    f"{_fmt(r['requests'])} | {_fmt(r['object_store'])} ({obj}) |"
                )
    return "\n".join(lines)


_PLAN_CODE = """
import json, sys, time
from pathlib import Path
from segiou.io.zarr import open_masks
from segiou.parallel import plan_ranges
def status(field):  # kB -> MiB, from /proc/self/status
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith(field))
    return int(line.split()[1]) / 1024
t0 = time.perf_counter()
ms = open_masks(sys.argv[1])
t1 = time.perf_counter()
rss_open = status("VmRSS:")
Path("/proc/self/clear_refs").write_text("5")  # reset the peak RSS (VmHWM) to the current RSS
ranges = plan_ranges(ms)
t2 = time.perf_counter()
print(json.dumps({"open_s": t1 - t0, "plan_s": t2 - t1, "rss_open_mib": rss_open,
                  "rss_plan_mib": status("VmHWM:"), "tasks": len(ranges)}))
"""


def plan_in_fresh_process(url: str) -> dict[str, float]:
    """Open and plan in a new process: times, its RSS after opening, and its peak RSS while
    planning (Linux: the peak is reset after opening through ``/proc/self/clear_refs``)."""
    import json
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _PLAN_CODE, url], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# -- main --------------------------------------------------------------------------------------
def main() -> int:
    ok = True
    with tempfile.TemporaryDirectory(prefix="segiou-scale-") as tmp_name:
        tmp = Path(tmp_name)
        rate = per_core_rate(tmp / "data", 16, H, W, rounds=7)
        print(
            f"per-core rate, 1 thread, 1024x2048: numpy bincount {rate['bincount_ns']:.2f} ns/px | "
            f"segiou kernel {rate['kernel_ns']:.3f} ns/px ({rate['kernel_x']:.1f}x bincount) | "
            f"a task from zstd Zarr (read, decode, count) {rate['task_ns']:.3f} ns/px "
            f"({rate['task_x']:.1f}x bincount)"
        )
        ns = rate["task_ns"]
        with subprocess_cluster(tmp) as (client, pid):
            over = {
                n: scheduler_overhead(client, n, rounds=3, scheduler_pid=pid) for n in (2000, 10000)
            }
        for o in over.values():
            print(
                f"scheduler: {o['tasks']:,.0f} no-op tasks, dask scheduler + 2 worker processes "
                f"x 1 thread: {o['cpu_s'] * 1e3:.2f} ms of scheduler CPU per task, "
                f"{o['wall_s'] * 1e3:.2f} ms wall per task"
            )
        overhead = max(o["cpu_s"] for o in over.values())
        with local_cluster() as client:
            for n in (10**4, 10**5, 10**6):
                url = metadata_store(tmp / f"meta{n}.zarr", n)
                fresh = plan_in_fresh_process(url)
                ms = open_masks(url)
                fig = plan_figures(ms, TASK_PIXELS, 4, rounds=5)
                t_base = float("nan")
                if n <= 10**5:  # the loop takes ~15 s at 10^6
                    t = interleaved_seconds(
                        {
                            "loop": lambda: per_image_plan(ms, TASK_PIXELS),  # noqa: B023
                            "vectorised": lambda: plan_ranges(ms),  # noqa: B023
                        },
                        rounds=3,
                    )
                    t_base = median_ratio(t["loop"], t["vectorised"])
                grown = fresh["rss_plan_mib"] - fresh["rss_open_mib"]
                good = n < 10**6 or (
                    fig["seconds"] <= PLAN_TARGETS["seconds"]
                    and max(fig["peak_mib"], grown) <= PLAN_TARGETS["mib"]
                )
                ok &= good
                print(
                    f"plan {n:>9,} images (8 Mpx tasks, as locally): {fig['seconds'] * 1e3:6.1f} ms, "
                    f"{fig['peak_mib']:5.1f} MiB allocated at the peak; a fresh process: open "
                    f"{fresh['open_s']:.2f} s to {fresh['rss_open_mib']:.0f} MiB RSS, plan "
                    f"{fresh['plan_s'] * 1e3:.0f} ms, peak RSS +{grown:.1f} MiB; {fig['tasks']:,} tasks"
                    + (
                        f" | {t_base:,.0f}x faster than segiou 0.2's per-image loop"
                        if n <= 10**5
                        else ""
                    )
                    + (
                        f" | target <= 1 s, <= 100 MiB {'PASS' if good else 'FAIL'}"
                        if n == 10**6
                        else ""
                    )
                )
                job = job_for(ms, ms)
                for threads in (10, 1000):
                    d = cluster_task_seconds(threads)
                    ppt = max(1, round(d / (ns * 1e-9)))
                    dist = plan_figures(ms, ppt, threads, rounds=3)
                    check_covers(ms, dist["ranges"])
                    g = graph_figures(client, job, dist["ranges"])
                    print(
                        f"    on {threads:,} threads ({d:.1f} s tasks at {ns:.2f} ns/px): "
                        f"{dist['tasks']:,} tasks planned in {dist['seconds'] * 1e3:.1f} ms; "
                        f"graph of {g['tasks']:,} keys built in {g['build_s'] * 1e3:.0f} ms, "
                        f"{g['shipped_bytes'] / 2**10:,.0f} KiB to the scheduler "
                        f"({g['shipped_bytes'] / g['tasks']:.0f} B/key); the job "
                        f"{g['job_bytes'] / 2**20:.1f} MiB, sent once"
                    )
    print(
        f"\nexpected wall time ({ns:.2f} ns/px per thread, {overhead * 1e3:.2f} ms of "
        "scheduler per task):"
    )
    print(table(ns, overhead))
    return 0 if ok else 1


# -- pytest (CI: --benchmark-disable runs each part once, on tiny inputs) ----------------------
@pytest.fixture(scope="module")
def small(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("benchmark_disable"))


@pytest.mark.parametrize("method", ["per_image_loop", "vectorised"])
def test_plan(benchmark, tmp_path, small, method: str) -> None:  # type: ignore[no-untyped-def]
    n = 2000 if small else 10**5
    ms = open_masks(metadata_store(tmp_path / "meta.zarr", n))
    benchmark.group = f"plan-{n}"
    fn = {
        "per_image_loop": lambda: per_image_plan(ms, TASK_PIXELS),
        "vectorised": lambda: [task_units(ms, r) for r in plan_ranges(ms)],
    }[method]
    tasks = benchmark(fn)
    # the same tasks as segiou 0.2's plan (equal images: runs of 4 = 8 Mpx), every image once
    assert [t.tolist() for t in tasks] == [t.tolist() for t in per_image_plan(ms, TASK_PIXELS)]
    check_covers(ms, plan_ranges(ms))


def test_plan_in_a_fresh_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    fig = plan_in_fresh_process(metadata_store(tmp_path / "meta.zarr", 1000))
    assert fig["tasks"] == 250
    assert fig["rss_plan_mib"] >= fig["rss_open_mib"] > 0


def test_graph_is_small_and_the_job_goes_to_the_workers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    n = 3000
    ms = open_masks(metadata_store(tmp_path / "meta.zarr", n))
    ranges = plan_ranges(ms, pixels_per_task=10 * H * W)
    with local_cluster() as client:
        g = graph_figures(client, job_for(ms, ms), ranges)
    level, keys = len(ranges), len(ranges)
    while level > 1:  # the tree of sums
        level = -(-level // SPLIT_EVERY)
        keys += level
    assert g["tasks"] == keys
    assert g["shipped_bytes"] < 100 * g["tasks"]  # integers per key: no image names
    assert g["job_bytes"] > n * len("city00_000000_000019")  # the names are in the job


def test_scheduler_overhead(tmp_path, small) -> None:  # type: ignore[no-untyped-def]
    with subprocess_cluster(tmp_path) as (client, pid):
        o = scheduler_overhead(client, 50 if small else 2000, rounds=1, scheduler_pid=pid)
    assert 0 < o["cpu_s"] < o["wall_s"] * 2
    assert o["tasks"] == (50 + 7 + 1 if small else 2000 + 250 + 32 + 4 + 1)


def test_per_core_rate(tmp_path, small) -> None:  # type: ignore[no-untyped-def]
    n, h, w = (2, 64, 128) if small else (16, H, W)
    rate = per_core_rate(tmp_path, n, h, w, rounds=1 if small else 5)
    assert rate["task_ns"] > 0
    assert rate["kernel_ns"] > 0


def test_predictions() -> None:
    a, b = predict(10**5, 10, 1.0, 1e-3), predict(10**5, 100, 1.0, 1e-3)
    assert b["counting"] == pytest.approx(a["counting"] / 10)
    assert predict(10**6, 100, 1.0, 1e-3)["counting"] == pytest.approx(10 * b["counting"])
    big = predict(10**6, 1000, 1.0, 1e-3)
    assert big["task_s"] == pytest.approx(2.0)  # raised with the thread count
    assert big["scheduling"] < predict(10**6, 1000, 1.0, 1e-3, TASK_SECONDS)["scheduling"]
    assert "| 1,000,000 | 1,000 |" in table(1.0, 1e-3)


if __name__ == "__main__":
    sys.exit(main())
