"""Open what a user points at: a Zarr mask store, or a folder of label images.

The engine (:func:`segiou.parallel.count_stores`) counts two *sources* of named masks: a
:class:`~segiou.io.zarr.MaskSet` (a Zarr store) or a :class:`~segiou.io.png.PngSet` (image
files). :func:`open_pair` turns two paths into two sources of the same kind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from segiou.errors import MaskNotFoundError, StoreLayoutError, UsageError
from segiou.io.zarr import MaskSet, is_zarr, recorded_ids

__all__ = ["FolderLayout", "Source", "check_apart", "instance_files", "is_zarr", "open_instances",
           "open_pair", "recorded_ids"]  # fmt: skip

#: A source of named masks: :class:`~segiou.io.zarr.MaskSet` or :class:`~segiou.io.png.PngSet`.
Source = Any
#: How image files pair up: ``"auto"`` recognises the Cityscapes layout (see
#: :func:`segiou.io.datasets.detect_dataset`), else names are relative paths (``"plain"``).
FolderLayout = Literal["auto", "plain", "cityscapes"]


def open_pair(
    gt: str | Path,
    pred: str | Path,
    *,
    layout: FolderLayout = "auto",
    gt_pattern: str | None = None,
    pred_pattern: str | None = None,
) -> tuple[Source, Source]:
    """Open ground truth and predictions: two Zarr stores, or two folders of label images.

    Parameters
    ----------
    gt, pred : str or Path
        Zarr stores (``store[/path]`` or URL; see :func:`is_zarr`), or folders of label images
        paired by name (:func:`segiou.io.png.find_pairs`).
    layout : {"auto", "plain", "cityscapes"}, default "auto"
        Image folders only: how files are named (see :func:`segiou.io.png.find_pairs`);
        ``"auto"``: ``"cityscapes"`` when the ground truth holds ``*_gtFine_labelIds.png``
        files, else ``"plain"``.
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
    UsageError
        Masks on both sides (:func:`check_apart`): the same store or folder, or one inside the
        other.
    """
    if layout not in ("auto", "plain", "cityscapes"):  # (any other name read as "plain")
        msg = f"layout={layout!r} is unknown; expected 'auto', 'plain' or 'cityscapes'"
        raise UsageError(msg)
    zarr_gt, zarr_pred = is_zarr(gt), is_zarr(pred)
    if zarr_gt and zarr_pred:
        from segiou.io.zarr import open_masks

        pair = open_masks(gt), open_masks(pred)
        check_apart(*pair)
        return pair
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
    from segiou.io.datasets import detect_dataset
    from segiou.io.png import find_pairs

    how = detect_dataset(gt).layout if layout == "auto" else layout
    return find_pairs(gt, pred, layout=how,  # type: ignore[arg-type]
                      gt_pattern=gt_pattern, pred_pattern=pred_pattern)  # fmt: skip


def _store_key(url: str, path: str) -> tuple[str | int, ...]:
    """Where an array or group is, the same however it is reached.

    Local: the device and inode of its folder in the store, links followed on the whole way
    (the store root's and any inside the store, ``s.zarr/pred -> gt``), and a bind mount of
    the store is the store it mounts; its resolved path when it cannot be read. Remote: one
    spelling of the store's URL, and the path inside it.
    """
    from segiou.io.zarr import canonical_url

    if "://" in url and not url.startswith("file://"):
        return "url", canonical_url(url), path
    node = Path(url.removeprefix("file://")) / path
    try:
        st = node.stat()
    except OSError:
        return "path", os.path.realpath(node)
    return "inode", st.st_dev, st.st_ino


def check_apart(gt: Source, pred: Source) -> None:
    """Refuse ground truth and predictions that share masks.

    The same store array (or group, or folder) on both sides scores every prediction against
    itself (100%); a group or folder that holds the other side's masks (a subgroup, a
    subfolder, or a link to them) lists them as its own images, so they are counted on both
    sides. Store locations are compared by identity (links followed, inside a store too; a
    bind mount is what it mounts); sources of different kinds share nothing.

    Parameters
    ----------
    gt, pred : MaskSet or PngSet
        The two sides.

    Raises
    ------
    UsageError
        A mask read on both sides (the message says how, and what to do).
    """
    from segiou.io.png import PngSet
    from segiou.io.png import check_apart as files_apart

    if isinstance(gt, PngSet) and isinstance(pred, PngSet):
        files_apart(gt, pred)
        return
    if not (isinstance(gt, MaskSet) and isinstance(pred, MaskSet)):
        return
    mine = {_store_key(a.url, a.path) for a in gt.arrays}
    shared = [a.path or a.url for a in pred.arrays if _store_key(a.url, a.path) in mine]
    if not shared:
        _check_metadata_links(gt, pred)
        return
    if _store_key(gt.url, gt.path) == _store_key(pred.url, pred.path):
        msg = (
            f"the ground truth and the predictions are the same store array or group, "
            f"{gt.where()}: every prediction would be scored against itself. Give the "
            "predictions' array or group (--pred), e.g. store.zarr/pred"
        )
        raise UsageError(msg)
    msg = (
        f"{len(shared)} array(s) are read both as ground truth ({gt.where()}) and as "
        f"predictions ({pred.where()}), e.g. {shared[:3]}: a group's images include its "
        "subgroups' arrays, so one side holds the other. Point --gt and --pred at two "
        "groups that do not contain each other (e.g. store.zarr/gt and store.zarr/pred)"
    )
    raise UsageError(msg)


def _metadata_files(masks: MaskSet) -> tuple[str, ...]:
    """Return the metadata file (``zarr.json``, or v2's ``.zarray``) of each local array."""
    found = []
    for a in masks.arrays:
        if "://" in a.url and not a.url.startswith("file://"):
            continue
        folder = Path(a.url.removeprefix("file://")) / a.path
        meta = next((folder / m for m in ("zarr.json", ".zarray") if os.path.lexists(folder / m)),
                    None)  # fmt: skip
        if meta is not None:
            found.append(str(meta.absolute()))
    return tuple(found)


def _check_metadata_links(gt: MaskSet, pred: MaskSet) -> None:
    """Refuse arrays whose metadata file links to an array's metadata file on the other side.

    A store copied as links (``cp -rs gt.zarr pred.zarr``) has folders of its own and every
    file a link into the other store: each prediction would be the ground-truth array. Links
    into a cache that neither side lists are fine, as for image files.
    """
    from segiou.io._links import linked_across, places

    seen: dict[str, tuple[int, int] | str] = {}
    gt_places, pred_places = places(_metadata_files(gt), seen), places(_metadata_files(pred), seen)
    linked, side, other = linked_across(gt_places, pred_places)
    if not linked:
        return
    path, target = linked[0]
    msg = (
        f"{len(linked)} {side} array(s) have metadata files that are links to the {other} "
        f"arrays' own, e.g. {path} -> {target}: each such array is the {other} array (a "
        "store copied as links, cp -rs), and every prediction would be scored against "
        "itself. Give the predictions' own store (--pred)"
    )
    raise UsageError(msg)


#: What marks a Cityscapes ground-truth file, and its instance file (as cityscapesScripts does).
_LABEL_IDS, _INSTANCE_IDS = "_gtFine_labelIds", "_gtFine_instanceIds"


def instance_files(gt: Source) -> Source | None:
    """Return the Cityscapes instance files beside ground-truth files, or ``None``.

    ``<name>_gtFine_labelIds.png`` has its instances in ``<name>_gtFine_instanceIds.png`` in
    the same folder (cityscapesScripts' rule).

    Parameters
    ----------
    gt : PngSet
        Ground-truth files.

    Returns
    -------
    PngSet or None
        The instance files in the order of ``gt`` (same names), or ``None`` when the files are
        not Cityscapes labelIds files or none has an instance file.

    Raises
    ------
    MaskNotFoundError
        Some ground-truth files have an instance file and others do not (listed).
    """
    from segiou.io.png import PngSet

    if not isinstance(gt, PngSet) or not gt.paths:
        return None
    if not all(_LABEL_IDS in Path(p).name for p in gt.paths):
        return None
    paths = [str(Path(p).with_name(Path(p).name.replace(_LABEL_IDS, _INSTANCE_IDS)))
             for p in gt.paths]  # fmt: skip
    there = [Path(p).is_file() for p in paths]
    if not any(there):
        return None
    if not all(there):
        missing = [p for p, ok in zip(paths, there, strict=True) if not ok]
        msg = (
            f"{gt.where()}: {len(missing)} of {len(paths)} ground-truth image(s) have no instance "
            f"file beside them, e.g. {missing[:3]}; add them, or evaluate without instances "
            "(instances=False, --no-instances)"
        )
        raise MaskNotFoundError(msg)
    return PngSet(gt.names, tuple(paths), gt.root)


def open_instances(gt: Source, given: object = None) -> Source | None:
    """Open the instance ids of a ground truth: given, or found beside it.

    Parameters
    ----------
    gt : MaskSet or PngSet
        The ground truth.
    given : str, Path, MaskSet, PngSet or None
        Where the instances are; ``None`` looks beside the ground truth: the array (or group)
        ``instances`` next to a store's ground-truth array (``segiou ingest`` writes it), or
        Cityscapes ``*_gtFine_instanceIds.png`` next to ``*_gtFine_labelIds.png`` files.

    Returns
    -------
    MaskSet, PngSet or None
        Aligned with ``gt``: the same image names in the same order.

    Raises
    ------
    MaskNotFoundError
        Given instances that do not exist, or that miss images of the ground truth.
    StoreLayoutError
        Instances whose images differ in size from the ground truth.
    """
    from segiou.io.png import PngSet, png_set
    from segiou.io.zarr import MaskSet, open_masks

    src: Any = given
    if src is None:
        if isinstance(gt, PngSet):
            return instance_files(gt)
        if not isinstance(gt, MaskSet) or not gt.path:
            return None
        parent = gt.path.rsplit("/", 1)[0] if "/" in gt.path else ""
        path = f"{parent}/instances" if parent else "instances"
        try:
            src = open_masks(gt.url, path)
        except MaskNotFoundError:
            return None
    elif isinstance(src, str | Path):
        src = (open_masks(src) if is_zarr(src) else
               png_set(src, f"*{_INSTANCE_IDS}.png", layout="cityscapes", side="instances"))  # fmt: skip
    where = {n: j for j, n in enumerate(src.names)}
    if missing := [n for n in gt.names if n not in where]:
        msg = (
            f"{src.where()}: the instances of {len(missing)} ground-truth image(s) are missing, "
            f"e.g. {missing[:3]}; give instances for every image of {gt.where()}"
        )
        raise MaskNotFoundError(msg)
    order = [where[n] for n in gt.names]
    if isinstance(src, PngSet):
        src = PngSet(gt.names, tuple(src.paths[j] for j in order), src.root)
    elif order != list(range(len(gt.names))) or len(src.names) != len(gt.names):
        msg = (
            f"{src.where()}: the instances list their images in another order than "
            f"{gt.where()} (or hold more); store them in the ground truth's order"
        )
        raise StoreLayoutError(msg)
    if isinstance(src, MaskSet) and isinstance(gt, MaskSet):
        bad = [n for j, n in enumerate(gt.names) if src.image_shape(j) != gt.image_shape(j)]
        if bad:
            msg = f"{src.where()}: instance images differ in size from the ground truth: {bad[:3]}"
            raise StoreLayoutError(msg)
    return src
