"""Open what a user points at: a Zarr mask store, or a folder of label images.

The engine (:func:`segiou.parallel.count_stores`) counts two *sources* of named masks: a
:class:`~segiou.io.zarr.MaskSet` (a Zarr store) or a :class:`~segiou.io.png.PngSet` (image
files). :func:`open_pair` turns two paths into two sources of the same kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from segiou.errors import MaskNotFoundError, UsageError
from segiou.io.zarr import recorded_ids

__all__ = ["FolderLayout", "Source", "is_zarr", "open_pair", "recorded_ids"]

#: A source of named masks: :class:`~segiou.io.zarr.MaskSet` or :class:`~segiou.io.png.PngSet`.
Source = Any
FolderLayout = Literal["plain", "cityscapes"]


def is_zarr(path: str | Path) -> bool:
    """Whether ``path`` names a Zarr store (or a node inside one) rather than an image folder.

    Parameters
    ----------
    path : str or Path
        A URL with a scheme other than ``file://`` counts as Zarr (remote stores); a local
        path counts when it, or a folder above it, holds ``zarr.json``, ``.zgroup`` or
        ``.zarray``.

    Returns
    -------
    bool
    """
    text = str(path)
    if "://" in text and not text.startswith("file://"):
        return True
    p = Path(text.removeprefix("file://"))
    return any(
        (q / m).exists() for q in (p, *p.parents) for m in ("zarr.json", ".zgroup", ".zarray")
    )


def open_pair(
    gt: str | Path,
    pred: str | Path,
    *,
    layout: FolderLayout = "plain",
    gt_pattern: str | None = None,
    pred_pattern: str | None = None,
) -> tuple[Source, Source]:
    """Open ground truth and predictions: two Zarr stores, or two folders of label images.

    Parameters
    ----------
    gt, pred : str or Path
        Zarr stores (``store[/path]`` or URL; see :func:`is_zarr`), or folders of label images
        paired by name (:func:`segiou.io.png.find_pairs`).
    layout : {"plain", "cityscapes"}, default "plain"
        Image folders only: how files are named (see :func:`segiou.io.png.find_pairs`).
    gt_pattern, pred_pattern : str, optional
        Image folders only: globs of the files.

    Returns
    -------
    (source, source)
        Two :class:`~segiou.io.zarr.MaskSet` or two :class:`~segiou.io.png.PngSet`.

    Raises
    ------
    UsageError
        One side is a Zarr store and the other a folder.
    MaskNotFoundError
        A path that is not Zarr does not exist, or a folder holds no matching file.
    StoreLayoutError
        A Zarr store without the documented layout.
    NamingError
        Image files that get no name, or duplicate names.
    """
    zarr_gt, zarr_pred = is_zarr(gt), is_zarr(pred)
    if zarr_gt and zarr_pred:
        from segiou.io.zarr import open_masks

        return open_masks(gt), open_masks(pred)
    if zarr_gt or zarr_pred:
        zside, fside = ("--gt", "--pred") if zarr_gt else ("--pred", "--gt")
        fpath = pred if zarr_gt else gt
        missing = not Path(fpath).exists()
        what = "does not exist" if missing else "is not a Zarr store"
        msg = (
            f"{zside} is a Zarr store but {fside} {str(fpath)!r} {what}; give both as Zarr "
            "stores, or both as folders of label images (segiou ingest packs folders into a store)"
        )
        raise MaskNotFoundError(msg) if missing else UsageError(msg)
    for side, path in (("--gt", gt), ("--pred", pred)):
        if not Path(path).exists():
            msg = f"{side} {str(path)!r} does not exist; give a Zarr store or a folder of PNG masks"
            raise MaskNotFoundError(msg)
    from segiou.io.png import find_pairs

    return find_pairs(gt, pred, layout=layout, gt_pattern=gt_pattern, pred_pattern=pred_pattern)
