"""Choose where the engine runs: a local Dask scheduler, a local cluster, or a remote one.

The library never creates a cluster (:func:`segiou.parallel.count_stores` uses the scheduler it
is given); the command line and ``pipelines/`` do, with :func:`scheduler_context`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from segiou.errors import UsageError

__all__ = ["scheduler_context"]


@contextlib.contextmanager
def scheduler_context(name: str) -> Iterator[Any]:
    """Yield what ``count_stores(scheduler=...)`` takes for a ``--scheduler`` value.

    ``tcp://...`` connects a ``distributed.Client``; ``local-cluster`` starts a
    ``distributed.LocalCluster`` for this run; other names pass through to Dask.

    Clients and clusters created here are closed when the ``with`` block ends. The
    ``distributed`` package is imported only for addresses and ``local-cluster``.

    Parameters
    ----------
    name : str
        ``"threads"``, ``"synchronous"`` (or ``"sync"``, ``"single-threaded"``),
        ``"processes"``, ``"local-cluster"``, or the address of a running
        ``dask.distributed`` scheduler (``tcp://``, ``tls://`` or ``ucx://``; the
        connection times out after 10 s).

    Yields
    ------
    str or distributed.Client
        ``name`` itself for the local Dask schedulers, else a connected
        ``distributed.Client``.

    Raises
    ------
    UsageError
        ``name`` is none of the above, no scheduler can be reached at the address, or a local
        cluster cannot be started.
    """
    if name.startswith(("tcp://", "tls://", "ucx://")) or name == "local-cluster":
        try:
            from distributed import Client, LocalCluster
        except ImportError as err:
            msg = (
                f"--scheduler {name!r} needs dask.distributed, which is not installed; "
                "pip install distributed, or use --scheduler threads"
            )
            raise UsageError(msg) from err

        if name == "local-cluster":
            try:
                cluster = LocalCluster(processes=True, dashboard_address=":0")
            except Exception as err:  # any failure to start: say what to do
                msg = (
                    f"--scheduler local-cluster: cannot start a local dask cluster "
                    f"({type(err).__name__}: {err}); use --scheduler threads, which needs no "
                    "worker processes"
                )
                raise UsageError(msg) from err
            with cluster, Client(cluster) as c:
                yield c
        else:
            try:
                client = Client(name, timeout="10s")
            except (OSError, TimeoutError) as err:
                msg = (
                    f"--scheduler {name!r}: cannot connect to a dask scheduler there "
                    f"({type(err).__name__}: {err}); check the address and that the scheduler "
                    "runs, or use --scheduler threads"
                )
                raise UsageError(msg) from err
            with client as c:
                yield c
        return
    if name not in ("threads", "synchronous", "sync", "processes", "single-threaded"):
        msg = (
            f"--scheduler {name!r} is not threads, synchronous (sync, single-threaded), "
            "processes, local-cluster or a tcp://, tls:// or ucx:// scheduler address"
        )
        raise UsageError(msg)
    yield name
