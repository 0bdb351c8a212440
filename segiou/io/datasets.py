"""Datasets as their users lay them out: Cityscapes, Pascal VOC and ADE20K folders, recognised.

:func:`detect_dataset` looks at a ground-truth folder and says which layout (how files pair
up) and which built-in label spec fit it:

==============  ====================================================  =========  ===========
dataset         ground truth as shipped                               layout     labels
==============  ====================================================  =========  ===========
Cityscapes      ``gtFine/<split>/<city>/*_gtFine_labelIds.png``        cityscapes cityscapes
Pascal VOC      ``VOC2012/SegmentationClass/*.png`` (palette, 255)    plain      pascal_voc
ADE20K          ``ADEChallengeData2016/annotations/<split>/*.png``    plain      ade20k
==============  ====================================================  =========  ===========

:func:`cityscapes_paths` reads ``CITYSCAPES_DATASET`` / ``CITYSCAPES_RESULTS`` as
cityscapesScripts does; :func:`pairing_hints` says which layout options would pair two
folders better when the one in use does not pair them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Detected", "cityscapes_paths", "dataset_labels", "detect_dataset", "pairing_hints"]

_CITYSCAPES_GT = "*_gtFine_labelIds.png"
_ADE_FILE = re.compile(r"ADE_(train|val)_\d+\.png$")


@dataclass(frozen=True)
class Detected:
    """What a ground-truth folder looks like.

    Attributes
    ----------
    layout : {"plain", "cityscapes"}
        How files pair up (see :func:`segiou.io.png.find_pairs`).
    labels : str or None
        The built-in spec of the dataset, or ``None`` when none was recognised.
    dataset : str or None
        ``"Cityscapes"``, ``"Pascal VOC"``, ``"ADE20K"`` or ``None``.
    why : str
        What was found, for the output (``""`` when nothing was recognised).
    """

    layout: str = "plain"
    labels: str | None = None
    dataset: str | None = None
    why: str = ""


def detect_dataset(gt: str | Path) -> Detected:
    """Recognise a dataset's ground-truth folder as it is shipped.

    Parameters
    ----------
    gt : str or Path
        A folder of ground-truth images (anything else is not recognised).

    Returns
    -------
    Detected
        Cityscapes when ``*_gtFine_labelIds.png`` files are under the folder; Pascal VOC for a
        folder named ``SegmentationClass``; ADE20K for ``annotations/training`` or
        ``annotations/validation`` or files named ``ADE_val_*.png`` / ``ADE_train_*.png``.

    Examples
    --------
    >>> detect_dataset("no/such/folder").dataset is None
    True
    """
    from segiou.io.zarr import is_zarr

    p = Path(str(gt))
    if not p.is_dir() or is_zarr(p):  # a store's chunk files are no dataset's folders
        return Detected()
    hit = next(p.rglob(_CITYSCAPES_GT), None)
    if hit is not None:
        why = f"files named {_CITYSCAPES_GT} under {p} (e.g. {hit.name})"
        return Detected("cityscapes", "cityscapes", "Cityscapes", why)
    if p.name in ("SegmentationClass", "SegmentationClassAug"):
        return Detected("plain", "pascal_voc", "Pascal VOC", f"a folder named {p.name}")
    if p.parent.name == "annotations" and p.name in ("training", "validation"):
        return Detected("plain", "ade20k", "ADE20K", f"a folder annotations/{p.name}")
    first = next((f for f in p.glob("*.png")), None)
    if first is not None and _ADE_FILE.search(first.name):
        return Detected("plain", "ade20k", "ADE20K", f"files named like {first.name}")
    return Detected()


def dataset_labels(found: Detected, given: str | None, default: str | None = None) -> str | None:
    """Return the label spec to use: the one given, else the recognised dataset's, or ``default``.

    What ``segiou eval`` and ``segiou ingest`` do when ``--labels`` is not given: a folder
    recognised by :func:`detect_dataset` brings its built-in spec (so that colour masks of
    Pascal VOC or Cityscapes decode through its colours); ``eval`` falls back to
    ``cityscapes``, ``ingest`` to no spec (grey masks need none).

    Parameters
    ----------
    found : Detected
        What :func:`detect_dataset` said about the ground-truth folder.
    given : str or None
        The spec asked for (``--labels``), or ``None``.
    default : str, optional
        The spec when none was given and no dataset was recognised.

    Returns
    -------
    str or None

    Examples
    --------
    >>> voc = Detected("plain", "pascal_voc", "Pascal VOC", "a folder named SegmentationClass")
    >>> dataset_labels(voc, None), dataset_labels(voc, "ade20k")
    ('pascal_voc', 'ade20k')
    >>> dataset_labels(Detected(), None), dataset_labels(Detected(), None, "cityscapes")
    (None, 'cityscapes')
    """
    return given if given is not None else (found.labels or default)


def cityscapes_paths(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """Ground-truth and results folders from the environment, as cityscapesScripts finds them.

    Parameters
    ----------
    env : mapping, optional
        The environment (default ``os.environ``).

    Returns
    -------
    (str or None, str or None)
        ``$CITYSCAPES_DATASET/gtFine/val``; ``$CITYSCAPES_RESULTS``, else
        ``$CITYSCAPES_DATASET/results``. ``None`` where the variables say nothing.

    Examples
    --------
    >>> cityscapes_paths({"CITYSCAPES_DATASET": "/data/cs"})
    ('/data/cs/gtFine/val', '/data/cs/results')
    """
    env = os.environ if env is None else env
    root = env.get("CITYSCAPES_DATASET")
    gt = str(Path(root) / "gtFine" / "val") if root else None
    results = env.get("CITYSCAPES_RESULTS") or (str(Path(root) / "results") if root else None)
    return gt, results


def pairing_hints(gt: str | Path, pred: str | Path, tried: str, paired: int = 0) -> list[str]:
    """Layout options that would pair the files of two folders better (for an error message).

    Only options that ``segiou eval``, ``segiou push`` and
    :func:`~segiou.parallel.count_stores` accept (the layouts), and only those that pair more ground-truth images than the layout used, or pair
    every file on both sides (an option that pairs no more would not fix the problem, e.g. an
    extra prediction file).

    Parameters
    ----------
    gt, pred : str or Path
        The folders.
    tried : str
        The layout that was used (not suggested again).
    paired : int, default 0
        How many ground-truth images the layout used paired.

    Returns
    -------
    list of str
        For example ``"--layout cityscapes (pairs 500 of 500 ground-truth images)"``.
    """
    from segiou.errors import SegiouError
    from segiou.io.png import png_set

    options: list[tuple[Literal["cityscapes", "plain"], str]] = [
        ("cityscapes", _CITYSCAPES_GT), ("plain", "*.png")]  # fmt: skip
    out = []
    for layout, gt_glob in options:
        if layout == tried:
            continue
        try:
            g = png_set(gt, gt_glob, side="gt", layout=layout)
            p = png_set(pred, "*.png", side="pred", layout=layout)
        except (SegiouError, OSError):
            continue
        n = len(set(g.names) & set(p.names))
        if n > paired or (n and n == len(g.names) == len(p.names)):
            out.append(f"--layout {layout} (pairs {n} of {len(g.names)} ground-truth images)")
    return out
