"""Type aliases shared across segiou."""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import numpy.typing as npt

#: A label mask: any integer (or bool) array.
LabelArray: TypeAlias = npt.NDArray[np.integer] | npt.NDArray[np.bool_]
#: An ``int64`` array of counts.
IntArray: TypeAlias = npt.NDArray[np.int64]
#: A ``K x K`` ``int64`` confusion matrix, ``cm[gt, pred]``.
CountMatrix: TypeAlias = npt.NDArray[np.int64]
#: A ``float64`` array of per-class scores.
FloatArray: TypeAlias = npt.NDArray[np.float64]
