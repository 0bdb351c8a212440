"""Masks as numpy arrays: what ``update`` and the counters accept, read without a copy.

numpy arrays as they are; subclasses (``np.matrix``, ``np.memmap``) viewed as plain arrays; a
masked array refused (its mask would be lost); PyTorch CPU tensors and other DLPack objects
through ``np.from_dlpack``, anything else through ``__array__``; device arrays refused. Labels
are integers or bool, in native byte order (big-endian masks are copied).
"""

from __future__ import annotations

import numpy as np

from segiou._typing import LabelArray
from segiou.errors import LabelDeviceError, LabelDtypeError

__all__ = ["as_labels", "native", "to_numpy"]


#: DLPack device types whose memory the CPU reads: kDLCPU, kDLCUDAHost (pinned), kDLROCMHost.
_HOST_DEVICES = (1, 3, 11)


def to_numpy(a: object, name: str, where: str) -> np.ndarray:
    """Return ``a`` as a numpy array without a copy: numpy arrays, DLPack and ``__array__``.

    PyTorch CPU tensors (and JAX, CuPy host arrays, ...) are read through DLPack
    (``np.from_dlpack``), sharing their memory; other objects through ``__array__``. An array on
    a device (a CUDA tensor) is refused: counting happens on the CPU.

    Parameters
    ----------
    a : object
        The masks.
    name : str
        ``"gt"`` or ``"pred"``, for messages.
    where : str
        The batch, for messages.

    Returns
    -------
    numpy.ndarray

    Raises
    ------
    LabelDeviceError
        ``a`` lives in device memory (e.g. a CUDA tensor), cannot be read as an array, or is a
        numpy masked array (its mask would be lost).

    Notes
    -----
    A subclass of ``numpy.ndarray`` (``numpy.matrix``, ``numpy.memmap``) is viewed as a plain
    array: the kernels count plain arrays, and a ``matrix`` stays 2-D whatever is done to it.
    """
    if type(a) is np.ndarray:
        return a
    if isinstance(a, np.ma.MaskedArray):
        msg = (
            f"{where}: {name} is a numpy masked array; segiou would count the masked pixels "
            f"as the values under the mask. Fill them with an ignored label first (e.g. "
            f"{name}.filled(255) when 255 is ignored), or pass {name}.data to count every pixel"
        )
        raise LabelDeviceError(msg)
    if isinstance(a, np.ndarray):
        return a.view(np.ndarray)
    device = getattr(a, "__dlpack_device__", None)
    if device is not None:
        kind = int(device()[0])
        if kind not in _HOST_DEVICES:
            where_ = getattr(a, "device", f"DLPack device type {kind}")
            msg = (
                f"{where}: {name} is on {where_}, but segiou counts on the CPU; pass "
                f"{name}.cpu() (for a PyTorch tensor; it copies the masks to host memory)"
            )
            raise LabelDeviceError(msg)
        try:
            return np.from_dlpack(a)  # type: ignore[arg-type]
        except (TypeError, BufferError, RuntimeError, ValueError):
            pass  # e.g. a tensor that requires grad, or a dtype DLPack cannot carry
    try:
        return np.asarray(a)
    except (TypeError, RuntimeError, ValueError) as err:
        msg = (
            f"{where}: {name} ({type(a).__name__}) cannot be read as an array ({err}); pass a "
            f"numpy array, or for a PyTorch tensor {name}.detach().cpu()"
        )
        raise LabelDeviceError(msg) from err


def as_labels(a: object, name: str, where: str) -> LabelArray:
    """Return ``a`` as an integer array a kernel accepts.

    Bool is viewed as uint8 (no copy). Integers in native byte order are returned as they are
    (no copy); big-endian (non-native) integers, for example ``>u2`` from a file or a store,
    are converted to native byte order, which copies them.

    Raises
    ------
    LabelDtypeError
        ``a`` does not hold integer or bool labels.
    """
    arr = to_numpy(a, name, where)
    if arr.dtype == np.bool_:
        return arr.view(np.uint8)
    if arr.dtype.kind not in "iu":
        msg = (
            f"{where}: {name} has dtype {arr.dtype}, expected integer labels (uint8, uint16, "
            f"int16, int32, int64 or bool); convert with {name}.astype(np.int32) only if the "
            "values are whole class ids"
        )
        raise LabelDtypeError(msg)
    return native(arr)


def native(a: LabelArray) -> LabelArray:
    """Return ``a`` in native byte order (a copy only for non-native, e.g. big-endian, data)."""
    if a.dtype.isnative:
        return a
    out: LabelArray = a.astype(a.dtype.newbyteorder("="))  # type: ignore[assignment]
    return out
