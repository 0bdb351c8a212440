"""The engine: count whole test sets (Zarr stores, image folders) with Dask. No metric math.

The plan is an ``int64`` array of index ranges (:func:`plan_ranges`, vectorised: no Python
object per image). The graph is written in Dask's graph format: the job description is shared
(one key locally; scattered to the workers once on a ``distributed`` cluster), one counting task
per row of the plan depends on it, and a tree of sums with fan-in ``split_every`` reduces the
partials. On a cluster tasks are sized by time (``task_seconds`` at a measured or given
``ns_per_px``). Each task reads its own chunks (bytes from the store,
decoded into buffers each thread reuses), counts them single-threaded with the Numba kernels
(Dask owns the cores; the kernels release the GIL), folds one small table per image (or counts
its cells, few for a large table), and returns plain ``int64`` arrays: each image's entries,
every pixel of it (the dataset's totals are summed from them). Partials are summed
in a tree. Nothing image-sized leaves a task. Integer sums make results bit-identical across
schedulers, chunkings and ``split_every``.

No ``Client`` is created here: pass one (or a scheduler name); the CLI and ``pipelines/``
create clusters.

Rooms: :mod:`~segiou.parallel._engine` (:func:`count_stores`: open, pair, plan, run, absorb),
:mod:`~segiou.parallel._plan` (which units each task counts), :mod:`~segiou.parallel._tasks`
(what one task does), :mod:`~segiou.parallel._graph` (the graph, running it, and what runs on a cluster besides: the
probe that measures the rate, the helper threads of a task alone on its worker),
:mod:`~segiou.parallel._cluster` (running the probe and the graph on a cluster, again when a
worker died under them).
"""

from __future__ import annotations

from segiou.parallel._engine import MissingPred, count_stores, evaluate_zarr
from segiou.parallel._plan import plan_groups, plan_ranges, plan_tasks

__all__ = [
    "MissingPred",
    "count_stores",
    "evaluate_zarr",
    "plan_groups",
    "plan_ranges",
    "plan_tasks",
]
