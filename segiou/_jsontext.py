"""Parse JSON text that comes from outside (a request body, a server's reply, a file).

:func:`json.loads` raises :class:`RecursionError`, not :class:`ValueError`, on arrays or objects
nested deeper than Python's parser goes (about a thousand levels: ``"[" * 10000`` is 10 KB):
every caller that names what it reads by catching ``ValueError`` then showed a traceback, and
the service answered 500 ("a bug in segiou"), which clients retry. :func:`loads` raises a
``ValueError`` with :data:`TOO_DEEP` instead.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TOO_DEEP", "loads"]

#: What a document nested too deeply is told (no segiou document nests more than a few levels).
TOO_DEEP = (
    "nested too deeply: arrays or objects inside one another hundreds of levels deep, where a "
    "segiou document nests a few"
)


def loads(text: str | bytes | bytearray) -> Any:
    """Return :func:`json.loads` of ``text``; nesting too deep to parse is a ``ValueError``.

    Parameters
    ----------
    text : str, bytes or bytearray
        The JSON text (bytes as UTF-8, -16 or -32, as :func:`json.loads` reads them).

    Returns
    -------
    Any
        The parsed value.

    Raises
    ------
    ValueError
        Not JSON (:class:`json.JSONDecodeError`, or :class:`UnicodeDecodeError` for bytes), or
        nested too deeply to parse (the message is :data:`TOO_DEEP`).
    """
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
