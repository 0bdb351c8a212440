"""Read image regions chunk by chunk from mask stores, with decode buffers reused per thread.

What a counting task of the engine (:mod:`segiou.parallel`) reads through: a
:class:`ChunkCache` per array keeps the decoded chunks of one chunk row of images, and
:func:`read_region` returns an image region as a view of one chunk when it is aligned, else a
copy stitched from several. No counting here.
"""

from __future__ import annotations

import threading
from typing import Literal

import numpy as np

from segiou.errors import MissingChunkError
from segiou.io.zarr import MaskArray, MaskSet, Missing, Side

__all__ = ["BufferPool", "ChunkCache", "CountedMissing", "buffers", "image_array", "lacks_fill",
           "read_region"]  # fmt: skip

#: What a cache does with a chunk missing from the store: read it as the fill value, raise, or
#: read it as the fill value and remember it (``absent``: reported per image).
CountedMissing = Literal["fill", "error", "count"]


class BufferPool:
    """Decode buffers kept per thread across tasks and calls, at most ``max_bytes`` per thread.

    Decoding into freshly mapped memory pays a page fault per 4 KiB, and the allocator hands
    large freed blocks back to the system (so after any other large allocation, e.g. another
    evaluation, every new buffer is fresh again): measured 1.6 vs 1.1 ns/px end to end
    (benchmarks/bench_zarr.py, 1024 x 2048 chunks). Dask's worker threads outlive tasks, so the
    pool does too.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._local = threading.local()

    def _free(self) -> list[np.ndarray]:
        free: list[np.ndarray] | None = getattr(self._local, "free", None)
        if free is None:
            free = self._local.free = []
        return free

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Return a buffer of ``shape`` and ``dtype``: a pooled one if any, else a new one."""
        free = self._free()
        for j, buf in enumerate(free):
            if buf.shape == shape and buf.dtype == dtype:
                return free.pop(j)
        return np.empty(shape, dtype)

    def give(self, buf: np.ndarray) -> None:
        """Keep ``buf`` for reuse on this thread, evicting the oldest beyond the budget."""
        if buf.nbytes > self.max_bytes:
            return
        free = self._free()
        free.append(buf)
        while sum(b.nbytes for b in free) > self.max_bytes:
            free.pop(0)


#: Decode buffers per thread: a few chunks of each array a task reads.
buffers = BufferPool(64 << 20)


class ChunkCache:
    """Decoded chunks of one array, kept while a task walks one chunk row of images.

    ``side`` says whose masks the array holds: a missing chunk's error says what to do.
    """

    def __init__(self, arr: MaskArray, missing: CountedMissing, ms: MaskSet, image: int,
                 side: Side = "gt") -> None:  # fmt: skip
        self.arr = arr
        self.missing = missing
        self.side: Side = side
        self.cache: dict[tuple[int, ...], np.ndarray] = {}
        #: Chunks that were missing and read as the fill value (with ``missing="count"``).
        self.absent: set[tuple[int, ...]] = set()
        # images a chunk covers, for error messages: a stack chunk may hold several images
        self._names = ms.names
        self._stack = ms.layout == "stack"
        self._name = ms.names[image]  # a group's array holds one image

    def images(self, coords: tuple[int, ...]) -> str:
        """Return the names of the images chunk ``coords`` covers (for messages)."""
        if not self._stack:
            return repr(self._name)
        c0 = self.arr.chunks[0]
        return ", ".join(repr(n) for n in self._names[coords[0] * c0 : (coords[0] + 1) * c0])

    def get(self, coords: tuple[int, ...]) -> np.ndarray:
        """Return chunk ``coords``, decoded once and kept until dropped."""
        c = self.cache.get(coords)
        if c is None:
            buf = buffers.take(tuple(self.arr.chunks), np.dtype(self.arr.dtype))
            how: Missing = "error" if self.missing == "count" else self.missing
            try:
                c = self.arr.read_chunk(coords, missing=how, images=self.images(coords), out=buf,
                                        side=self.side)  # fmt: skip
            except MissingChunkError as err:
                if self.missing != "count":
                    if self.arr.read_spec.no_fill:
                        raise self._undefined(coords) from err
                    raise
                c = self.arr.read_chunk(coords, missing="fill", images="", out=buf)
                self.absent.add(coords)
            if c is not buf and c.base is not buf:  # not decoded into it: pool it again
                buffers.give(buf)
            self.cache[coords] = c
        return c

    def _undefined(self, coords: tuple[int, ...]) -> MissingChunkError:
        """Return the error of a chunk missing from an array without a fill value."""
        whose = "ground-truth" if self.side == "gt" else "prediction"
        msg = (
            f"{self.arr.where()}: chunk {coords} (images {self.images(coords)}) is missing "
            f"from the {whose} store, and the array has no fill value (Zarr v2 fill_value "
            "null), so the Zarr specification leaves the chunk's values undefined; segiou does "
            "not guess them. Re-write the chunk (or re-ingest); if its writer left out chunks "
            f"of 0, read missing chunks as 0 with missing_{self.side}_chunks='fill' "
            f"(--missing-{self.side}-chunks fill)"
        )
        return MissingChunkError(msg)

    def drop(self, keep: int | None = None) -> None:
        """Forget chunks (all, or those outside chunk row ``keep``); pool their buffers."""
        self._forget([k for k in self.cache if keep is None or k[0] != keep])

    def drop_above(self, y: int) -> None:
        """Forget the chunks that end at or above image row ``y`` (a walk never goes back)."""
        if self._stack and self.arr.chunks[0] > 1:
            return  # the next images of the stack chunk need them again: keep (decode once)
        ax = 1 if self._stack else 0
        ch = self.arr.chunks[ax]
        self._forget([k for k in self.cache if (k[ax] + 1) * ch <= y])

    def _forget(self, gone: list[tuple[int, ...]]) -> None:
        for k in gone:
            c = self.cache.pop(k)
            base = c.base if isinstance(c.base, np.ndarray) else c  # numpy: the owner
            if base.flags.owndata and base.flags.writeable and base.shape == c.shape:
                buffers.give(base)


