"""Exceptions raised by segiou: every class lives here.

Every deliberate error subclasses :class:`SegiouError` *and* the fitting builtin exception, so
callers can catch either ``segiou.errors.SegiouError`` or, for example, ``ValueError``. The
command line turns each into exit code 2 and its message (no traceback).
"""

from __future__ import annotations

__all__ = [
    "BoxError",
    "CheckpointError",
    "ChunkError",
    "ClusterError",
    "ConflictError",
    "CountDtypeError",
    "CountMatrixError",
    "CountOverflowError",
    "DuplicateBatchError",
    "DuplicateImageError",
    "ImageDecodeError",
    "IncompatibleMatrixError",
    "IndicatorMatrixError",
    "InstanceIdError",
    "InternalError",
    "LabelDeviceError",
    "LabelDtypeError",
    "LabelRangeError",
    "LabelSetError",
    "LabelSpecError",
    "LossyMaskWarning",
    "MaskNotFoundError",
    "MissingChunkError",
    "NamingError",
    "NotAStateError",
    "NotFoundError",
    "OutputError",
    "PayloadError",
    "RefusedError",
    "ResourceError",
    "ResultDocumentError",
    "ScoresError",
    "SegiouError",
    "SegiouWarning",
    "ServiceStorageError",
    "ServiceUnavailableError",
    "SetOptionError",
    "ShapeMismatchError",
    "StoreExistsError",
    "StoreLayoutError",
    "UnknownNameError",
    "UsageError",
    "VerdictError",
]


class SegiouError(Exception):
    """Base class of every error segiou raises on purpose."""


class LabelRangeError(SegiouError, ValueError):
    """A mask holds label values that are neither an evaluated class nor ignored."""


class InstanceIdError(SegiouError, ValueError):
    """An instance id names a label the spec does not know, or a class without an instance size."""


class ScoresError(SegiouError, ValueError):
    """Class scores that cannot be read as predictions (NaN, an unknown encoding)."""


class LabelDeviceError(SegiouError, TypeError):
    """Masks in device memory (a CUDA tensor), or an object that cannot be read as an array."""


class LabelDtypeError(SegiouError, TypeError):
    """A mask does not hold integer (or bool) labels."""


class ShapeMismatchError(SegiouError, ValueError):
    """Ground truth and prediction (or two stores) do not have the same shape."""


class DuplicateBatchError(SegiouError, ValueError):
    """A batch key was counted before: a batch is never counted twice."""


class DuplicateImageError(DuplicateBatchError):
    """An image name was counted before (or on both sides of a merge, with other counts)."""


class CountOverflowError(SegiouError, OverflowError):
    """A count would pass 2**63 - 1, the largest exact count; nothing was added."""


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


class SegiouWarning(UserWarning):
    """Something segiou counted may not mean what it seems (the command line prints it)."""


class LossyMaskWarning(SegiouWarning):
    """Label masks in a lossy image format (JPEG): compression changed some labels."""


class UnknownNameError(SegiouError, KeyError):
    """A name (preset, built-in spec, ...) is not one segiou knows; the message lists them."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class CountMatrixError(SegiouError, ValueError):
    """A count matrix (or its void counts) has the wrong shape, or a negative count."""


class CountDtypeError(CountMatrixError, TypeError):
    """A count matrix does not hold integer counts."""


class NotAStateError(SegiouError, TypeError):
    """An object that is not a segiou accumulator was given where one is needed."""


class OutputError(SegiouError, OSError):
    """An output file cannot be written (a full disk, a permission); nothing was changed."""


class InternalError(SegiouError, RuntimeError):
    """Two of segiou's own computations disagree: a bug in segiou (the message says what)."""


class ResourceError(SegiouError, MemoryError):
    """What was asked for would not fit in this machine's memory; refused before allocating."""


class ResultDocumentError(SegiouError, ValueError):
    """A result document (``segiou.result`` JSON) or report input is unreadable or malformed."""


# -- storage ------------------------------------------------------------------------------------
class ClusterError(SegiouError, ConnectionError):
    """A ``dask.distributed`` cluster lost every worker, or kept losing them, during a count."""


class ChunkError(SegiouError, OSError):
    """A chunk is missing (where that is not allowed) or cannot be decoded."""


class MissingChunkError(ChunkError):
    """A chunk is missing from a store where every chunk must have been written."""


class ImageDecodeError(SegiouError, ValueError):
    """A label image cannot be decoded to a 2-D integer mask (format, mode, colour)."""


class NamingError(StoreLayoutError):
    """Image names cannot be derived from file names (no match, empty or duplicate names)."""


class StoreExistsError(SegiouError, FileExistsError):
    """The output store exists and may not be replaced."""


# -- geometry (boxes, label sets, verdicts) -----------------------------------------------------
class BoxError(SegiouError, ValueError):
    """Boxes are malformed (shape, dtype, non-finite or inverted coordinates) or an option is."""


class LabelSetError(SegiouError, TypeError):
    """A label collection is a bare string, not iterable, or holds an unhashable label."""


class SetOptionError(SegiouError, ValueError):
    """An option (``average``, ``empty``) has an invalid value."""


class IndicatorMatrixError(SegiouError, ValueError):
    """A multi-label indicator matrix is not 2-D or holds values other than 0 and 1."""


class VerdictError(SegiouError, ValueError):
    """An IoU or a threshold is not a number in [0, 1]."""


# -- service (segiou serve) and its client --------------------------------------------------------
class PayloadError(SegiouError, ValueError):
    """A request body cannot be read: malformed JSON or npz, too large, or of a wrong type.

    ``status`` is the HTTP status the service replies with (400, 413 or 415).
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NotFoundError(SegiouError, LookupError):
    """A run (or another resource of the service) does not exist: HTTP 404."""


class ConflictError(SegiouError, ValueError):
    """A request conflicts with what the service holds: HTTP 409.

    For example a batch key with other content, an image counted under another key, a closed
    run, or a run of that name with other settings.
    """


class ServiceStorageError(SegiouError, OSError):
    """The service's database is corrupt, truncated, or of a schema this segiou does not read."""


class RefusedError(SegiouError, ValueError):
    """The service refused a request (an HTTP 4xx reply); nothing of it was stored.

    Also raised, as retrying cannot help, when something other than segiou's server answered
    (a redirect: ``error`` ``"Redirect"``; a 2xx reply that is not segiou's JSON:
    ``"UnreadableReply"``), and for a partial state the streaming evaluator could not send
    (``status`` 0, ``error`` the name of the exception): check, then put it again.

    Attributes ``status`` (the HTTP status), ``error`` (the server's error class name) and
    ``message`` (the server's message).
    """

    def __init__(self, message: str, *, status: int, error: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message


class ServiceUnavailableError(SegiouError, ConnectionError):
    """The service could not be reached, or kept failing (5xx), after every retry."""
