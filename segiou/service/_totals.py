"""A run's running total: the merge of its batches' states, kept within a memory budget.

The total is built on a run's first read (after a start, or ever) from the stored states, read
and merged a few at a time, and then kept: the states of batches committed later wait in
memory until the next read, or until they hold about :data:`FOLD_BYTES` (or :data:`FOLD_AT`
of them wait), when a thread folds them in. A state of 4,096 classes holds a 128 MiB matrix:
what waits, and what is read at once, is bounded by its size, not only by the number of
batches. Only the public accumulator API is used (:meth:`ConfusionMatrix.from_dict` and
:meth:`ConfusionMatrix.merge`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import zlib
from collections.abc import Callable, Iterable

from segiou.confusion import ConfusionMatrix

__all__ = ["FOLD_AT", "FOLD_BYTES", "RunTotal", "empty_like", "footprint", "pack_blob"]

#: Fold waiting states into the total when this many wait ...
FOLD_AT = 256
#: ... or when they hold about this many bytes (:func:`footprint`); stored states are read and
#: merged in groups of about this size too.
FOLD_BYTES = 128 << 20
_COMPRESS_ABOVE = 64 << 10  # canonical states larger than this are stored compressed


def footprint(num_classes: int, text_bytes: int) -> int:
    """Estimate the memory of a state in bytes: its count matrix and its canonical text's size.

    Parameters
    ----------
    num_classes : int
        ``K``: the state holds a ``K x K`` matrix of int64.
    text_bytes : int
        Length of its canonical JSON (per-image rows, names, keys: what else it holds).

    Returns
    -------
    int
    """
    return 8 * num_classes * num_classes + text_bytes


def empty_like(t: ConfusionMatrix) -> ConfusionMatrix:
    """Return an empty accumulator with the settings of ``t``."""
    return ConfusionMatrix(t.spec, gt_ids=t.gt_ids, pred_ids=t.pred_ids,
                           on_unexpected=t.on_unexpected, per_image=t.per_image)  # fmt: skip


def merge_all(cms: list[ConfusionMatrix]) -> ConfusionMatrix:
    """Merge states pairwise, as a tree: each merge copies its inputs, so a chain would not."""
    while len(cms) > 1:
        cms = [cms[i].merge(cms[i + 1]) if i + 1 < len(cms) else cms[i]
               for i in range(0, len(cms), 2)]  # fmt: skip
    return cms[0]


def pack_blob(canonical: bytes) -> bytes:
    """Store a canonical state as it is (JSON, starts with ``{``), or zlib-compressed if large.

    Small states are not worth a compressor's set-up time on the request path.
    """
    return zlib.compress(canonical, 1) if len(canonical) > _COMPRESS_ABOVE else canonical


def _stored(blob: bytes, where: str) -> tuple[ConfusionMatrix, int]:
    text = blob if blob[:1] == b"{" else zlib.decompress(blob)
    cm = ConfusionMatrix.from_dict(json.loads(text), source=where)
    return cm, footprint(cm.num_classes, len(text))


class RunTotal:
    """The running total of one run, and the states of batches not folded into it yet.

    Parameters
    ----------
    lock : threading.Lock
        The run's lock: :meth:`committed` is called under it, with the run's record updated in
        the same hold, so that a first read takes "the stored batches up to seq n" and "the
        batches after n" without a gap or an overlap.
    """

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._fold_lock = threading.Lock()  # one fold or first read at a time
        self.total: ConfusionMatrix | None = None
        self._pending: list[tuple[ConfusionMatrix, int]] = []  # state, footprint
        self._pending_bytes = 0
        self._loading = False  # a first read is merging the stored states
        self._folding = False  # a fold was asked for and has not started

    @property
    def pending(self) -> tuple[int, int]:
        """States waiting to be folded in, and their estimated bytes."""
        with self._lock:
            return len(self._pending), self._pending_bytes

    def committed(self, states: Iterable[tuple[ConfusionMatrix, int]]) -> bool:
        """Keep the states of batches just committed (the caller holds the run's lock).

        Returns
        -------
        bool
            Whether the caller should start a fold (:meth:`read` on another thread): the
            waiting states reached :data:`FOLD_AT` or :data:`FOLD_BYTES`.
        """
        if self.total is None and not self._loading:
            return False  # no read yet: the first one merges them from the database
        for cm, size in states:
            self._pending.append((cm, size))
            self._pending_bytes += size
        due = len(self._pending) >= FOLD_AT or self._pending_bytes >= FOLD_BYTES
        if due and self.total is not None and not self._folding:
            self._folding = True
            return True
        return False

    def read(
        self,
        upto: Callable[[], int],
        stored: Callable[[int], Iterable[bytes]],
        template: ConfusionMatrix,
        where: str,
    ) -> ConfusionMatrix:
        """Return the total of every batch committed before the call (never mutated later).

        Parameters
        ----------
        upto : callable
            Returns the run's last committed seq (called under the run's lock).
        stored : callable
            ``stored(n)``: the stored states of the run's batches with seq up to ``n``.
        template : ConfusionMatrix
            The run's empty state.
        where : str
            Names the stored states in error messages.
        """
        with self._fold_lock:
            with self._lock:
                total, self._folding = self.total, False
                if total is None:
                    last, self._loading = upto(), True  # later batches wait in _pending
            if total is not None:  # a merge that fails (no memory) leaves everything as it was
                return self._fold(total, install=True)
            blobs = stored(last)
            try:
                return self._fold(self._load(blobs, template, where), install=True)
            except BaseException:
                with self._lock:  # the next read reads every stored state again, these too
                    self._loading, self._pending, self._pending_bytes = False, [], 0
                raise
            finally:
                with contextlib.suppress(Exception):  # a generator: its connection closes
                    blobs.close()  # type: ignore[attr-defined]

    def _load(
        self, blobs: Iterable[bytes], template: ConfusionMatrix, where: str
    ) -> ConfusionMatrix:
        total, group, size = empty_like(template), [], 0
        for blob in blobs:
            cm, n = _stored(blob, where)
            group.append(cm)
            size += n
            if size >= FOLD_BYTES or len(group) >= FOLD_AT:
                total, group, size = total.merge(merge_all(group)), [], 0
                with self._lock:
                    due = self._pending_bytes >= FOLD_BYTES or len(self._pending) >= FOLD_AT
                if due:  # batches committed meanwhile: folded in as they come
                    total = self._fold(total, install=False)
        return total.merge(merge_all(group)) if group else total

    def _fold(self, total: ConfusionMatrix, *, install: bool) -> ConfusionMatrix:
        with self._lock:
            taken = list(self._pending)
        if taken:
            total = total.merge(merge_all([cm for cm, _ in taken]))
        with self._lock:
            del self._pending[: len(taken)]
            self._pending_bytes -= sum(n for _, n in taken)
            if install:
                self.total, self._loading = total, False
        return total
