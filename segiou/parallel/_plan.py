"""Plan the counting tasks: runs of whole images, large images split into bands of chunk rows.

A plan is one ``int64`` array with a row per task, ``(first image, end image, first row, end
row)``: the task counts images ``first..end-1``, each from ``first row`` to ``end row`` (``-1``:
to the image's last row). A task of several images always reads them whole; a band is one image
(``end = first + 1``) and its rows. Planning is vectorised over the images (no Python object per
image or per task), and the rows are all that goes into the graph: a task turns its row into the
units it counts (:func:`task_units`) from the job every task shares.
"""

from __future__ import annotations

import math

import numpy as np

from segiou._typing import IntArray
from segiou.io.chunks import image_array
from segiou.io.sources import Source
from segiou.io.zarr import MaskSet

__all__ = [
    "SCHEDULER_SECONDS",
    "TASK_PIXELS",
    "TASK_SECONDS",
    "band_rows",
    "cluster_task_seconds",
    "image_shapes",
    "next_piece",
    "plan_groups",
    "plan_ranges",
    "plan_tasks",
    "task_pixels",
    "task_units",
]

#: Pixels per task on local schedulers (fewer, larger tasks amortise Dask's overhead; on a
#: distributed cluster the engine sizes tasks by time instead, see ``count_stores``).
TASK_PIXELS = 8 << 20

#: Seconds of counting per task on a ``distributed`` cluster: long against the scheduler's
#: overhead per task (about 1 ms, dask's documentation and ``benchmarks/bench_scale.py``), so
#: that overhead stays under 1% of the work, while a run of a few thousand images still makes
#: hundreds of tasks to balance over the workers.
TASK_SECONDS = 0.2

#: CPU seconds ``distributed``'s scheduler spends per task: 0.66-1.0 ms measured for the
#: ``dask scheduler`` process on graphs of 2,000 and 10,000 tasks shaped like segiou's
#: (``benchmarks/bench_scale.py``; 1.5 ms on a machine twice as busy). It handles one task at a time, so ``threads`` workers busy
#: with tasks of ``d`` seconds ask it for ``threads / d`` tasks a second.
SCHEDULER_SECONDS = 1e-3


def cluster_task_seconds(threads: int, task_seconds: float | None = None) -> float:
    """Return the seconds of counting per task on a cluster of ``threads`` worker threads.

    ``task_seconds`` when given; else :data:`TASK_SECONDS`, raised to
    ``2 * threads * SCHEDULER_SECONDS`` so that the scheduler stays at most half busy
    (0.2 s up to 100 threads, 2 s for 1,000).

    Parameters
    ----------
    threads : int
        Worker threads of the cluster.
    task_seconds : float, optional
        An explicit choice, returned as is.

    Returns
    -------
    float

    Examples
    --------
    >>> cluster_task_seconds(16), cluster_task_seconds(1000), cluster_task_seconds(1000, 0.5)
    (0.2, 2.0, 0.5)
    """
    if task_seconds is not None:
        return task_seconds
    return max(TASK_SECONDS, 2 * threads * SCHEDULER_SECONDS)


#: The largest task size :func:`task_pixels` returns (2**53 pixels: exact as a float).
MAX_TASK_PIXELS = 1 << 53


def task_pixels(seconds: float, ns_per_px: float) -> int:
    """Return the pixels of a task of ``seconds`` at ``ns_per_px``, within 1..2**53.

    Extreme rates or durations (``ns_per_px=1e-300``, ``task_seconds=1e300``) make the
    quotient overflow to infinity: the task size is clamped instead (a plan still makes at
    least a task per worker thread).

    Examples
    --------
    >>> task_pixels(0.2, 2.0), task_pixels(1e-3, 1e9), task_pixels(1.0, 1e-300) == 1 << 53
    (100000000, 1, True)
    """
    px = seconds * 1e9 / ns_per_px if ns_per_px > 0 else math.inf
    if math.isnan(px):  # inf / inf: both as large as they get
        px = math.inf
    return max(1, round(min(px, MAX_TASK_PIXELS)))


def image_shapes(src: Source) -> IntArray:
    """Return ``(H, W)`` of every image, ``(N, 2)`` int64 (image files: from their headers)."""
    if isinstance(src, MaskSet):
        return src.image_shapes()
    return np.array([src.image_shape(i) for i in range(len(src.names))],
                    dtype=np.int64).reshape(-1, 2)  # fmt: skip


def _block(src: Source) -> int:
    """Return the images per chunk along N (a task never splits one: it is decoded once)."""
    return src.arrays[0].chunks[0] if isinstance(src, MaskSet) and src.layout == "stack" else 1


def _splittable(src: Source, split_images: bool) -> bool:
    return (
        split_images
        and isinstance(src, MaskSet)
        and (src.layout == "group" or src.arrays[0].chunks[0] == 1)
    )


def band_rows(src: Source, i: int) -> int:
    """Return the rows of one chunk row of image ``i`` (the finest band it splits into)."""
    arr, n = image_array(src, i)
    return int(arr.chunks[0 if n is None else 1])


