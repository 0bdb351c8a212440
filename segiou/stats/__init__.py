"""Uncertainty, slices and the comparison gate: statistics of per-image counts. No counting.

* :func:`bootstrap` and :func:`evaluate_with_intervals`: image-level (or group-level)
  percentile bootstrap of every metric. Each resample is exact: the sum of the resampled
  images' confusion entries. Vectorised: resample weights times per-image sums.
* :func:`read_metadata` and :func:`slice_results`: every metric per metadata value.
* :func:`compare_states`: the comparison gate between a baseline and a candidate run: a paired
  randomization (swap) test decides, paired bootstrap intervals show the differences.
* :func:`shared_image_reports`: both runs scored on the images they share (result reports of
  one ground truth, for :func:`segiou.compare.compare_reports` after the test set changed);
  :func:`image_set_change`: how two runs' images differ (names, ground truth per image).

Everything here needs the per-image confusion entries of a state (``per_image=True``,
format 2), which :func:`segiou.parallel.count_stores` and ``segiou eval --state`` keep.
"""

from __future__ import annotations

from segiou.stats._bootstrap import (
    Bootstrap,
    Features,
    bootstrap,
    features,
    metric_replicates,
    percentile_interval,
    resample_weights,
)
from segiou.stats._evaluate import evaluate_with_intervals
from segiou.stats._paired import (
    COMPARISON_FORMAT,
    COMPARISON_VERSION,
    PairedComparison,
    compare_states,
    holm,
    two_sided_p,
)
from segiou.stats._shared import (
    ImageSetChange,
    SharedReports,
    image_set_change,
    shared_image_reports,
)
from segiou.stats._slices import Metadata, read_metadata, slice_results

__all__ = [
    "COMPARISON_FORMAT",
    "COMPARISON_VERSION",
    "Bootstrap",
    "Features",
    "ImageSetChange",
    "Metadata",
    "PairedComparison",
    "SharedReports",
    "bootstrap",
    "compare_states",
    "evaluate_with_intervals",
    "features",
    "holm",
    "image_set_change",
    "metric_replicates",
    "percentile_interval",
    "read_metadata",
    "resample_weights",
    "shared_image_reports",
    "slice_results",
    "two_sided_p",
]
