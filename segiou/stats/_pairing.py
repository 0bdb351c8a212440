"""Pairing two runs for the comparison gate: same label spec, images by name, same ground truth.

Used by :func:`segiou.stats.compare_states` (the paired test) and
:func:`segiou.stats.shared_image_reports` (both runs scored on the images they share).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from segiou._batch import same_counting
from segiou._typing import IntArray
from segiou.confusion import ConfusionMatrix
from segiou.errors import IncompatibleMatrixError, UsageError
from segiou.images import ImageRows

__all__ = ["align_images", "check_pair", "check_same_gt"]

#: Image names listed (then "and N more") where the image sets differ.
_LISTED = 20
#: The label of an image counted with neither a name nor a key (its row): ``#0``, ``#1``, ...
ROW_LABEL = re.compile(r"#[0-9]+")


def check_pair(base: ConfusionMatrix, cand: ConfusionMatrix) -> None:
    """Refuse two runs counted with different label specs (ignore values compared as a set).

    Parameters
    ----------
    base, cand : ConfusionMatrix
        The two runs.

    Raises
    ------
    IncompatibleMatrixError
        The specs differ (the message names what differs).
    """
    # ignore values act as a set: specs that differ only in their order count alike
    if same_counting(base.spec.to_dict()) != same_counting(cand.spec.to_dict()):
        a, b = base.spec, cand.spec
        diffs = [f"{f}: {getattr(a, f)!r:.80} vs {getattr(b, f)!r:.80}"
                 for f in ("name", "classes", "ignore", "categories", "raw")
                 if (getattr(a, f) != getattr(b, f) if f != "ignore"
                     else set(a.ignore) != set(b.ignore))]  # fmt: skip
        msg = (
            f"cannot compare runs with different label specs ({a.num_classes} classes "
            f"{a.name!r} vs {b.num_classes} classes {b.name!r}); differences: "
            + "; ".join(diffs or ["colours or category membership"])
        )
        raise IncompatibleMatrixError(msg)


def align_images(
    base: ImageRows, cand: ImageRows, shared_images: bool
) -> tuple[IntArray, IntArray, dict[str, Any]]:
    """Pair the two runs' images by name, in name order.

    Parameters
    ----------
    base, cand : ImageRows
        Each run's per-image rows.
    shared_images : bool
        Pair the images both runs have; ``False``: refuse different image sets.

    Returns
    -------
    base_index, cand_index : ndarray of int64
        The rows of each shared image in each run.
    info : dict
        ``shared``, ``baseline_only``, ``candidate_only`` (counts) and
        ``baseline_only_names``, ``candidate_only_names`` (the first 20).

    Raises
    ------
    UsageError
        Images counted without a name (labelled by their row), repeated names, different
        image sets without ``shared_images``, or no shared image.
    """
    base_names, cand_names = base.names, cand.names
    for who, rows in (("baseline", base), ("candidate", cand)):
        # a row label (#0, #1, ...: an image counted with neither a name nor a key) says where
        # the image arrived, not which image it is: pairing two runs by it pairs whatever came
        # in at the same place (threads, workers and shards change that order)
        unnamed = [n for n, g in zip(rows.names, rows.given, strict=True)
                   if not g and ROW_LABEL.fullmatch(n)]  # fmt: skip
        if unnamed:
            msg = (
                f"the {who} holds {len(unnamed)} image(s) counted without a name or a batch key "
                f"(labelled by their row: {unnamed[:3]}); images are paired by name, and a row "
                "label does not say which image it is: count with names= (or a key per batch), "
                "or evaluate stores, whose images are named"
            )
            raise UsageError(msg)
    for who, names in (("baseline", base_names), ("candidate", cand_names)):
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})[:3]
            msg = (
                f"the {who} repeats image names {dup} (labels of merged keyless updates); "
                "images are paired by name: count with names="
            )
            raise UsageError(msg)
    where = {n: j for j, n in enumerate(cand_names)}
    in_base = set(base_names)
    only_base = [n for n in base_names if n not in where]
    only_cand = [n for n in cand_names if n not in in_base]
    shared = sorted(n for n in base_names if n in where)  # (name order: arrival order of the
    if (only_base or only_cand) and not shared_images:  # batches must not move the resamples)
        msg = (
            f"the runs scored different images: {len(only_base)} only in the baseline "
            f"(e.g. {only_base[:3]}), {len(only_cand)} only in the candidate (e.g. "
            f"{only_cand[:3]}); {len(shared)} are shared. Compare the same images, or pass "
            "--shared-images (shared_images=True) to compare on the shared ones"
        )
        raise UsageError(msg)
    if not shared:
        msg = "the runs share no image name; nothing to compare (are the names the same?)"
        raise UsageError(msg)
    at = {n: j for j, n in enumerate(base_names)}
    bi = np.fromiter((at[n] for n in shared), dtype=np.int64, count=len(shared))
    ci = np.fromiter((where[n] for n in shared), dtype=np.int64, count=len(shared))
    info = {
        "shared": len(shared),
        "baseline_only": len(only_base),
        "candidate_only": len(only_cand),
        "baseline_only_names": only_base[:_LISTED],
        "candidate_only_names": only_cand[:_LISTED],
    }
    return bi, ci, info


def check_same_gt(
    names: Sequence[str], gt_a: IntArray, gt_b: IntArray, spec_classes: Sequence[str]
) -> None:
    """Refuse pairs whose ground truth differs: a paired test needs the same ground truth.

    Parameters
    ----------
    names : sequence of str
        The shared images, in the order of the rows below.
    gt_a, gt_b : ndarray of int64, shape (n, K + 2)
        Each run's ground-truth pixels per image and code (:class:`Features` ``gt``).
    spec_classes : sequence of str
        The class names, for the message.

    Raises
    ------
    UsageError
        Some shared image has other ground truth in the two runs (the message names one).
    """
    differ = np.flatnonzero((gt_a != gt_b).any(axis=1))
    if differ.size == 0:
        return
    i = int(differ[0])
    c = int(np.flatnonzero(gt_a[i] != gt_b[i])[0])
    labels = [*spec_classes, "ignored", "unexpected"]
    msg = (
        f"{differ.size} shared image(s) have different ground truth in the two runs, e.g. "
        f"{names[i]!r}: {int(gt_a[i, c]):,} vs {int(gt_b[i, c]):,} ground-truth pixels of "
        f"{labels[c]!r}; a paired comparison needs both runs scored against the same ground "
        "truth (and the same ignore values)"
    )
    raise UsageError(msg)
