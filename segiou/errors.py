"""Exceptions raised by segiou.

Every deliberate error subclasses :class:`SegiouError` *and* the fitting builtin exception, so
callers can catch either ``segiou.errors.SegiouError`` or, for example, ``ValueError``.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "DuplicateBatchError",
    "IncompatibleMatrixError",
    "LabelDtypeError",
    "LabelRangeError",
    "LabelSpecError",
    "MaskNotFoundError",
    "SegiouError",
    "ShapeMismatchError",
    "StoreLayoutError",
    "UsageError",
]


class SegiouError(Exception):
    """Base class of every error segiou raises on purpose."""


class LabelRangeError(SegiouError, ValueError):
    """A mask holds label values that are neither an evaluated class nor ignored."""


class LabelDtypeError(SegiouError, TypeError):
    """A mask does not hold integer (or bool) labels."""


class ShapeMismatchError(SegiouError, ValueError):
    """Ground truth and prediction (or two stores) do not have the same shape."""


class DuplicateBatchError(SegiouError, ValueError):
    """A batch key was counted before: a batch is never counted twice."""


class IncompatibleMatrixError(SegiouError, ValueError):
    """Two accumulators with different classes, label specs or policies cannot be merged."""


class CheckpointError(SegiouError, ValueError):
    """A saved state is unreadable, of an unknown format or version, or inconsistent."""


class LabelSpecError(SegiouError, ValueError):
    """A label specification is invalid (duplicate ids, unknown category, ...)."""


class MaskNotFoundError(SegiouError, FileNotFoundError):
    """A mask, image or array that should exist is missing."""


class StoreLayoutError(SegiouError, ValueError):
    """A store does not have the documented layout (arrays, attributes, dtypes)."""


class UsageError(SegiouError, ValueError):
    """An option or argument has a value segiou does not understand."""
