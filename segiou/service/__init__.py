"""``segiou serve``: a durable, exactly-once metrics service (install ``segiou[service]``).

* :mod:`segiou.service.wire`: bodies, names and the batch digest (shared with
  :mod:`segiou.client`; no web framework);
* :mod:`segiou.service.storage`: the storage interface and its SQLite implementation;
* :mod:`segiou.service.app`: the FastAPI app; :mod:`segiou.service.server`: start it.

This package imports nothing heavy itself: the client imports :mod:`segiou.service.wire`
without FastAPI or uvicorn.
"""

from __future__ import annotations

__all__: list[str] = []
