"""The plan: index ranges that cover every pixel once, sized as asked, planned without a Python
object per image (a million images in well under a second and 100 MiB).

Most tests plan stores that exist only as metadata: a :class:`MaskSet` built in memory (planning
reads shapes and chunk sizes, never a chunk), so a million images cost nothing to set up.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from segiou.errors import UsageError
from segiou.io.zarr import MaskArray, MaskSet, create_stack, open_masks
from segiou.parallel import count_stores, plan_groups, plan_ranges, plan_tasks
from segiou.parallel._plan import (
    SCHEDULER_SECONDS,
    TASK_SECONDS,
    cluster_task_seconds,
    next_piece,
    task_units,
)


def _stack(n: int, h: int, w: int, chunks: tuple[int, int, int] | None = None) -> MaskSet:
    arr = MaskArray("mem://", "", (n, h, w), chunks or (1, h, w), "uint8", None)  # type: ignore[arg-type]
    return MaskSet("mem://", "", "stack", tuple(f"{i:07d}" for i in range(n)), (arr,))


def _group(shapes: list[tuple[int, int]], rows: list[int]) -> MaskSet:
    arrays = tuple(MaskArray("mem://", f"i{j}", s, (r, s[1]), "uint8", None)  # type: ignore[arg-type]
                   for j, (s, r) in enumerate(zip(shapes, rows, strict=True)))  # fmt: skip
    return MaskSet("mem://", "", "group", tuple(f"i{j}" for j in range(len(shapes))), arrays)


def _covered(ms: MaskSet, ranges: np.ndarray, first: tuple[int, int] = (0, 0)) -> None:
    """Every row of every image from ``first`` on is in exactly one unit, in order."""
    shapes = ms.image_shapes()
    at = first
    for r in ranges:
        units = task_units(ms, r)
        start, stop, top, bottom = r.tolist()
        assert len(units) == stop - start >= 1
        if stop - start > 1:
            assert (top, bottom) == (0, -1)  # several images: whole ones
        for i, a, b in units.tolist():
            assert (i, a) == at, f"expected a unit at {at}, got {(i, a)}"
            h = int(shapes[i, 0])
            assert a < b <= h
            at = (i, b) if b < h else (i + 1, 0)
    assert at == (len(ms.names), 0)


# -- coverage and sizes -------------------------------------------------------------------------
@given(
    shapes=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1, max_size=30),
    rows=st.data(),
    ppt=st.integers(1, 3000),
    min_tasks=st.integers(1, 8),
    split=st.booleans(),
)
def test_a_group_plan_covers_every_row_once(shapes, rows, ppt, min_tasks, split):
    chunk_rows = [rows.draw(st.integers(1, h)) for h, _ in shapes]
    ms = _group(shapes, chunk_rows)
    ranges = plan_ranges(ms, pixels_per_task=ppt, min_tasks=min_tasks, split_images=split)
    _covered(ms, ranges)
    px = ms.image_shapes().prod(axis=1)
    target = max(1, min(ppt, int(px.sum()) // min_tasks))
    for start, stop, top, bottom in ranges.tolist():
        if bottom >= 0 and (top, bottom) != (0, shapes[start][0]):  # a band
            assert split
            assert px[start] > target
            assert top % chunk_rows[start] == 0  # whole chunk rows
        elif stop - start > 1:  # a run holds images starting within one target of pixels
            assert px[start : stop - 1].sum() < target
    if (px <= target).all():
        assert len(ranges) >= min(min_tasks, len(shapes))  # parallelism when the data allows


@given(n=st.integers(1, 60), step=st.integers(1, 7), ppt=st.integers(1, 500),
       min_tasks=st.integers(1, 6))  # fmt: skip
def test_a_stack_plan_never_splits_a_chunk_of_images(n, step, ppt, min_tasks):
    ms = _stack(n, 4, 5, (step, 4, 5))
    ranges = plan_ranges(ms, pixels_per_task=ppt, min_tasks=min_tasks)
    _covered(ms, ranges)
    assert all(start % step == 0 for start in ranges[:, 0].tolist())
    if step > 1:
        assert (ranges[:, 3] == -1).all()  # chunks of several images are never banded


@given(n=st.integers(1, 12), h=st.integers(1, 50), rows=st.integers(1, 50), data=st.data())
def test_planning_from_a_position_covers_the_rest(n, h, rows, data):
    rows = min(rows, h)
    ms = _stack(n, h, 7, (1, rows, 7))
    at = (0, 0)
    for _ in range(data.draw(st.integers(0, 2 * n))):  # pieces the probe counted
        if at[0] >= n:
            break
        _, *nxt = next_piece(ms, at, split_images=True)
        at = (nxt[0], nxt[1])
    ranges = plan_ranges(ms, pixels_per_task=data.draw(st.integers(1, 400)), first=at)
    _covered(ms, ranges, first=at)


def test_equal_images_plan_as_segiou_0_2_did():
    ms = _stack(18, 1024, 2048)  # 8 Mpx = 4 Cityscapes images a task, a short last one
    groups = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [16, 17]]
    assert plan_ranges(ms).tolist() == [[g[0], g[-1] + 1, 0, -1] for g in groups]
    assert [t[:, 0].tolist() for t in plan_tasks(ms)] == groups
    assert plan_groups(ms) == groups
    # fewer images: min_tasks=4 lowers the target to a quarter of them (2.5 images)
    assert plan_groups(_stack(10, 1024, 2048)) == [[0, 1, 2], [3, 4], [5, 6, 7], [8, 9]]
    assert task_units(ms, np.array([4, 6, 0, -1])).tolist() == [[4, 0, 1024], [5, 0, 1024]]


def test_a_large_image_is_banded_between_runs_of_small_ones():
    ms = _group([(2, 10), (2, 10), (100, 10), (2, 10)], [1, 1, 8, 1])
    ranges = plan_ranges(ms, pixels_per_task=300, min_tasks=1).tolist()
    assert ranges == [[0, 2, 0, -1], [2, 3, 0, 24], [2, 3, 24, 48], [2, 3, 48, 72],
                      [2, 3, 72, 96], [2, 3, 96, 100], [3, 4, 0, -1]]  # fmt: skip


def test_image_files_are_planned_whole(tmp_path):
    from PIL import Image

    from segiou.io.png import PngSet

    paths = []
    for i, (h, w) in enumerate([(3, 4), (5, 6), (7, 8)]):
        paths.append(tmp_path / f"{i}.png")
        Image.fromarray(np.zeros((h, w), np.uint8)).save(paths[-1])
    ps = PngSet(("a", "b", "c"), tuple(map(str, paths)))
    ranges = plan_ranges(ps, pixels_per_task=1)
    assert ranges.tolist() == [[0, 1, 0, -1], [1, 2, 0, -1], [2, 3, 0, -1]]
    assert task_units(ps, ranges[1]).tolist() == [[1, 0, -1]]  # height known once decoded
    units, i, y = next_piece(ps, (1, 0), split_images=True)
    assert (units.tolist(), i, y) == ([[1, 0, -1]], 2, 0)


def test_an_empty_set_plans_nothing():
    assert plan_ranges(_stack(0, 4, 4)).shape == (0, 4)
    assert plan_groups(_stack(0, 4, 4)) == []


# -- scale ----------------------------------------------------------------------------------------
def test_a_million_images_plan_in_well_under_a_second_and_100_mib():
    ms = _stack(10**6, 1024, 2048)
    plan_ranges(ms)  # warm up
    t0 = time.perf_counter()
    ranges = plan_ranges(ms, pixels_per_task=8 << 20, min_tasks=4)
    seconds = time.perf_counter() - t0
    tracemalloc.start()
    try:
        plan_ranges(ms, pixels_per_task=8 << 20, min_tasks=4)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert ranges.shape == (250_000, 4)  # one array: no Python object per task or image
    assert ranges[-1].tolist() == [999_996, 1_000_000, 0, -1]
    assert seconds < 1.0  # measured ~0.03-0.05 s
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MiB"  # measured 39 MiB


def test_a_group_of_many_images_plans_from_shapes_computed_once():
    ms = _group([(3 + i % 5, 4) for i in range(20_000)], [2] * 20_000)
    first = ms.image_shapes()
    assert ms.image_shapes() is first  # computed once, kept
    assert not first.flags.writeable
    assert ms.n_pixels() == int(first.prod(axis=1).sum())


# -- sizing --------------------------------------------------------------------------------------
def test_cluster_tasks_grow_with_the_cluster_to_keep_the_scheduler_half_idle():
    assert cluster_task_seconds(1) == TASK_SECONDS
    assert cluster_task_seconds(100) == TASK_SECONDS
    threads = 1000
    d = cluster_task_seconds(threads)
    assert threads / d * SCHEDULER_SECONDS == pytest.approx(0.5)  # busy half the time
    assert cluster_task_seconds(threads, 0.05) == 0.05  # an explicit choice wins


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [({"pixels_per_task": 0}, "pixels_per_task must be at least 1, got 0"),
     ({"task_seconds": 0.0}, "task_seconds must be a positive number of seconds, got 0.0"),
     ({"ns_per_px": -1.0}, "ns_per_px must be a positive number"),
     ({"split_every": 1}, "split_every must be at least 2")],
)  # fmt: skip
def test_sizes_are_checked_before_anything_is_opened(tmp_path, kwargs, needle):
    with pytest.raises(UsageError, match=needle):
        count_stores(tmp_path / "missing.zarr", tmp_path / "missing.zarr", labels=19, **kwargs)


def test_a_metadata_only_store_plans_like_a_memory_one(tmp_path):
    create_stack(tmp_path / "gt.zarr", n=9, height=40, width=30, chunks=(16, 30))
    ms = open_masks(tmp_path / "gt.zarr")
    ranges = plan_ranges(ms, pixels_per_task=700, min_tasks=1)
    _covered(ms, ranges)
    assert ranges.tolist() == plan_ranges(_stack(9, 40, 30, (1, 16, 30)),
                                          pixels_per_task=700, min_tasks=1).tolist()  # fmt: skip
    assert [r for r in ranges.tolist() if r[3] >= 0][:2] == [[0, 1, 0, 16], [0, 1, 16, 32]]
