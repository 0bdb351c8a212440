"""The one place that fixes the options of every Numba kernel.

``cache=True`` keeps compiled kernels on disk between processes; ``nogil=True`` releases the GIL
so that threads (Dask's threaded scheduler, the service's thread pool) run kernels side by side.
"""

from __future__ import annotations

import numba as nb

__all__ = ["kernel", "parallel_kernel", "row_kernel"]

#: A serial kernel: cached on disk, releasing the GIL.
kernel = nb.njit(cache=True, nogil=True)
#: A kernel with ``prange`` loops (one private output per thread, summed by the caller).
parallel_kernel = nb.njit(cache=True, nogil=True, parallel=True)
#: A kernel that must stay a separate function (inlined into a caller's loop it ran 10-20%
#: slower: see :func:`segiou._kernels.count_span`).
row_kernel = nb.njit(cache=True, nogil=True, inline="never")
