"""Refuse work that cannot fit in memory before allocating anything, saying the sizes."""

from __future__ import annotations

import os
from pathlib import Path

from segiou.errors import ResourceError

__all__ = ["available_memory", "check_memory", "human_bytes"]

#: Requests this small are not checked (any machine segiou runs on has this much to spare).
_SURELY_FITS = 64 << 20


def available_memory() -> int:
    """Bytes of memory this machine can give now (``MemAvailable``; else its physical memory)."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):  # pragma: no cover - not a POSIX system
        return 1 << 62


def human_bytes(n: float) -> str:
    """``1.5 GiB``-style text for a byte count."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def check_memory(nbytes: int, what: str, hint: str) -> None:
    """Raise :class:`~segiou.errors.ResourceError` when ``nbytes`` exceed the available memory.

    Parameters
    ----------
    nbytes : int
        What the work would allocate (an estimate from its sizes, made before allocating).
    what : str
        The work, for the message (e.g. ``"an accumulator of 30,000 classes"``).
    hint : str
        What to do instead.

    Raises
    ------
    ResourceError
        ``nbytes`` is more than :func:`available_memory` (also a ``MemoryError``).
    """
    if nbytes <= _SURELY_FITS:  # not worth reading /proc: a per-batch check stays free
        return
    avail = available_memory()
    if nbytes > avail:
        msg = (
            f"{what} needs about {human_bytes(nbytes)} of memory, but this machine has "
            f"{human_bytes(avail)} available; nothing was allocated. {hint}"
        )
        raise ResourceError(msg)
