"""segiou: trustworthy, fast IoU evaluation for semantic segmentation.

One verb per job: counting produces a :class:`ConfusionMatrix` (:meth:`ConfusionMatrix.update`
for arrays, :func:`segiou.parallel.count_stores` for Zarr stores and folders of label images);
:func:`evaluate` turns counts into a :class:`Result`; :mod:`segiou.report` renders it.

``import segiou`` is light: it loads numpy, numba and the core (counting, metrics, label specs).
Storage adapters (:mod:`segiou.io`), the Dask engine (:mod:`segiou.parallel`), reports, the
command line, box/set overlap (:mod:`segiou.geometry`) and test helpers (:mod:`segiou.testing`)
load on first use.
"""

from __future__ import annotations

import difflib
from importlib import import_module
from typing import Any

from segiou import errors, metrics, quality
from segiou._boundary import BoundaryWidth
from segiou._version import __version__
from segiou.confusion import ConfusionMatrix, ImageTable
from segiou.conventions import PRESETS, Convention, get_convention
from segiou.labels import LabelSpec, RawLabel, builtin_spec, load_spec
from segiou.metrics import (
    category_iou,
    cohen_kappa,
    dice,
    fbeta,
    fw_iou,
    iou,
    mean_accuracy,
    mean_iou,
    micro_iou,
    pixel_accuracy,
    precision,
    recall,
)
from segiou.results import Result, evaluate

__all__ = [
    "PRESETS",
    "BoundaryWidth",
    "ConfusionMatrix",
    "Convention",
    "ImageTable",
    "LabelSpec",
    "RawLabel",
    "Result",
    "__version__",
    "builtin_spec",
    "category_iou",
    "cohen_kappa",
    "dice",
    "errors",
    "evaluate",
    "fbeta",
    "fw_iou",
    "get_convention",
    "iou",
    "load_spec",
    "mean_accuracy",
    "mean_iou",
    "metrics",
    "micro_iou",
    "pixel_accuracy",
    "precision",
    "quality",
    "recall",
]

#: Submodules loaded on first access (``segiou.parallel``), and the older names of moved ones.
_LAZY = {
    "cli": "segiou.cli",
    "compare": "segiou.compare",
    "geometry": "segiou.geometry",
    "io": "segiou.io",
    "parallel": "segiou.parallel",
    "report": "segiou.report",
    "stats": "segiou.stats",
    "testing": "segiou.testing",
    "boxes": "segiou.geometry.boxes",
    "sets": "segiou.geometry.sets",
    "verdicts": "segiou.geometry.verdicts",
    "synthetic": "segiou.testing.synthetic",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return import_module(_LAZY[name])
    msg = f"module 'segiou' has no attribute {name!r}"
    close = difflib.get_close_matches(name, __dir__(), n=3, cutoff=0.6)
    if not close:  # a case slip (confusionmatrix), or a metric by another name (miou)
        folded = {n.lower().replace("_", ""): n for n in __dir__()}
        hit = folded.get(name.lower().replace("_", "")) or {"miou": "mean_iou"}.get(name.lower())
        close = [hit] if hit else []
    if close:
        msg += f"; did you mean {' or '.join(map(repr, close))}?"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted({*__all__, *_LAZY})
