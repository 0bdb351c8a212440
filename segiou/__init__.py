"""segiou: trustworthy, fast IoU evaluation for semantic segmentation.

``import segiou`` is light: it loads numpy, numba and the core (counting, metrics, label specs).
Storage adapters, the Dask engine, the CLI and box/set IoU load on first use.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from segiou import errors, metrics
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

try:
    __version__ = version("segiou")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "PRESETS",
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
    "recall",
]

_LAZY = {
    "boxes": "segiou.boxes",
    "sets": "segiou.sets",
    "verdicts": "segiou.verdicts",
    "synthetic": "segiou.synthetic",
    "parallel": "segiou.parallel",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return import_module(_LAZY[name])
    msg = f"module 'segiou' has no attribute {name!r}"
    raise AttributeError(msg)
