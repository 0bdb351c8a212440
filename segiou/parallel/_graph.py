"""The Dask graph of a count: one task per range of the plan, a tree of sums; and running it.

Also what runs on a cluster's workers besides the graph: the probe that measures the counting
rate the engine sizes tasks with, and the helper threads a task uses when it is alone on its
worker.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from segiou._typing import IntArray
from segiou.errors import (
    UsageError,
)
from segiou.parallel._plan import next_piece, task_units
from segiou.parallel._tasks import Job, Partial, combine, count_group

__all__ = ["build_graph", "client_of", "compute", "count_task", "probe", "wait"]


def build_graph(job: Any, ranges: IntArray, split_every: int) -> Any:
    """One counting task per row of the plan, then a tree of sums with fan-in ``split_every``.

    ``job`` is the :class:`Job`, or a ``distributed.Future`` holding it (scattered to the
    workers once). A :class:`Job` becomes one key of the graph that every counting task depends
    on: it is shipped once, not once per task. Each task carries only its row of the plan
    (four integers) and turns it into units on the worker (:func:`task_units`), so the graph
    grows with the number of tasks, not of images. Keys are ``(name, index)`` tuples, as Dask's
    collections name theirs (``segiou-count-<run>``, ``segiou-sum-<run>-<level>``): the name is
    pickled once per graph, the index per task. The graph is written in Dask's documented
    graph format (a dict of keys to ``(function, *arguments)`` tuples) wrapped in a
    :class:`dask.delayed.Delayed`: composing ``delayed`` calls merged the children's graphs at
    every node and cost about a millisecond per task (measured).
    """
    import uuid

    from dask.delayed import Delayed

    if split_every < 2:
        msg = (
            f"split_every must be at least 2 (the fan-in of the tree of sums), got "
            f"{split_every}; the default is 8"
        )
        raise UsageError(msg)
    run = uuid.uuid4().hex[:16]
    dsk: dict[Any, Any] = {}
    if isinstance(job, Job):
        ref: Any = f"segiou-job-{run}"
        dsk[ref] = job
    else:
        ref = job  # a Future: the scheduler knows its key, the workers fetch its data
    name = f"segiou-count-{run}"
    rows = np.asarray(ranges, dtype=np.int64).reshape(-1, 4).tolist()
    # ints in a tuple: literals that dask neither unpacks nor mistakes for keys
    level: list[Any] = [(name, i) for i in range(len(rows))]
    dsk.update({k: (count_task, ref, tuple(r)) for k, r in zip(level, rows, strict=True)})
    depth = 0
    while len(level) > 1:
        name = f"segiou-sum-{run}-{depth}"
        nxt = [(name, j) for j in range(-(-len(level) // split_every))]
        for j, key in enumerate(nxt):
            dsk[key] = (combine, level[j * split_every : (j + 1) * split_every])
        level = nxt
        depth += 1
    return Delayed(level[0], dsk)


# -- one task ----------------------------------------------------------------------------------
def count_task(job: Job, task: tuple[int, int, int, int]) -> Partial:
    """Count one row of the plan (one Dask task); see :func:`segiou.parallel.plan_ranges`.

    Single-threaded, like every task: the worker's threads are Dask's, one task each, and the
    Numba kernels a task calls are serial (the engine never starts Numba's own thread pool).
    On a ``distributed`` worker of several threads, a task that finds itself alone there (no
    other task running or ready, e.g. at the end of a run) spreads its remaining pieces over
    the idle threads (:func:`_spread`).
    """
    units = task_units(job.gt, np.asarray(task, dtype=np.int64))
    worker = _threaded_worker()
    if worker is None or len(units) < 2:
        return count_group(job, units)
    return _spread(job, units, worker)


def _threaded_worker() -> Any:
    """Return this task's ``distributed`` worker if it has several threads, else None."""
    try:
        from distributed import get_worker
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        worker = get_worker()
    except ValueError:  # not in a task of a distributed worker (local schedulers)
        return None
    return worker if worker.state.nthreads > 1 else None


def _busy(worker: Any) -> bool:
    """Whether another task runs or waits on the worker (read without locks: ints and sizes)."""
    state = worker.state
    return bool(state.executing_count > 1 or len(state.ready) or len(state.constrained))


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _helper_pool(size: int) -> ThreadPoolExecutor:
    """Threads kept per worker process, so their decode buffers and count tables persist."""
    with _pools_lock:
        pool = _pools.get(size)
        if pool is None:
            pool = _pools[size] = ThreadPoolExecutor(size, thread_name_prefix="segiou-helper")
        return pool


def _spread(job: Job, units: IntArray, worker: Any) -> Partial:
    """Count ``units`` piece by piece, with the worker's idle threads while it has any.

    Pieces are one unit (an image or a band), or one chunk of images along N for a stack (so
    it is decoded once). Before each piece the task checks the worker: if nothing else runs or
    waits there, it hands its remaining pieces to ``nthreads - 1`` helper threads as well; a
    helper stops taking pieces as soon as another task runs or waits on the worker. So the
    worker never runs more threads than it has, except helpers finishing their current piece
    (a few milliseconds) after a new task arrived. Partials are integer sums: which thread
    counted what does not change a count.
    """
    step = job.gt.arrays[0].chunks[0] if getattr(job.gt, "layout", "") == "stack" else 1
    cut = np.flatnonzero(np.diff(units[:, 0] // step)) + 1
    bounds = np.concatenate([[0], cut, [len(units)]]).tolist()
    pieces = itertools.pairwise(bounds)
    lock = threading.Lock()
    failed = threading.Event()
    n_help = min(worker.state.nthreads, len(bounds) - 1) - 1

    def take() -> tuple[int, int] | None:
        with lock:
            return next(pieces, None)

    def count(piece: tuple[int, int]) -> Partial:
        try:
            return count_group(job, units[piece[0] : piece[1]])
        except BaseException:
            failed.set()  # the others stop; the task reports the first error
            raise

    def helper() -> list[Partial]:
        out = []
        while not failed.is_set() and not _busy(worker) and (piece := take()) is not None:
            out.append(count(piece))
        return out

    parts: list[Partial] = []
    helpers: list[Any] = []
    try:
        while not failed.is_set():
            if not helpers and n_help > 0 and not _busy(worker):
                pool = _helper_pool(worker.state.nthreads - 1)
                helpers = [pool.submit(helper) for _ in range(n_help)]
            piece = take()
            if piece is None:
                break
            parts.append(count(piece))
    finally:
        done = [f.result() for f in helpers]  # waits for the helpers; re-raises their error
    parts += [p for ps in done for p in ps]
    return combine(parts)


def probe(job: Job, seconds: float, split_images: bool) -> tuple[Partial, int, int, float]:
    """Count the first images until ``seconds`` of counting were timed; measure the rate.

    The first piece (one image, a chunk of images along N, or one chunk row of a large image)
    warms up the process (Numba's compiled kernels, the store's connection) and is not timed.

    Returns
    -------
    partial : Partial
        Counts of what was counted (nothing is counted twice: the engine plans the rest from
        the returned position).
    image, row : int
        Where the rest starts (``image == N`` when everything was counted).
    ns_per_px : float
        Timed nanoseconds per pixel on one thread (read, decode, count), or ``nan`` when
        nothing past the first piece was counted.
    """
    at = (0, 0)
    n = len(job.gt.names)
    acc: Partial | None = None
    timed, pixels = 0.0, 0
    first = True
    while at[0] < n and (first or not pixels or timed < seconds):  # warm up, then time one+
        units, *nxt = next_piece(job.gt, at, split_images)
        t0 = time.perf_counter()
        part = count_group(job, units)
        dt = time.perf_counter() - t0
        acc = part if acc is None else combine([acc, part])
        if not first:
            timed += dt
            pixels += _pixels(job, units)
        first = False
        at = (nxt[0], nxt[1])
    assert acc is not None
    return acc, at[0], at[1], timed / pixels * 1e9 if pixels else float("nan")


def _pixels(job: Job, units: IntArray) -> int:
    ends = units[:, 2].copy()
    whole = ends < 0  # image files: their height is known once decoded
    if whole.any():
        ends[whole] = [job.gt.image_shape(int(i))[0] for i in units[whole, 0]]
    widths = [job.gt.image_shape(int(i))[1] for i in units[:, 0]]
    return int(((ends - units[:, 1]) * np.asarray(widths, dtype=np.int64)).sum())


# -- running -----------------------------------------------------------------------------------
def client_of(scheduler: Any) -> Any:
    """Return the ``distributed.Client`` a count runs on, or None for Dask's local schedulers.

    That is ``scheduler`` itself when it is a Client, else the current default Client when
    ``scheduler`` is None.
    """
    if hasattr(scheduler, "submit"):
        return scheduler
    if scheduler is None:
        try:
            from distributed import default_client

            return default_client()
        except (ImportError, ValueError):
            return None
    return None


def compute(obj: Any, scheduler: Any, progress: bool) -> Any:
    client = client_of(scheduler)
    if client is not None:
        return wait(client.compute(obj), progress)
    local = scheduler or "threads"
    if progress:
        from dask.diagnostics.progress import ProgressBar

        with ProgressBar(out=sys.stderr):
            return obj.compute(scheduler=local)
    return obj.compute(scheduler=local)


def wait(future: Any, progress: bool) -> Any:
    """Return the result of a ``distributed`` future, with distributed's progress bar if asked."""
    if progress:  # on stderr: stdout carries the results (tables, JSON, redirected files)
        from contextlib import redirect_stdout

        from distributed import progress as dist_progress

        with redirect_stdout(sys.stderr):  # distributed's text bar writes to stdout
            dist_progress(future)
    return future.result()