def plan_ranges(
    src: Source,
    *,
    pixels_per_task: int = TASK_PIXELS,
    min_tasks: int = 4,
    split_images: bool = True,
    first: tuple[int, int] = (0, 0),
) -> IntArray:
    """Plan the counting tasks as index ranges, vectorised over the images.

    Images are taken in order and cut into runs of about ``target`` pixels: a run holds the
    images (whole chunks of images along N for a stack) that start within the same multiple of
    ``target`` pixels from the run's start. ``target`` is ``pixels_per_task``, lowered to
    ``pixels // min_tasks`` so that a small dataset still makes ``min_tasks`` tasks. An image
    larger than ``target`` (only in chunked stores with one image per chunk along N, or
    groups, and with ``split_images``) is split into bands of whole chunk rows of about
    ``target`` pixels, one task each, so a few large images still use every worker.

    Parameters
    ----------
    src : MaskSet or image-file source
        Ground-truth masks.
    pixels_per_task : int, default 8 << 20
        Target pixels per task.
    min_tasks : int, default 4
        Make at least this many tasks when the data allows it (parallelism).
    split_images : bool, default True
        Allow bands (the engine allows them when both sides are chunked stores).
    first : (int, int), default (0, 0)
        Plan from image ``first[0]``, row ``first[1]`` on (what comes before was counted
        already, e.g. by the engine's probe on a cluster). A row other than 0 needs a
        splittable store; the position must start a chunk of images along N.

    Returns
    -------
    ndarray of int64, shape (tasks, 4)
        One row per task: ``(first image, end image, first row, end row)``, end row ``-1``
        meaning the image's last row; in image order, covering every pixel from ``first`` on
        exactly once.

    Examples
    --------
    >>> import tempfile
    >>> from segiou.io.zarr import create_stack, open_masks
    >>> with tempfile.TemporaryDirectory() as d:  # metadata only: planning reads no chunk
    ...     _ = create_stack(d + "/gt.zarr", n=5, height=10, width=10)
    ...     plan_ranges(open_masks(d + "/gt.zarr"), pixels_per_task=200, min_tasks=1).tolist()
    [[0, 2, 0, -1], [2, 4, 0, -1], [4, 5, 0, -1]]
    """
    n = len(src.names)
    i0, y0 = first
    if i0 >= n:
        return np.empty((0, 4), dtype=np.int64)
    shapes = image_shapes(src)[i0:]
    px = shapes[:, 0] * shapes[:, 1]  # int64, one per remaining image
    total = int(px.sum()) - y0 * int(shapes[0, 1])
    target = max(1, min(int(pixels_per_task), total // max(1, min_tasks)))
    splittable = _splittable(src, split_images)
    parts = []
    if y0 > 0:  # the rest of an image the probe counted partly
        if not splittable:
            msg = f"cannot plan from row {y0} of image {i0}: the store's images are not split"
            raise ValueError(msg)
        h, w = (int(v) for v in shapes[0])
        parts.append(_bands(np.array([i0]), np.array([y0]), np.array([h]), np.array([w]),
                            np.array([band_rows(src, i0)]), target))  # fmt: skip
        i0, shapes, px = i0 + 1, shapes[1:], px[1:]
    if len(px):
        parts.append(_runs_and_bands(src, i0, shapes, px, target, splittable))
    return np.concatenate(parts) if parts else np.empty((0, 4), dtype=np.int64)


def _runs_and_bands(src: Source, i0: int, shapes: IntArray, px: IntArray, target: int,
                    splittable: bool) -> IntArray:  # fmt: skip
    step = _block(src)
    if step > 1:  # chunks of several images along N: blocks of whole chunks (never split)
        starts = np.arange(0, len(px), step)
        if i0 % step:  # the first chunk was started elsewhere: align to the next one
            starts = np.unique(np.concatenate([[0], np.arange(step - i0 % step, len(px), step)]))
        bpx = np.add.reduceat(px, starts)
    else:
        starts, bpx = None, px
    big = bpx > target if splittable else np.zeros(len(bpx), dtype=bool)
    small = np.where(big, 0, bpx)
    offset = np.cumsum(small)
    offset -= small  # pixels of the run before each block, big blocks contributing none
    # each big block restarts the count: subtract the offset at the last big block so far
    offset -= np.maximum.accumulate(np.where(big, offset, 0))
    key = offset // target
    del small, offset
    new = np.ones(len(bpx), dtype=bool)  # a block that starts a task
    new[1:] = (key[1:] != key[:-1]) | big[1:] | big[:-1]
    del key
    cuts = np.flatnonzero(new)
    whole = cuts[~big[cuts]]  # tasks of whole images: from a cut to the next cut
    ends = np.append(cuts, len(bpx))[np.searchsorted(cuts, whole) + 1]
    if starts is not None:
        first_img = starts[whole]
        end_img = np.append(starts, len(px))[ends]
    else:
        first_img, end_img = whole, ends
    runs = np.zeros((len(whole), 4), dtype=np.int64)
    runs[:, 0] = first_img + i0
    runs[:, 1] = end_img + i0
    runs[:, 3] = -1
    if not big.any():
        return runs
    idx = np.flatnonzero(big)  # single images (splittable stores have one image per block)
    rows = np.array([band_rows(src, i0 + int(j)) for j in idx], dtype=np.int64)
    bands = _bands(idx + i0, np.zeros(len(idx), dtype=np.int64), shapes[idx, 0],
                   shapes[idx, 1], rows, target)  # fmt: skip
    out = np.concatenate([runs, bands])
    return out[np.lexsort((out[:, 2], out[:, 0]))]


def _bands(images: IntArray, top: IntArray, h: IntArray, w: IntArray, rows: IntArray,
           target: int) -> IntArray:  # fmt: skip
    """Bands of whole chunk rows of about ``target`` pixels, rows ``top..h`` of each image."""
    band = np.maximum(rows, target // np.maximum(w, 1) // rows * rows)
    count = -(-(h - top) // band)
    which = np.repeat(np.arange(len(images)), count)
    k = np.arange(len(which)) - np.repeat(np.cumsum(count) - count, count)
    out = np.empty((len(which), 4), dtype=np.int64)
    out[:, 0] = images[which]
    out[:, 1] = out[:, 0] + 1
    out[:, 2] = top[which] + k * band[which]
    out[:, 3] = np.minimum(h[which], out[:, 2] + band[which])
    return out


def task_units(src: Source, task: IntArray) -> IntArray:
    """Return the units ``(image, first row, end row)`` one task of a plan counts.

    Parameters
    ----------
    src : MaskSet or image-file source
        Ground-truth masks (the job's).
    task : array of 4 int
        A row of :func:`plan_ranges`.

    Returns
    -------
    ndarray of int64, shape (units, 3)
        A whole image of a store runs to its height; an image file (decoded whole, its height
        known once decoded) to ``-1``.
    """
    start, stop, top, bottom = (int(v) for v in np.asarray(task).reshape(4))
    units = np.empty((stop - start, 3), dtype=np.int64)
    units[:, 0] = np.arange(start, stop)
    units[:, 1] = top
    if bottom >= 0:
        units[:, 2] = bottom
    elif isinstance(src, MaskSet):
        units[:, 2] = src.image_shapes()[start:stop, 0]
    else:
        units[:, 2] = -1
    return units


def next_piece(src: Source, at: tuple[int, int], split_images: bool) -> tuple[IntArray, int, int]:
    """Return the smallest piece of work from position ``at`` (image, row) on.

    That is one chunk row of a splittable image, else one chunk of images along N (one image
    in most stores).

    Returns
    -------
    units : ndarray of int64, shape (units, 3)
        What to count.
    image, row : int
        Where the next piece starts.
    """
    i, y = at
    if _splittable(src, split_images):
        h = int(src.image_shapes()[i, 0])
        end = min(h, (y // band_rows(src, i) + 1) * band_rows(src, i))
        units = np.array([[i, y, end]], dtype=np.int64)
        return (units, i, end) if end < h else (units, i + 1, 0)
    step = _block(src)
    stop = min(len(src.names), (i // step + 1) * step)
    return task_units(src, np.array([i, stop, 0, -1])), stop, 0


def plan_groups(
    ms: MaskSet, *, pixels_per_task: int = TASK_PIXELS, min_tasks: int = 4
) -> list[list[int]]:
    """Split the images into tasks of whole images, aligned to the stack's chunks along N.

    Parameters
    ----------
    ms : MaskSet
        Ground-truth masks.
    pixels_per_task : int, default 8 << 20
        Target pixels per task.
    min_tasks : int, default 4
        Make at least this many tasks when there are enough chunk rows (parallelism).

    Returns
    -------
    list of list of int
        Image indices of each task (a Python list per image: for small sets and tests; the
        engine uses :func:`plan_ranges`).
    """
    ranges = plan_ranges(ms, pixels_per_task=pixels_per_task, min_tasks=min_tasks,
                         split_images=False)  # fmt: skip
    return [list(range(a, b)) for a, b, _, _ in ranges.tolist()]


def plan_tasks(
    ms: Source,
    *,
    pixels_per_task: int = TASK_PIXELS,
    min_tasks: int = 4,
    split_images: bool = True,
) -> list[IntArray]:
    """Plan the counting tasks: :func:`plan_ranges`, each task expanded into its units.

    Parameters
    ----------
    ms : MaskSet or image-file source
        Ground-truth masks.
    pixels_per_task : int, default 8 << 20
        Target pixels per task.
    min_tasks : int, default 4
        Make at least this many tasks when the data allows it (parallelism).
    split_images : bool, default True
        Allow bands (the engine allows them when both sides are chunked stores).

    Returns
    -------
    list of ndarray of int64, shape (units, 3)
        Per task, its units ``(image, first row, end row)`` (see :func:`task_units`).
    """
    ranges = plan_ranges(ms, pixels_per_task=pixels_per_task, min_tasks=min_tasks,
                         split_images=split_images)  # fmt: skip
    return [task_units(ms, r) for r in ranges]
