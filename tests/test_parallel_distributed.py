"""The Zarr + Dask engine on a dask.distributed LocalCluster: exact counts, even when a worker dies.

One cluster (two single-threaded worker processes with nannies) serves the module. The
fault-tolerance tests kill a worker process with SIGKILL from a scheduler plugin, at a chosen
moment of the run (a partial in flight, or a partial already computed and held in memory), and
check that the nanny's restart plus the scheduler's recomputation give exactly the eager counts;
each on a cluster of its own, so that a restart that fails on a loaded machine (once in a full
run beside other work, a nanny closed instead of restarting its worker) fails that test alone.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from distributed import Client, LocalCluster, get_task_stream
from distributed.diagnostics.plugin import SchedulerPlugin
from numpy.testing import assert_array_equal

from segiou import ConfusionMatrix
from segiou.errors import LabelRangeError
from segiou.io.zarr import ChunkError, create_stack
from segiou.parallel import evaluate_zarr
from segiou.testing.synthetic import cityscapes_like

K = 19
N_IMAGES = 40


def _stack(url: Path, data: np.ndarray, chunks: tuple[int, int], names: list[str]) -> str:
    n, h, w = data.shape
    a = create_stack(url, n=n, height=h, width=w, chunks=chunks, names=names)
    a[:] = data
    return str(url)


def _eager(gt: Any, pred: Any, names: list[str]) -> ConfusionMatrix:
    cm = ConfusionMatrix(K, ignore_index=255, per_image=True)
    for g, p, name in zip(gt, pred, names, strict=True):
        cm.update(g, p, names=[name])
    return cm


def _assert_same(cm: ConfusionMatrix, ref: ConfusionMatrix) -> None:
    assert_array_equal(cm.counts, ref.counts)
    assert_array_equal(cm.void, ref.void)
    assert cm.n_ignored == ref.n_ignored
    assert cm.n_images == ref.n_images
    a, b = cm.images, ref.images
    assert a.names == b.names
    for f in ("tp", "fp", "fn", "ignored", "unexpected"):
        assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as c:  # fmt: skip
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    with Client(cluster, set_as_default=False) as c:
        c.wait_for_workers(2, timeout=30)
        yield c


@pytest.fixture
def killable():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as c, Client(c, set_as_default=False) as cl:  # fmt: skip
        cl.wait_for_workers(2, timeout=60)
        yield c, cl


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    gt, pred = cityscapes_like(N_IMAGES, 48, 64, seed=17)
    names = [f"munster_{i:06d}" for i in range(N_IMAGES)]
    g = _stack(tmp / "gt.zarr", gt, (24, 20), names)
    p = _stack(tmp / "pred.zarr", pred, (48, 13), names)
    return g, p, gt, pred, names, _eager(gt, pred, names)


def test_client_as_scheduler(client, stores):
    g, p, *_, ref = stores
    with get_task_stream(client) as ts:
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client,
                           pixels_per_task=1, split_every=3)  # fmt: skip
    _assert_same(cm, ref)
    assert len(ts.data) >= N_IMAGES  # one task per image ran on the cluster
    # (the workers asked now: the client's scheduler_info() may not list them yet)
    assert {t["worker"] for t in ts.data} == set(client.nthreads())


def test_default_client_without_scheduler_argument(cluster, stores):
    g, p, *_, ref = stores
    with Client(cluster.scheduler_address) as default, get_task_stream(default) as ts:
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255)  # no scheduler: the default Client
    _assert_same(cm, ref)
    assert ts.data  # the tasks ran on the cluster, not on local threads


def test_group_layout_on_the_cluster(client, tmp_path):
    sizes = [(17, 23), (30, 8), (5, 41)]
    imgs = [cityscapes_like(1, h, w, seed=i) for i, (h, w) in enumerate(sizes)]
    names = ["x", "y", "z"]
    for side, j in (("gt", 0), ("pred", 1)):
        grp = zarr.open_group(str(tmp_path / f"{side}.zarr"), mode="w")
        for name, pair in zip(names, imgs, strict=True):
            grp.create_array(name, shape=pair[j][0].shape, chunks=(8, 8), dtype="uint8",
                             config={"write_empty_chunks": True})[...] = pair[j][0]  # fmt: skip
    cm = evaluate_zarr(tmp_path / "gt.zarr", tmp_path / "pred.zarr", labels=K, ignore_index=255,
                       scheduler=client, pixels_per_task=1)  # fmt: skip
    _assert_same(cm, _eager([i[0][0] for i in imgs], [i[1][0] for i in imgs], names))


def test_errors_cross_the_cluster_with_their_type_and_message(client, tmp_path, stores):
    *_, gt, pred, names, _ = stores
    bad = pred[:4].copy()
    bad[2, 5, 6] = 99
    g = _stack(tmp_path / "gt.zarr", gt[:4], (24, 20), names[:4])
    p = _stack(tmp_path / "pred.zarr", bad, (48, 13), names[:4])
    with pytest.raises(LabelRangeError, match=r"'munster_000002'.*99 \(1 px, first at \(5, 6\)\)"):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client)
    (tmp_path / "gt.zarr" / "c" / "3" / "1" / "2").unlink()
    with pytest.raises(ChunkError, match=r"chunk \(3, 1, 2\) \(images 'munster_000003'\)"):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client,
                      on_unexpected="count")  # fmt: skip


# -- fault tolerance ----------------------------------------------------------------------------
class _KillWorker(SchedulerPlugin):
    """SIGKILL the worker running (``when="processing"``) or holding (``"memory"``) a partial.

    Fires once, on the ``nth`` such transition of a per-partition counting task.
    """

    def __init__(self, scheduler: Any, pids: dict[str, int], when: str, nth: int) -> None:
        self.scheduler, self.pids, self.when, self.nth = scheduler, pids, when, nth
        self.seen = 0
        self.killed: str | None = None

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        if self.killed or finish != self.when or "segiou-count" not in str(key):
            return
        self.seen += 1
        if self.seen < self.nth:
            return
        ts = self.scheduler.tasks[key]
        ws = ts.processing_on if finish == "processing" else next(iter(ts.who_has), None)
        if ws is not None and ws.address in self.pids:
            self.killed = ws.address
            os.kill(self.pids[ws.address], signal.SIGKILL)


# Plans of the tests below: one image a task; tasks sized by time at a configured rate (about
# 3 images of 48 x 64 a task at 1 ms and 100 ns/px: a dozen tasks); at a rate the probe measures.
PLANS = {
    "one-image-tasks": {"pixels_per_task": 1},
    "1ms-at-100ns": {"task_seconds": 1e-3, "ns_per_px": 100.0},
    "probe": {"task_seconds": 3e-4},
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("when", "plan"),
    [("processing", "one-image-tasks"), ("memory", "one-image-tasks"),
     ("processing", "1ms-at-100ns"), ("memory", "probe")],
)  # fmt: skip
def test_a_worker_killed_mid_run_changes_nothing(killable, stores, when, plan):
    cluster, client = killable
    g, p, *_, ref = stores
    client.wait_for_workers(2, timeout=30)
    pids = client.run(os.getpid)
    assert len(pids) == 2
    plugin = _KillWorker(cluster.scheduler, pids, when, nth=2)
    cluster.scheduler.add_plugin(plugin, name="kill-worker")
    try:
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, split_every=4,
                           **PLANS[plan])  # type: ignore[arg-type]  # fmt: skip
    finally:
        cluster.scheduler.remove_plugin(name="kill-worker")
    assert plugin.killed is not None, "no worker was killed: the test proved nothing"
    assert plugin.killed not in client.nthreads()  # it is gone ...
    _assert_same(cm, ref)  # ... and every image was still counted exactly once
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it
    assert set(client.run(os.getpid).values()).isdisjoint({pids[plugin.killed]})


# -- task sizes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("seconds", [3e-4, 1e-3, 1e-2, 0.2])
def test_every_task_size_counts_exactly(client, stores, seconds):
    g, p, *_, ref = stores
    client.wait_for_workers(2, timeout=60)
    with get_task_stream(client) as ts:
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client,
                           task_seconds=seconds, ns_per_px=100.0)  # fmt: skip
    _assert_same(cm, ref)
    counted = {t["key"] for t in ts.data if "segiou-count" in str(t["key"])}
    # 3,072 px an image, chunk rows of 24 (of 48 rows): 0.3 ms = 3,000 px, a band (half an
    # image) a task; 1 ms = 10,000 px: the images that start within each 10,000 px, 4 or 3 a
    # task; 10 ms and more: half of the images a task (at least a task per worker thread)
    assert len(counted) == {3e-4: 2 * N_IMAGES, 1e-3: 12, 1e-2: 2, 0.2: 2}[seconds]


def test_the_probe_counts_the_first_images_and_the_plan_the_rest(client, stores, monkeypatch):
    import segiou.parallel._engine as engine

    g, p, *_, ref = stores
    seen: dict[str, Any] = {}
    real = engine.plan_ranges

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen["first"] = kwargs["first"]
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "plan_ranges", spy)
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, task_seconds=1e-3)
    _assert_same(cm, ref)  # the probe's images and the plan's: each once
    # at least a warm-up piece and a timed one (bands of one chunk row: 24 of 48 rows), and
    # with 40 images of 3,072 px not all of them in 1 ms
    assert (0, 24) < seen["first"] < (N_IMAGES, 0)


def test_the_graph_carries_ranges_and_the_job_goes_to_the_workers(client, stores, monkeypatch):
    import pickle

    import segiou.parallel._cluster as cluster

    g, p, *_, ref = stores
    graphs: list[dict[Any, Any]] = []
    real = cluster.build_graph

    def spy(*args: Any) -> Any:
        obj = real(*args)
        graphs.append(dict(obj.__dask_graph__()))
        return obj

    monkeypatch.setattr(cluster, "build_graph", spy)
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, pixels_per_task=1)
    _assert_same(cm, ref)
    (graph,) = graphs
    assert not [k for k in graph if "segiou-job" in str(k)]  # scattered, not in the graph
    counts = [v for k, v in graph.items() if "segiou-count" in str(k)]
    assert len(counts) == 2 * N_IMAGES  # a band of 24 rows (a chunk row) each
    for _, job, task in counts:
        assert type(job).__name__ == "Future"  # a reference to the job the workers hold
        assert len(task) == 4  # (first image, end image, first row, end row)
    assert max(len(pickle.dumps(v[2])) for v in counts) < 40
    assert "munster" not in repr(graph)  # no image name travels with a task


# -- a task alone on a worker of several threads ----------------------------------------------
@pytest.fixture(scope="module")
def threaded_client():
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=":0") as c, Client(c, set_as_default=False) as cl:  # fmt: skip
        yield cl


def _job(g: str, p: str) -> Any:
    from segiou.io.zarr import open_masks
    from segiou.parallel._tasks import Job

    gms, pms = open_masks(g), open_masks(p)
    acc = ConfusionMatrix(K, ignore_index=255, per_image=True)
    return Job(gms, pms, tuple(range(len(gms.names))), acc.spec, acc.gt_ids, acc.pred_ids,
               "raise", "error", 255)  # fmt: skip


def _hold(name: str) -> None:
    from distributed import Event

    Event(name).wait(timeout=30)


def test_a_task_alone_uses_the_idle_threads_and_no_more(threaded_client, stores, monkeypatch):
    from distributed import Event

    import segiou.parallel._graph as graph
    from segiou.parallel._tasks import count_group

    g, p, *_ = stores
    job = _job(g, p)
    threads: list[str] = []
    real = graph.count_group

    def spy(job: Any, units: Any) -> Any:
        threads.append(threading.current_thread().name)
        time.sleep(0.002)  # long enough for the helper to take pieces
        return real(job, units)

    monkeypatch.setattr(graph, "count_group", spy)  # an in-process worker: the same module
    task = (0, N_IMAGES, 0, -1)
    whole = count_group(job, graph.task_units(job.gt, np.array(task)))
    alone = threaded_client.submit(graph.count_task, job, task, pure=False).result()
    assert len(threads) == N_IMAGES  # a piece per image (one image per chunk along N)
    assert any(t.startswith("segiou-helper") for t in threads)  # the idle thread helped
    busy_threads = len(set(threads))
    threads.clear()
    hold = Event("segiou-hold", client=threaded_client)
    other = threaded_client.submit(_hold, "segiou-hold", pure=False)  # the other thread is busy
    try:
        busy = threaded_client.submit(graph.count_task, job, task, pure=False).result()
    finally:
        hold.set()
        other.result()
    assert len(threads) == N_IMAGES
    assert not any(t.startswith("segiou-helper") for t in threads)  # no thread beyond the two
    assert busy_threads == 2

    def entries(p):  # per-image entries, in a canonical order
        e = p.entries
        return e[np.lexsort(e.T[::-1])]

    for part in (alone, busy):  # which thread counted what changes no count
        assert_array_equal(entries(part), entries(whole))
        assert sorted(part.odd) == sorted(whole.odd)


def test_two_thread_worker_counts_exactly(threaded_client, stores):
    g, p, *_, ref = stores
    for kwargs in ({"task_seconds": 1e-2, "ns_per_px": 100.0}, {"task_seconds": 1e-3}):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=threaded_client,
                           **kwargs)  # type: ignore[arg-type]  # fmt: skip
        _assert_same(cm, ref)


def test_local_cluster_that_cannot_start_is_a_usage_error(monkeypatch):
    import distributed

    from segiou.cli.scheduler import scheduler_context
    from segiou.errors import UsageError

    def refuse(*args: Any, **kwargs: Any) -> Any:
        msg = "no room for worker processes"
        raise OSError(msg)

    monkeypatch.setattr(distributed, "LocalCluster", refuse)
    needle = r"cannot start a local dask cluster \(OSError: no room"
    with pytest.raises(UsageError, match=needle), scheduler_context("local-cluster"):
        pass


def test_a_result_the_cluster_forgot_is_counted_again_from_scratch(client, stores, monkeypatch,
                                                                    caplog):  # fmt: skip
    # dask may cancel the final future ("already forgotten") after a worker died: the graph is
    # counted again, whole, and only the new result is used
    from concurrent.futures import CancelledError

    import segiou.parallel._cluster as cluster

    g, p, *_, ref = stores
    client.wait_for_workers(2, timeout=60)
    real, calls = cluster.wait, []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        out = real(*args, **kwargs)  # the first attempt runs, then is lost
        if len(calls) == 1:
            msg = "('segiou-sum-x', 0) cancelled for reason: already forgotten"
            raise CancelledError(msg)
        return out

    monkeypatch.setattr(cluster, "wait", flaky)
    with caplog.at_level("WARNING", logger="segiou.parallel"):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client,
                           task_seconds=1e-3, ns_per_px=100.0)  # fmt: skip
    assert len(calls) == 2
    _assert_same(cm, ref)
    assert "counting again from scratch" in caplog.text


def _cancel_first(client: Any, monkeypatch: Any, name: str) -> list[str]:
    """Make the cluster cancel the first task of function ``name`` (as a dead worker may)."""
    real, seen = client.submit, []

    def submit(func: Any, *args: Any, **kwargs: Any) -> Any:
        future = real(func, *args, **kwargs)
        if func.__name__ == name:
            seen.append(future.key)
            if len(seen) == 1:
                future.cancel(reason="lost dependencies")  # the real FutureCancelledError
        return future

    monkeypatch.setattr(client, "submit", submit)
    return seen


def test_a_lost_measuring_task_is_measured_again(client, stores, monkeypatch, caplog):
    # dask may cancel the first task, which measures the rate, when a worker dies ("already
    # forgotten", "lost dependencies"): it runs again, and only the second one's counts are kept
    g, p, *_, ref = stores
    client.wait_for_workers(2, timeout=60)
    seen = _cancel_first(client, monkeypatch, "probe")
    with caplog.at_level("WARNING", logger="segiou.parallel"):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, task_seconds=1e-3)
    assert len(seen) == 2
    _assert_same(cm, ref)  # the probe's images counted once, the rest by the plan
    assert "measuring again (attempt 2 of 3)" in caplog.text


def _fail_scatters(client: Any, monkeypatch: Any, failures: int) -> list[int]:
    """Make the first ``failures`` scatters fail as a worker dying mid-broadcast does."""
    from distributed.comm.core import CommClosedError

    real, calls = client.scatter, []

    def scatter(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= failures:
            msg = "in <TCP (closed) ConnectionPool.scatter local=x remote=y>: Stream is closed"
            raise CommClosedError(msg)
        return real(*args, **kwargs)

    monkeypatch.setattr(client, "scatter", scatter)
    return calls


def test_a_worker_lost_while_the_job_is_sent_sends_it_again(client, stores, monkeypatch, caplog):
    g, p, *_, ref = stores
    client.wait_for_workers(2, timeout=60)
    calls = _fail_scatters(client, monkeypatch, 1)
    with caplog.at_level("WARNING", logger="segiou.parallel"):
        cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, task_seconds=1e-3)
    assert len(calls) == 2
    _assert_same(cm, ref)
    assert "sending it again (attempt 2 of 3)" in caplog.text


def test_no_worker_left_to_send_the_job_to_is_a_clear_error(client, stores, monkeypatch):
    import segiou.parallel._cluster as cluster
    from segiou.errors import ClusterError

    g, p, *_ = stores
    _fail_scatters(client, monkeypatch, 10)
    monkeypatch.setattr(client, "nthreads", dict)  # every worker gone
    monkeypatch.setattr(cluster, "WORKER_WAIT", 0.5)
    needle = r"no worker left: a worker was lost while the job was sent .* start workers"
    with pytest.raises(ClusterError, match=needle):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, task_seconds=1e-3)
    monkeypatch.undo()
    calls = _fail_scatters(client, monkeypatch, 10)  # workers left, every scatter fails
    with pytest.raises(ClusterError, match=r"lost a worker each of the 3 times .* run again"):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, task_seconds=1e-3)
    assert len(calls) == 3


def test_an_interrupted_run_leaves_no_error_maps_behind(threaded_client, stores, tmp_path,
                                                        monkeypatch):  # fmt: skip
    # the client gives up (Ctrl-C) while tasks still write error maps on the cluster: they are
    # cancelled and stopped before the temporary store is removed, so none recreates it
    import segiou.parallel._cluster as cluster
    from segiou.io.maps import MapWriter

    g, p, *_, ref = stores
    wrote = threading.Event()
    real_write = MapWriter.write

    def slow_write(self: Any, *args: Any) -> None:
        time.sleep(0.03)
        real_write(self, *args)
        wrote.set()

    def interrupted(future: Any, progress: bool) -> Any:
        assert wrote.wait(timeout=30)
        raise KeyboardInterrupt

    monkeypatch.setattr(MapWriter, "write", slow_write)  # in-process workers: this very class
    monkeypatch.setattr(cluster, "wait", interrupted)
    target = tmp_path / "maps.zarr"
    with pytest.raises(KeyboardInterrupt):
        evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=threaded_client,
                      pixels_per_task=1, error_maps=target)  # fmt: skip
    assert list(tmp_path.iterdir()) == []
    time.sleep(1.0)  # tasks left running would write (and recreate the folder) meanwhile
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=threaded_client,
                       pixels_per_task=1, error_maps=target)  # fmt: skip
    _assert_same(cm, ref)
    assert [x.name for x in tmp_path.iterdir()] == ["maps.zarr"]


@pytest.mark.parametrize(
    "sizing",
    [{"ns_per_px": 1e-300}, {"ns_per_px": 5e-324}, {"task_seconds": 1e300, "ns_per_px": 1.0},
     {"task_seconds": float("inf"), "ns_per_px": float("inf")}, {"ns_per_px": 1e300}],
)  # fmt: skip
def test_extreme_task_sizing_is_clamped(client, stores, sizing):
    # a task size that overflows to infinity (or is 0 / 0) is clamped to 1..2**53 pixels
    from segiou.parallel._plan import MAX_TASK_PIXELS, task_pixels

    g, p, *_, ref = stores
    client.wait_for_workers(2, timeout=60)
    cm = evaluate_zarr(g, p, labels=K, ignore_index=255, scheduler=client, **sizing)
    _assert_same(cm, ref)
    seconds, ns = sizing.get("task_seconds", 0.2), sizing["ns_per_px"]
    assert 1 <= task_pixels(seconds, ns) <= MAX_TASK_PIXELS
