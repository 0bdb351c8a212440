"""A client of ``segiou serve``, and a streaming evaluator for training and evaluation loops.

Light: the standard library's ``http.client``, numpy and segiou's core (no web framework).
Every batch travels under a key, so every request may be retried: connection errors and 5xx
replies (503 included) are retried with exponential backoff and jitter; a 4xx reply raises
:class:`~segiou.errors.RefusedError` with the server's message (nothing was stored).

Examples
--------
>>> from segiou.client import Client
>>> client = Client("http://127.0.0.1:8787")  # connects on the first request
>>> client.url
'http://127.0.0.1:8787'
"""

from __future__ import annotations

from segiou.client._http import Client, result_from_dict
from segiou.client._stream import StreamingEvaluator

__all__ = ["Client", "StreamingEvaluator", "result_from_dict"]