def lacks_fill(src: object) -> bool:
    """Whether a source holds an array without a fill value (Zarr v2 ``fill_value: null``).

    A chunk missing from such an array is undefined (the Zarr specification reads a chunk
    never written as the fill value, and there is none), although zarr-python skips writing
    chunks of 0 there too (``write_empty_chunks=False``) and reads them back as 0. So
    ``missing_pred_chunks="auto"`` refuses it, as in a store that records that every chunk was
    written (a prediction read as 0 would not be reported anywhere); ``"fill"`` reads it as 0.
    A ground-truth chunk follows ``missing_gt_chunks`` as in any store: ``"auto"`` reads it as
    0 and reports it (``absent_chunks``), as every ground-truth chunk it reads as the fill
    value.

    Parameters
    ----------
    src : MaskSet, PngSet or None
        A source (image files and ``None`` have no chunks: ``False``).

    Returns
    -------
    bool
    """
    return isinstance(src, MaskSet) and any(a.read_spec.no_fill for a in src.arrays)


def image_array(ms: MaskSet, i: int) -> tuple[MaskArray, int | None]:
    """Return the array holding image ``i`` and its index along axis 0 (``None`` for 2-D arrays)."""
    return (ms.arrays[0], i) if ms.layout == "stack" else (ms.arrays[i], None)


def read_region(cache: ChunkCache, n: int | None, y0: int, y1: int, x0: int,
                 x1: int) -> np.ndarray:  # fmt: skip
    """Image region ``[y0:y1, x0:x1]`` of image ``n``; a view of one chunk when aligned."""
    arr = cache.arr
    ax = 0 if n is None else 1
    ys = list(arr.chunk_ranges(ax, y0, y1))
    xs = list(arr.chunk_ranges(ax + 1, x0, x1))
    lead = () if n is None else (n // arr.chunks[0],)
    if not ys or not xs:  # an empty region (an image 0 pixels wide or high): no chunk to read
        return np.empty((y1 - y0, x1 - x0), dtype=arr.dtype)
    if len(ys) == 1 and len(xs) == 1:
        (cy, _, _), (cx, _, _) = ys[0], xs[0]
        chunk = cache.get((*lead, cy, cx))
        sub = chunk if n is None else chunk[n % arr.chunks[0]]
        oy, ox = cy * arr.chunks[ax], cx * arr.chunks[ax + 1]
        return sub[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
    out = None
    for cy, ya, yb in ys:
        for cx, xa, xb in xs:
            chunk = cache.get((*lead, cy, cx))
            sub = chunk if n is None else chunk[n % arr.chunks[0]]
            if out is None:
                out = np.empty((y1 - y0, x1 - x0), dtype=sub.dtype)
            oy, ox = cy * arr.chunks[ax], cx * arr.chunks[ax + 1]
            out[ya - y0 : yb - y0, xa - x0 : xb - x0] = sub[ya - oy : yb - oy, xa - ox : xb - ox]
    assert out is not None  # (ys and xs are not empty)
    return out
