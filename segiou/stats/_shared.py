"""Result reports of the images two runs share, for the fixed tolerances of a grown test set.

When the test set changed between a baseline run and a new one, whole-report scores move
without the model changing, so :func:`segiou.compare.compare_reports` cannot compare them; the
images both runs scored can still be compared with those tolerances. Each run's per-image
counts of the shared images (a format-2 state) are summed and scored as
:func:`segiou.evaluate` scores a run: two result reports of one ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from segiou._count import Tally
from segiou.confusion import ConfusionMatrix
from segiou.conventions import Convention
from segiou.images import ImageRows
from segiou.results import evaluate
from segiou.stats._bootstrap import features, image_rows
from segiou.stats._pairing import ROW_LABEL, align_images, check_pair, check_same_gt

__all__ = ["ImageSetChange", "SharedReports", "image_set_change", "shared_image_reports"]


@dataclass(frozen=True)
class SharedReports:
    """Both runs scored on the images they share.

    Attributes
    ----------
    baseline, current : dict
        Result reports (:meth:`segiou.Result.to_dict`) of each run's counts of the shared
        images: the same ground truth (checked image by image).
    images : dict
        ``shared`` (how many), ``baseline_only`` and ``current_only`` (how many images only
        one run scored), ``baseline_only_names`` and ``current_only_names`` (the first few).
    """

    baseline: dict[str, Any]
    current: dict[str, Any]
    images: dict[str, Any]


def _scored(
    source: ConfusionMatrix, rows: ImageRows, index: list[int], preset: str | Convention,
    beta: float | None,
) -> dict[str, Any]:  # fmt: skip
    """Score ``rows``' images ``index`` as ``source`` counts them: a result report."""
    t = rows.totals(index)
    cm = ConfusionMatrix(source.spec, gt_ids=source.gt_ids, pred_ids=source.pred_ids,
                         on_unexpected=source.on_unexpected)  # fmt: skip
    tally = Tally(dense=t["counts"], void=t["void"], n_ignored=t["ignored"],
                  unexpected_gt=t["unexpected_gt"], unexpected_pred=t["unexpected_pred"])  # fmt: skip
    cm.add_tally(tally, key=None, names=None, n_images=len(index))
    out: dict[str, Any] = evaluate(cm, preset=preset, beta=beta).to_dict()
    return out


def shared_image_reports(
    baseline: ConfusionMatrix,
    current: ConfusionMatrix,
    *,
    preset: str | Convention = "segiou",
    beta: float | None = None,
) -> SharedReports:
    """Score both runs on the images they share (paired by name), from their per-image counts.

    Parameters
    ----------
    baseline, current : ConfusionMatrix
        States with per-image entries (format 2), counted with the same label spec.
    preset : str or Convention, default "segiou"
        Averaging convention of both reports.
    beta : float, optional
        F-beta's beta (``mfbeta`` in the summary), as for :func:`segiou.evaluate`.

    Returns
    -------
    SharedReports
        Two reports to compare with :func:`segiou.compare.compare_reports` (on the same ground
        truth).

    Raises
    ------
    UsageError
        A state without per-image entries (or a version-1 state), images counted without a
        name, repeated names, no shared image, or a shared image whose ground truth differs
        between the runs (another annotation: no fixed tolerance compares such scores).
    IncompatibleMatrixError
        Different label specs.
    """
    check_pair(baseline, current)
    ra, rb = image_rows(baseline, "baseline state"), image_rows(current, "current state")
    bi, ci, info = align_images(ra, rb, shared_images=True)
    names = [ra.names[int(i)] for i in bi]
    check_same_gt(names, features(ra, baseline.spec).gt[bi], features(rb, current.spec).gt[ci],
                   baseline.spec.classes)  # fmt: skip
    images = {"shared": info["shared"], "baseline_only": info["baseline_only"],
              "current_only": info["candidate_only"],
              "baseline_only_names": info["baseline_only_names"],
              "current_only_names": info["candidate_only_names"]}  # fmt: skip
    return SharedReports(
        baseline=_scored(baseline, ra, bi.tolist(), preset, beta),
        current=_scored(current, rb, ci.tolist(), preset, beta),
        images=images,
    )


