"""Plan the counting tasks: images grouped into tasks, large images split into bands."""

from __future__ import annotations

import numpy as np

from segiou._typing import IntArray
from segiou.io.chunks import image_array
from segiou.io.sources import Source
from segiou.io.zarr import MaskSet

__all__ = ["TASK_PIXELS", "plan_groups", "plan_tasks"]

#: Aim for tasks of about this many pixels (fewer, larger tasks amortise Dask's overhead).
TASK_PIXELS = 8 << 20


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
        Image indices of each task.
    """
    n = len(ms.names)
    if n == 0:
        return []
    step = ms.arrays[0].chunks[0] if isinstance(ms, MaskSet) and ms.layout == "stack" else 1
    units = [list(range(s, min(s + step, n))) for s in range(0, n, step)]
    total = ms.n_pixels()
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
    return groups


def plan_tasks(
    ms: Source,
    *,
    pixels_per_task: int = TASK_PIXELS,
    min_tasks: int = 4,
    split_images: bool = True,
) -> list[IntArray]:
    """Plan the counting tasks: images grouped, large ones split into bands of chunk rows.

    Whole images are grouped as :func:`plan_groups` does; an image larger than a task's share is
    split into bands of whole chunk rows, so a dataset of a few large images (one satellite
    scene, a 3-image test) still runs on every worker. Only chunked stores with one image per
    chunk along N (or a group of 2-D arrays) are split, and only with ``split_images``.

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
        Per task, its units ``(image, first row, end row)``.
    """
    groups = plan_groups(ms, pixels_per_task=pixels_per_task, min_tasks=min_tasks)
    if not groups:
        return []
    target = max(1, min(pixels_per_task, ms.n_pixels() // max(1, min_tasks)))
    splittable = (
        split_images
        and isinstance(ms, MaskSet)
        and (ms.layout == "group" or ms.arrays[0].chunks[0] == 1)
    )
    tasks: list[IntArray] = []
    for grp in groups:
        units = []
        for i in grp:
            h, w = ms.image_shape(i)
            if not (splittable and h * w > target):
                units.append((i, 0, h))
                continue
            arr, n = image_array(ms, i)  # a large image: its own tasks, one band each
            step = arr.chunks[0 if n is None else 1]  # rows of a chunk row
            band = max(step, target // max(1, w) // step * step)
            tasks += [np.array([[i, y, min(h, y + band)]], dtype=np.int64)
                      for y in range(0, h, band)]  # fmt: skip
        if units:
            tasks.append(np.array(units, dtype=np.int64).reshape(-1, 3))
    return tasks
