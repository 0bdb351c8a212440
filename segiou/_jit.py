"""The one place that fixes the options of every Numba kernel.

``cache=True`` keeps compiled kernels on disk between processes; ``nogil=True`` releases the GIL
so that threads (Dask's threaded scheduler, the service's thread pool) run kernels side by side.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import numba as nb

__all__ = ["kernel", "parallel_kernel", "row_kernel", "run_parallel"]

#: A serial kernel: cached on disk, releasing the GIL.
kernel = nb.njit(cache=True, nogil=True)
#: A kernel with ``prange`` loops (one private output per thread, summed by the caller).
parallel_kernel = nb.njit(cache=True, nogil=True, parallel=True)
#: A kernel that must stay a separate function (inlined into a caller's loop it ran 10-20%
#: slower: see :func:`segiou._kernels.count_span`).
row_kernel = nb.njit(cache=True, nogil=True, inline="never")

_layer_lock = threading.Lock()
_layer_threadsafe = False


def run_parallel(fn: Any, *args: Any) -> Any:
    """Call a kernel, serialised while Numba's threading layer may be unsafe; return its result.

    Numba's ``workqueue`` layer (used when neither OpenMP nor TBB is available) aborts the
    process when two threads run ``parallel=True`` kernels at once. Calls are serialised until a
    parallel region has run and the layer in use is known to be safe (``omp`` or ``tbb``).
    ``fn`` may also be a serial kernel: until a parallel region has run, Numba has no layer to
    name, and calls stay serialised.
    """
    global _layer_threadsafe
    if _layer_threadsafe:
        return fn(*args)
    with _layer_lock:
        out = fn(*args)
        # ValueError "Threading layer is not initialized": no parallel region ran yet
        with contextlib.suppress(ValueError):
            _layer_threadsafe = nb.threading_layer() != "workqueue"  # type: ignore[attr-defined]
        return out
