"""Running a count on a ``dask.distributed`` cluster, so that a worker that dies loses only its tasks.

Two steps run on the cluster: the first task, which measures the counting rate (:func:`measure`,
when ``ns_per_px`` is not given), and the graph (:func:`compute_on_cluster`). Dask retries the
tasks of a worker that dies, but it may also cancel a task instead ("already forgotten", "lost
dependencies"): then segiou sends the job again and runs that step again, whole. Only the
result of the attempt that finished is used, so nothing is counted twice.
"""

from __future__ import annotations

import logging
from concurrent.futures import CancelledError
from typing import Any

import numpy as np

from segiou.parallel._graph import build_graph, probe, wait
from segiou.parallel._tasks import Job, Partial

__all__ = ["CLUSTER_ATTEMPTS", "compute_on_cluster", "measure", "scatter_job"]

log = logging.getLogger("segiou.parallel")

#: Times a step (the measuring task, the graph) runs in all when the cluster lost its result.
CLUSTER_ATTEMPTS = 3


def scatter_job(client: Any, job: Job) -> Any:
    """Send the job to every worker once (replicated: a worker that dies does not take it along)."""
    return client.scatter(job, broadcast=True, hash=False)


def measure(client: Any, job: Job, ref: Any, seconds: float,
            split_images: bool) -> tuple[Partial, int, int, float, Any]:  # fmt: skip
    """Run :func:`~segiou.parallel._graph.probe` on the cluster; run it again if it was lost.

    Returns the probe's partial, where the rest starts, the measured rate, and the job's
    reference to use from now on (scattered again when the probe was lost). A probe the
    cluster cancelled returned nothing, so its counts are never used.
    """
    attempt = 1
    while True:
        future = client.submit(probe, ref, seconds, split_images, pure=False)
        try:
            head, i, y, ns = future.result()
            return head, i, y, ns, ref
        except CancelledError as err:
            if attempt == CLUSTER_ATTEMPTS:
                raise
            attempt += 1
            log.warning("the cluster lost the first task, which measures the counting rate "
                        "(%s); measuring again (attempt %d of %d)", err, attempt,
                        CLUSTER_ATTEMPTS)  # fmt: skip
            ref = scatter_job(client, job)


def compute_on_cluster(client: Any, job: Job, ref: Any, ranges: np.ndarray, split_every: int,
                       progress: bool) -> Partial:  # fmt: skip
    """Compute the graph on a cluster; count it again from scratch if dask lost its result.

    dask retries the tasks of a worker that dies. Rarely (about 1 run in 20 in
    ``test_a_worker_killed_mid_run_changes_nothing``) the scheduler instead forgets a
    reduction whose inputs died with the worker, and the final future is cancelled
    ("already forgotten"). Then the job is scattered again and the graph counted again,
    whole: only the final key's value is ever used, so nothing is counted twice.
    """
    attempt = 1
    while True:
        try:
            future = client.compute(build_graph(ref, ranges, split_every))
            out: Partial = wait(future, progress)
            return out
        except CancelledError as err:
            if attempt == CLUSTER_ATTEMPTS:
                raise
            attempt += 1
            log.warning("the cluster lost a result (%s); counting again from scratch "
                        "(attempt %d of %d)", err, attempt, CLUSTER_ATTEMPTS)  # fmt: skip
            ref = scatter_job(client, job)
