"""Running a count on a ``dask.distributed`` cluster, so that a worker that dies loses only its tasks.

Two steps run on the cluster: the first task, which measures the counting rate (:func:`measure`,
when ``ns_per_px`` is not given), and the graph (:func:`compute_on_cluster`). Dask retries the
tasks of a worker that dies, but it may also cancel a task instead ("already forgotten", "lost
dependencies"): then segiou sends the job again and runs that step again, whole. Only the
result of the attempt that finished is used, so nothing is counted twice.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import CancelledError
from typing import Any

import numpy as np

from segiou.errors import ClusterError
from segiou.parallel._graph import build_graph, probe, wait
from segiou.parallel._tasks import Job, Partial

__all__ = ["CLUSTER_ATTEMPTS", "Tracked", "abandon", "compute_on_cluster", "measure", "scatter_job"]

log = logging.getLogger("segiou.parallel")

#: Times a step (sending the job, the measuring task, the graph) runs in all when the cluster
#: lost a worker under it.
CLUSTER_ATTEMPTS = 3

#: Seconds to wait for a worker (a nanny restarting one) when the cluster has none left.
WORKER_WAIT = 30.0

#: Seconds a failed run that writes error maps waits for its tasks still running on the workers.
STOP_WAIT = 60.0


class Tracked:
    """The futures a run submitted and the names of its tasks' keys (to stop them)."""

    def __init__(self) -> None:
        self.futures: list[Any] = []
        self.names: set[str] = set()

    def add(self, future: Any, keys: Any) -> None:
        self.futures.append(future)
        self.names.update(_name(k) for k in keys)


def _name(key: Any) -> str:
    return str(key[0] if isinstance(key, tuple) else key)


def _running(names: set[str], dask_worker: Any = None) -> int:
    """On a worker: how many of the run's tasks still occupy a thread (cancelled ones too)."""
    return sum(_name(ts.key) in names for ts in dask_worker.state.all_running_tasks)


def abandon(client: Any, tracked: Tracked, maps: Any) -> None:
    """Cancel a failed or interrupted run's futures; stop its error-map writers first.

    With error maps, every writer refuses from now on (:meth:`MapWriter.stop`), and this
    returns once no task of the run occupies a worker thread (at most :data:`STOP_WAIT`
    seconds): a cancelled task keeps running on its worker until it ends, and removing the
    temporary store under it would leave the folders it writes into behind.
    """
    if maps is not None:
        maps.stop()
    try:
        client.cancel(tracked.futures)
        if maps is None:
            return
        deadline = time.monotonic() + STOP_WAIT
        while any(client.run(_running, tracked.names).values()):
            if time.monotonic() >= deadline:
                log.warning("tasks of the failed run still run after %g s", STOP_WAIT)
                return
            time.sleep(0.05)
    except Exception as err:  # noqa: BLE001 - the cluster is gone: its tasks with it
        log.warning("could not stop the failed run's tasks on the cluster: %s", err)


def scatter_job(client: Any, job: Job) -> Any:
    """Send the job to every worker once (replicated: a worker that dies does not take it along).

    A worker that dies while the job is being sent makes ``scatter`` fail (distributed's
    ``CommClosedError``, an ``OSError``): it is sent again to the workers left, at most
    :data:`CLUSTER_ATTEMPTS` times in all.

    Raises
    ------
    ClusterError
        No worker is left (none came back within :data:`WORKER_WAIT` seconds), the scheduler
        cannot be reached, or sending failed every time.
    """
    attempt = 1
    while True:
        try:
            return client.scatter(job, broadcast=True, hash=False)
        except OSError as err:
            if attempt == CLUSTER_ATTEMPTS:
                msg = (
                    f"the dask cluster lost a worker each of the {CLUSTER_ATTEMPTS} times the job "
                    f"was sent to its workers (last: {type(err).__name__}: {err}); check the "
                    "workers (their logs, memory) and run again"
                )
                raise ClusterError(msg) from err
            attempt += 1
            log.warning("a worker was lost while the job was sent to the workers (%s); "
                        "sending it again (attempt %d of %d)", err, attempt,
                        CLUSTER_ATTEMPTS)  # fmt: skip
            _wait_for_a_worker(client, err)


def _wait_for_a_worker(client: Any, err: BaseException) -> None:
    """Return once the cluster has a worker; raise ClusterError if none comes in time."""
    deadline = time.monotonic() + WORKER_WAIT
    while True:
        try:
            if client.nthreads():
                return
        except OSError as lost:
            msg = (
                f"the dask scheduler cannot be reached ({type(lost).__name__}: {lost}) after a "
                f"worker was lost while the job was sent to the workers ({err}); check that the "
                "scheduler runs (--scheduler address) and run again"
            )
            raise ClusterError(msg) from lost
        if time.monotonic() >= deadline:
            msg = (
                f"the dask cluster has no worker left: a worker was lost while the job was sent "
                f"to the workers ({type(err).__name__}: {err}) and none came back within "
                f"{WORKER_WAIT:g} s; start workers (or restart the cluster) and run again"
            )
            raise ClusterError(msg) from err
        time.sleep(0.2)


def measure(client: Any, job: Job, ref: Any, seconds: float, split_images: bool,
            tracked: Tracked) -> tuple[Partial, int, int, float, Any]:  # fmt: skip
    """Run :func:`~segiou.parallel._graph.probe` on the cluster; run it again if it was lost.

    Returns the probe's partial, where the rest starts, the measured rate, and the job's
    reference to use from now on (scattered again when the probe was lost). A probe the
    cluster cancelled returned nothing, so its counts are never used.
    """
    attempt = 1
    while True:
        future = client.submit(probe, ref, seconds, split_images, pure=False)
        tracked.add(future, [future.key])
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
                       progress: bool, tracked: Tracked) -> Partial:  # fmt: skip
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
            graph = build_graph(ref, ranges, split_every)
            future = client.compute(graph)
            tracked.add(future, graph.__dask_graph__())
            out: Partial = wait(future, progress)
            return out
        except CancelledError as err:
            if attempt == CLUSTER_ATTEMPTS:
                raise
            attempt += 1
            log.warning("the cluster lost a result (%s); counting again from scratch "
                        "(attempt %d of %d)", err, attempt, CLUSTER_ATTEMPTS)  # fmt: skip
            ref = scatter_job(client, job)
