"""What one counting pass found: :class:`Tally`, its counts dense or as the cells it holds.

A batch of few pixels and many classes holds few cells of its ``K x K`` matrix: 16 pixels of
4,096 classes fill at most 16 of 16.8 million. Such a batch is counted into its cells
(:func:`segiou._count.count_pairs`), and only the cells are added to an accumulator, so an
update costs what the batch holds, not ``K**2`` (a dense table made, copied and added per
update took 0.1-0.25 s at 4,096 classes).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from segiou._typing import CountMatrix, IntArray
from segiou.errors import InternalError
from segiou.images import ImageRows

__all__ = ["Cells", "Tally", "class_sums", "summed_table", "table_sums"]


@dataclass(frozen=True)
class Cells:
    """The non-zero cells of a ``width x width`` code table: flat codes and their counts.

    ``codes`` are distinct, ``gt_code * width + pred_code``; codes ``K`` and ``K + 1`` are the
    ignored/void and unexpected rows and columns, as in the dense table.
    """

    width: int
    codes: IntArray
    counts: IntArray

    @classmethod
    def join(cls, parts: list[tuple[IntArray, IntArray]], width: int) -> Cells:
        """Join ``(codes, counts)`` parts whose codes may repeat: summed, sorted by code."""
        if len(parts) == 1 and parts[0][0].size < 2:
            return cls(width, *parts[0])
        every, inverse = np.unique(np.concatenate([c for c, _ in parts]), return_inverse=True)
        summed = np.zeros(every.size, dtype=np.int64)
        np.add.at(summed, inverse, np.concatenate([n for _, n in parts]))
        return cls(width, every, summed)

    def sums(self) -> tuple[int, int, int, int]:
        """``(unexpected gt, unexpected pred at valid gt, ignored gt, all)`` pixels."""
        k = self.width - 2
        g, p = np.divmod(self.codes, self.width)
        n = self.counts
        return (int(n[g == k + 1].sum()), int(n[(g < k) & (p == k + 1)].sum()),
                int(n[g == k].sum()), int(n.sum()))  # fmt: skip


def summed_table(codes: IntArray, counts: IntArray, width: int) -> IntArray | Cells:
    """Sum ``counts`` by flat code: a dense table while small, else its :class:`Cells`.

    Dense while ``width x width`` has at most 65,536 cells (no sort of the codes).
    """
    if width * width > 1 << 16:
        return Cells.join([(codes, counts)], width)
    table = np.zeros(width * width, dtype=np.int64)
    np.add.at(table, codes, counts)
    return table.reshape(width, width)


def table_sums(table: IntArray | Cells, k: int) -> tuple[int, int, int, int]:
    """``(unexpected gt, unexpected pred at valid gt, ignored gt, all)`` pixels of a table.

    ``table`` is a folded ``(K+2) x (K+2)`` code table or its :class:`Cells`.
    """
    if isinstance(table, Cells):
        return table.sums()
    return (int(table[k + 1, :].sum()), int(table[:k, k + 1].sum()), int(table[k, :].sum()),
            int(table.sum()))  # fmt: skip


def class_sums(table: IntArray | Cells, k: int) -> tuple[IntArray, IntArray, IntArray]:
    """Per-class sums of a ``(K+2) x (K+2)`` code table or its cells.

    Returns ground-truth pixels the counts hold (a class or void predicted), true positives,
    and predicted pixels at class ground truth.
    """
    if not isinstance(table, Cells):
        c = table[:k, :k]
        return table[:k, : k + 1].sum(axis=1), np.diagonal(c).copy(), c.sum(axis=0)
    g, p = np.divmod(table.codes, table.width)
    out = [np.zeros(k, dtype=np.int64) for _ in range(3)]
    for o, sel, at in ((out[0], (g < k) & (p <= k), g), (out[1], (g == p) & (g < k), g),
                       (out[2], (g < k) & (p < k), p)):  # fmt: skip
        np.add.at(o, at[sel], table.counts[sel])
    return out[0], out[1], out[2]


@dataclass(frozen=True)
class Tally:
    """Everything one counting pass found, pixel for pixel.

    ``counts.sum() + void.sum() + n_ignored + sum(unexpected_gt.values())
    + sum(unexpected_pred.values())`` equals the number of pixels. The ``K x K`` counts are
    held dense (``dense``) or as their non-zero cells (``cells``: ground-truth class,
    predicted class, count); :attr:`counts` is dense either way (made on first use), and
    :meth:`add_counts_into` adds either without making it.
    """

    void: IntArray
    n_ignored: int
    unexpected_gt: dict[int, int]
    unexpected_pred: dict[int, int]
    images: ImageRows | None = None
    dense: CountMatrix | None = None
    cells: tuple[IntArray, IntArray, IntArray] | None = None

    def __post_init__(self) -> None:
        if (self.dense is None) == (self.cells is None):
            msg = "internal error: a Tally holds its counts either dense or as cells"
            raise InternalError(msg)

    @classmethod
    def from_table(
        cls,
        table: IntArray | Cells,
        k: int,
        unexpected_gt: dict[int, int],
        unexpected_pred: dict[int, int],
        images: ImageRows | None = None,
    ) -> Tally:
        """Sort a folded ``(K+2) x (K+2)`` code table (or its cells) into counts, void, ignored."""
        if isinstance(table, Cells):
            g, p = np.divmod(table.codes, table.width)
            n = table.counts
            counted, void = (g < k) & (p < k), (g < k) & (p == k)
            v = np.zeros(k, dtype=np.int64)
            np.add.at(v, g[void], n[void])
            return cls(v, table.sums()[2], unexpected_gt, unexpected_pred, images,
                       cells=(g[counted], p[counted], n[counted]))  # fmt: skip
        return cls(table[:k, k].copy(), int(table[k, :].sum()), unexpected_gt, unexpected_pred,
                   images, dense=np.ascontiguousarray(table[:k, :k]))  # fmt: skip

    @cached_property
    def counts(self) -> CountMatrix:
        """The ``K x K`` counts (rows ground truth, columns prediction), dense."""
        if self.dense is not None:
            return self.dense
        k = self.void.shape[0]
        out = np.zeros((k, k), dtype=np.int64)
        self.add_counts_into(out)
        return out

    def add_counts_into(self, out: CountMatrix) -> None:
        """Add the counts into ``out`` (``K x K``), in place, without making them dense."""
        if self.dense is not None:
            out += self.dense
        else:
            assert self.cells is not None
            g, p, n = self.cells
            np.add.at(out, (g, p), n)

    def class_sums(self) -> tuple[IntArray, IntArray, IntArray]:
        """Return per-class sums of the counts, from the cells without a dense matrix.

        Ground-truth pixels the counts hold (counted or void: a pixel whose prediction is
        unexpected is in neither, nor in Boundary IoU's ``|G|``), true positives, and predicted
        pixels at class ground truth.
        """
        if self.dense is not None:
            c = self.dense
            return c.sum(axis=1) + self.void, np.diagonal(c).copy(), c.sum(axis=0)
        assert self.cells is not None
        g, p, n = self.cells
        out = [np.zeros(self.void.shape[0], dtype=np.int64) for _ in range(3)]
        np.add.at(out[0], g, n)
        np.add.at(out[1], g[g == p], n[g == p])
        np.add.at(out[2], p, n)
        return out[0] + self.void, out[1], out[2]

    @property
    def n_counted(self) -> int:
        """Pixels in the counts (ground truth and prediction both classes)."""
        if self.dense is not None:
            return int(self.dense.sum())
        assert self.cells is not None
        return int(self.cells[2].sum())

    @property
    def n_pixels(self) -> int:
        """Number of pixels this tally accounts for."""
        return (
            self.n_counted
            + int(self.void.sum())
            + self.n_ignored
            + sum(self.unexpected_gt.values())
            + sum(self.unexpected_pred.values())
        )
