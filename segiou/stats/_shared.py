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

from segiou._count import Tally
from segiou.confusion import ConfusionMatrix
from segiou.conventions import Convention
from segiou.images import ImageRows
from segiou.results import evaluate
from segiou.stats._bootstrap import features, image_rows
from segiou.stats._pairing import align_images, check_pair, check_same_gt

__all__ = ["SharedReports", "shared_image_reports"]


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
    tally = Tally(counts=t["counts"], void=t["void"], n_ignored=t["ignored"],
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
