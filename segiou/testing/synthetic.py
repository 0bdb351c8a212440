"""Seeded synthetic Cityscapes-like masks for the demo, the tests and the benchmarks.

The masks are made of spatially coherent regions with wiggly (not grid-aligned) boundaries,
class frequencies roughly like Cityscapes' (road, building, vegetation and sky dominate), an
ego-vehicle band of ignored pixels at the bottom, and prediction errors in coherent patches in
which a class is confused with a plausible neighbour. Nothing here is used to compute metrics.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["CITYSCAPES_TRAIN_FREQ", "cityscapes_like", "iid_labels"]

#: Approximate pixel share of the 19 Cityscapes train classes (road .. bicycle).
CITYSCAPES_TRAIN_FREQ = np.array(
    [
        36.9,
        6.1,
        22.8,
        0.66,
        0.88,
        1.2,
        0.21,
        0.55,
        15.9,
        1.2,
        4.0,
        1.2,
        0.14,
        7.0,
        0.27,
        0.24,
        0.23,
        0.1,
        0.41,
    ]
)
#: A plausible class to confuse each train class with (same category where possible).
_CONFUSED_WITH = np.array([1, 0, 3, 4, 2, 7, 7, 6, 9, 8, 2, 12, 11, 14, 15, 16, 15, 18, 17])
#: trainId -> Cityscapes labelId.
_TRAIN_TO_LABEL = np.array(
    [7, 8, 11, 12, 13, 17, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 31, 32, 33], dtype=np.uint8
)


def _field(
    rng: np.random.Generator, shape: tuple[int, int], cell: int, p: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Labels drawn per coarse cell with probabilities ``p``, upsampled with warped edges."""
    h, w = shape
    ch, cw = h // cell + 3, w // cell + 3
    coarse = rng.choice(p.size, size=(ch, cw), p=p / p.sum())
    y = np.arange(h)[:, None]
    x = np.arange(w)[None, :]
    amp = cell * 0.6
    fy, fx = rng.uniform(0.5, 2.0, 2) * 2 * np.pi / max(h, w) * 4
    py, px = rng.uniform(0, 2 * np.pi, 2)
    yy = ((y + amp * (1 + np.sin(fx * x + px))) // cell).astype(np.intp)
    xx = ((x + amp * (1 + np.sin(fy * y + py))) // cell).astype(np.intp)
    out: npt.NDArray[np.int64] = coarse[np.minimum(yy, ch - 1), np.minimum(xx, cw - 1)]
    return out


def cityscapes_like(
    n: int,
    height: int = 1024,
    width: int = 2048,
    *,
    seed: int = 0,
    error_rate: float = 0.10,
    ignore_rows: float = 0.05,
    void_rate: float = 0.01,
    label_ids: bool = False,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Make ``n`` ground-truth and prediction masks that look like Cityscapes.

    Parameters
    ----------
    n, height, width : int
        Number and size of the images (default 1024 x 2048, Cityscapes' size).
    seed : int, default 0
        Seed of the random generator: the same seed gives the same masks.
    error_rate : float, default 0.10
        Approximate share of wrongly predicted pixels, in coherent patches.
    ignore_rows : float, default 0.05
        Share of rows at the bottom (the ego vehicle) that are ignored in the ground truth.
    void_rate : float, default 0.01
        Approximate share of predictions in coherent patches with a class that is not
        evaluated (255 in trainId space, the "parking" labelId 9 in labelId space).
    label_ids : bool, default False
        Return Cityscapes labelIds (0..33) instead of trainIds (0..18, 255 = ignore).

    Returns
    -------
    gt, pred : ndarray of uint8, shape (n, height, width)

    Examples
    --------
    >>> gt, pred = cityscapes_like(2, 64, 128, seed=1)
    >>> gt.shape, gt.dtype
    ((2, 64, 128), dtype('uint8'))
    """
    rng = np.random.default_rng(seed)
    gt = np.empty((n, height, width), dtype=np.uint8)
    pred = np.empty_like(gt)
    cell = max(4, min(height, width) // 18)
    err_cell = max(4, cell // 2)
    for i in range(n):
        g = _field(rng, (height, width), cell, CITYSCAPES_TRAIN_FREQ).astype(np.uint8)
        kind = _field(
            rng,
            (height, width),
            err_cell,
            np.array([1 - error_rate - void_rate, error_rate, void_rate]),
        )
        p = np.where(kind == 1, _CONFUSED_WITH[g], g).astype(np.uint8)
        p[kind == 2] = 255
        cut = height - round(height * ignore_rows)
        g[cut:] = 255
        if label_ids:
            lut_g = np.zeros(256, dtype=np.uint8)  # 255 -> labelId 1 (ego vehicle)
            lut_g[:19] = _TRAIN_TO_LABEL
            lut_g[255] = 1
            lut_p = lut_g.copy()
            lut_p[255] = 9  # "parking": a known labelId that is not evaluated -> void
            g, p = lut_g[g], lut_p[p]
        gt[i], pred[i] = g, p
    return gt, pred


def iid_labels(
    n: int, height: int = 1024, width: int = 2048, *, num_classes: int = 19, seed: int = 0
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint8]]:
    """Independent uniform labels in ``0..num_classes-1``: the worst case for run-based tricks.

    Every pixel of the ground truth and of the prediction is drawn independently and uniformly:
    no spatial coherence, no ignored or void pixels.

    Parameters
    ----------
    n, height, width : int
        Number and size of the images (default 1024 x 2048).
    num_classes : int, default 19
        Labels are drawn from ``0..num_classes-1`` (at most 256: the masks are uint8).
    seed : int, default 0
        Seed of the random generator: the same seed gives the same masks.

    Returns
    -------
    gt, pred : ndarray of uint8, shape (n, height, width)

    Examples
    --------
    >>> gt, pred = iid_labels(1, 4, 4, num_classes=3)
    >>> int(gt.max()) < 3
    True
    """
    rng = np.random.default_rng(seed)
    shape = (n, height, width)
    return (
        rng.integers(0, num_classes, shape, dtype=np.uint8),
        rng.integers(0, num_classes, shape, dtype=np.uint8),
    )
