"""Data of the report tests: small states with hostile names, and version-2 documents.

A version-2 document here is the version-1 document of a real evaluation with the fields the
statistics half adds (``intervals``, ``slices``, per the contract) filled in by hand: they are
what the renderers are asked to show, not results the tests check.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from segiou import ConfusionMatrix, LabelSpec

#: Class and image names as a file may bring them: markup, quotes, Markdown, mathtext, controls.
HOSTILE_CLASSES = (
    "<script>alert(1)</script>",
    "a\"b'c & d",
    "$x^2$ _u_",
    "|pipe| *star* [l](http://example.invalid/x)",
    "tab\tnew\nline",
)
HOSTILE_IMAGES = ('"><img src=x onerror=alert(1)>', "<b>bold</b>", "plain_000", "plain_001",
                  "a|b", "#hash")  # fmt: skip


def hostile_spec() -> LabelSpec:
    return LabelSpec("evil <b>spec</b>", list(HOSTILE_CLASSES), ignore=[255],
                     categories=("<i>cat</i>", "plain"), class_categories=(0, 0, 1, 1, 1))  # fmt: skip


def make_state(
    spec: LabelSpec | int = 5, *, n: int = 6, shape: tuple[int, int] = (16, 24), seed: int = 0,
    names: list[str] | None = None,
) -> tuple[ConfusionMatrix, np.ndarray, np.ndarray]:  # fmt: skip
    """A per-image state of ``n`` random images (ignored corner, ~30% wrong, ~2% void)."""
    rng = np.random.default_rng(seed)
    s = spec if isinstance(spec, LabelSpec) else LabelSpec.from_num_classes(spec, ignore=[255])
    k = s.num_classes
    gt = rng.integers(0, k, size=(n, *shape)).astype(np.uint8)
    gt[:, :2, :2] = 255
    pred = gt.copy()
    wrong = rng.random(gt.shape) < 0.3
    pred[wrong] = rng.integers(0, k, size=int(wrong.sum()))
    pred[rng.random(gt.shape) < 0.02] = 255  # void where the ground truth is a class
    cm = ConfusionMatrix(s, per_image=True)
    cm.update(gt, pred, key="batch", names=names)
    return cm, gt, pred


def _around(x: float | None, w: float) -> list[float] | None:
    return None if x is None else [max(0.0, x - w), min(1.0, x + w)]


def v2_document(doc: dict[str, Any], *, slices: bool = True) -> dict[str, Any]:
    """The document as schema version 2, with intervals (and slices) filled in by hand."""
    d = copy.deepcopy(doc)
    d["version"] = 2
    d["intervals"] = {
        "method": "percentile bootstrap", "unit": "image", "resamples": 1000, "level": 0.95,
        "seed": 0,
        "summary": {k: _around(v, 0.03) for k, v in d["summary"].items()},
        "classes": {"iou": [_around(c["iou"], 0.05) for c in d["classes"]]},
        "categories": None if d["categories"] is None
        else {"iou": [_around(c["iou"], 0.04) for c in d["categories"]]},
    }  # fmt: skip
    if not slices:
        d["slices"] = None
        return d
    classes = [{"id": c["id"], "name": c["name"], "iou": c["iou"]} for c in d["classes"]]
    big = {"images": 412, "small": False, "summary": {"miou": 0.61, "fwiou": 0.7},
           "classes": classes, "intervals": {**d["intervals"], "summary": {"miou": [0.58, 0.64]},
                                             "categories": None}}  # fmt: skip
    small = {"images": 3, "small": True, "summary": {"miou": 0.42, "fwiou": None},
             "classes": [{**c, "iou": None} for c in classes], "intervals": None}  # fmt: skip
    d["slices"] = {
        "min_images": 30,
        "columns": {"city <x>": {"aachen": big, "<tiny>": small}},
        "unmatched": {"images_without_metadata": ["<no meta>", "x"],
                      "metadata_without_image": ["ghost|row"]},
    }  # fmt: skip
    return d