@dataclass(frozen=True)
class ImageSetChange:
    """How the images two runs scored differ (:func:`image_set_change`).

    Attributes
    ----------
    detail : str
        The difference in words: the image names only one run has (the first three of
        each), or, for the same names, the shared images whose ground truth differs (one of
        them with a class whose pixel count differs).
    shared : int
        Images both runs scored (by name).
    baseline_only, current_only : int
        Images only one run scored.
    """

    detail: str
    shared: int
    baseline_only: int
    current_only: int

    @property
    def edited(self) -> bool:
        """Whether the runs scored the same names, some with other ground truth."""
        return not (self.baseline_only or self.current_only)


def _named_rows(cm: ConfusionMatrix) -> ImageRows | None:
    """Return the per-image rows of ``cm`` if the gate can pair them by name; else ``None``.

    As :func:`align_images` pairs them: images labelled by their row (``#3``, counted with
    neither a name nor a key) or repeated names cannot be paired (the gate refuses them).
    """
    if not cm.per_image:
        return None
    rows = cm.images.rows
    if rows is None or len(set(rows.names)) != rows.n:
        return None
    if any(not g and ROW_LABEL.fullmatch(n) for n, g in zip(rows.names, rows.given, strict=True)):
        return None
    return rows


def _listed(names: list[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
    return f" ({shown})" if names else ""


def image_set_change(baseline: ConfusionMatrix, current: ConfusionMatrix) -> ImageSetChange | None:
    """Say how two runs' test sets differ, image by image; ``None``: the same images.

    Whole-report totals (:func:`segiou.compare.ground_truth_difference`: images, pixels,
    ground-truth pixels per class) miss a test set in which an image was replaced by another
    with as many pixels of each class, or in which images were renamed; under
    ``on_unexpected="count"`` the class totals need not even match (pixels left out give them
    slack). States with per-image rows name their images: another set of names, or the same
    names with other ground-truth pixels per image and code (classes, ignored, unexpected
    values), is another test set.

    Parameters
    ----------
    baseline, current : ConfusionMatrix
        The two runs, counted with the same label spec.

    Returns
    -------
    ImageSetChange or None
        The difference; ``None`` when both runs scored the same names with the same ground
        truth each, or when the runs' images cannot be paired by name as
        :func:`compare_states` pairs them (no per-image rows, images labelled by their row
        such as ``#3``, repeated names). A store's images without names are labelled by their
        index (``000003``), which pairs them by place. A version-1 state (TP/FP/FN rows) is
        compared by name only. An image replaced by another of the same name and as many
        pixels of each class cannot be told from it.

    Raises
    ------
    IncompatibleMatrixError
        Different label specs.
    """
    check_pair(baseline, current)
    ra, rb = _named_rows(baseline), _named_rows(current)
    if ra is None or rb is None:
        return None
    at = {n: j for j, n in enumerate(rb.names)}
    had = set(ra.names)
    only_base = [n for n in ra.names if n not in at]
    only_cur = [n for n in rb.names if n not in had]
    shared = ra.n - len(only_base)
    counts = {"shared": shared, "baseline_only": len(only_base), "current_only": len(only_cur)}
    if only_base or only_cur:
        detail = (
            f"image names: {len(only_base)} only in the baseline{_listed(only_base)}, "
            f"{len(only_cur)} only now{_listed(only_cur)}, {shared} shared"
        )
        return ImageSetChange(detail, **counts)
    if ra.legacy is not None or rb.legacy is not None or not ra.n:
        return None  # (version-1 rows hold no ground truth per image and code)
    ga = features(ra, baseline.spec).gt
    gb = features(rb, current.spec).gt[[at[n] for n in ra.names]]
    differ = np.flatnonzero((ga != gb).any(axis=1))
    if not differ.size:
        return None
    i = int(differ[0])
    c = int(np.flatnonzero(ga[i] != gb[i])[0])
    label = [*baseline.spec.classes, "ignored", "unexpected"][c]
    detail = (
        f"ground truth of {differ.size} image(s) of the same name, e.g. {ra.names[i]!r}: "
        f"{int(gb[i, c]):,} pixels of {label!r} now, {int(ga[i, c]):,} in the baseline"
    )
    return ImageSetChange(detail, **counts)
