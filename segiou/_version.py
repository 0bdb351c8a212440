"""The installed version of segiou (written into every saved state and result)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("segiou")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"
