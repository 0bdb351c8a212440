"""Overlap beside segmentation: bounding boxes, label sets, and match verdicts for one IoU.

Its own small house: :mod:`~segiou.geometry.boxes` (IoU, Dice, GIoU, DIoU, CIoU of boxes, with
Numba kernels in :mod:`~segiou.geometry._box_kernels`), :mod:`~segiou.geometry.sets` (Jaccard
and Dice of label sets and multi-label indicator matrices) and :mod:`~segiou.geometry.verdicts`
(VOC and COCO match thresholds). ``segiou.boxes``, ``segiou.sets`` and ``segiou.verdicts``
name the same modules.
"""

from __future__ import annotations

from segiou.geometry import boxes, sets, verdicts

__all__ = ["boxes", "sets", "verdicts"]
