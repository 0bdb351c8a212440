"""Start ``segiou serve``: check the address and token, open the database, run uvicorn."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import socket
import sys
from pathlib import Path

from segiou.errors import UsageError

__all__ = [
    "DB_NAME",
    "MIN_TOKEN_CHARS",
    "TOKEN_ENV",
    "check_bind",
    "is_loopback",
    "read_token",
    "serve",
]

#: The database file inside the data folder.
DB_NAME = "segiou.db"
#: Environment variable that may hold the bearer token.
TOKEN_ENV = "SEGIOU_TOKEN"
#: Shortest token accepted.
MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """Return whether ``host`` names only loopback addresses (``127.0.0.0/8``, ``::1``).

    Parameters
    ----------
    host : str
        An IP address or a host name (resolved: every address must be loopback).

    Returns
    -------
    bool

    Examples
    --------
    >>> is_loopback("127.0.0.1"), is_loopback("0.0.0.0"), is_loopback("::1")
    (True, False, True)
    """
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addrs = {str(i[4][0]).split("%")[0] for i in infos}
    return bool(addrs) and all(ipaddress.ip_address(a).is_loopback for a in addrs)


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve on a non-loopback address without a token.

    Parameters
    ----------
    host : str
        The address to bind.
    token : str or None
        The bearer token, if any.

    Raises
    ------
    UsageError
        ``host`` is not loopback and there is no token.
    """
    if token is None and not is_loopback(host):
        msg = (
            f"--host {host} is not a loopback address, and no token is set: anyone who can "
            "reach this machine could read, change and delete every run. Set a token "
            f"(--token-file FILE or the {TOKEN_ENV} environment variable), or serve on "
            "127.0.0.1 (the default)"
        )
        raise UsageError(msg)


def read_token(token_file: str | Path | None) -> str | None:
    """Return the token from ``token_file``, else from ``SEGIOU_TOKEN``, else ``None``.

    Parameters
    ----------
    token_file : str or Path, optional
        A file holding the token (surrounding white space is stripped).

    Returns
    -------
    str or None

    Raises
    ------
    UsageError
        The file cannot be read, or the token is shorter than 16 characters or holds white
        space, control or non-ASCII characters.
    """
    if token_file is not None:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            msg = f"--token-file {str(token_file)!r} cannot be read: {err}"
            raise UsageError(msg) from err
        where = f"the token in {str(token_file)!r}"
    elif os.environ.get(TOKEN_ENV):
        token, where = os.environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return None
    if (len(token) < MIN_TOKEN_CHARS or not token.isascii() or not token.isprintable()
            or any(c.isspace() for c in token)):  # (HTTP headers travel as latin-1)  # fmt: skip
        msg = (
            f"{where} must be at least {MIN_TOKEN_CHARS} printable ASCII characters without "
            "spaces; "
            'make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
        raise UsageError(msg)
    return token


#: The lock file a server holds in its data folder while it runs.
LOCK_NAME = "segiou.lock"


def hold_folder(folder: Path) -> object:
    """Take the data folder for this process; return the open lock file (keep it open).

    Two servers on one folder would each keep their own index of the runs and batches: one
    serves stale results, refuses new batches with "retry" forever, and can write over a run's
    row (its acknowledged batches then vanish from the report). An exclusive ``flock`` on
    ``<data>/segiou.lock`` refuses the second; the system releases it when the process ends,
    however it ends (kill -9 included). Where ``fcntl`` is missing (Windows) nothing is held.

    Raises
    ------
    UsageError
        Another process holds the folder (its pid is named when it wrote it).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    f = (folder / LOCK_NAME).open("a+", encoding="utf-8")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        f.seek(0)
        pid = f.read().strip()
        f.close()
        who = f"pid {pid}" if pid.isdigit() else "another process"
        msg = (
            f"the data folder {str(folder)!r} is in use by another segiou serve ({who}); two "
            "servers on one folder would lose batches from each other's reports. Stop it "
            "first, or give another --data"
        )
        raise UsageError(msg) from err
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host.strip("[]")).version == 6 else (
            socket.AF_INET)  # fmt: skip
    except ValueError:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as err:
        sock.close()
        msg = f"cannot listen on {host}:{port}: {err.strerror or err}; choose another --port"
        raise UsageError(msg) from err
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _warm_up() -> None:
    """Load the counting kernels (from Numba's cache) now, not during the first batch."""
    import numpy as np

    from segiou.confusion import ConfusionMatrix

    for shape in ((1, 8, 8), (1, 1024, 1024)):  # the small path, and the 8-bit word path
        g = np.zeros(shape, np.uint8)
        ConfusionMatrix(2, per_image=True).update(g, g)


def serve(
    data: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8787,
    token: str | None = None,
    max_body_mb: float = 256,
    workers: int = 4,
) -> None:
    """Run the server until it is stopped (SIGINT or SIGTERM).

    Parameters
    ----------
    data : str or Path
        Data folder (created if missing); the database is ``<data>/segiou.db``.
    host : str, default "127.0.0.1"
        Address to listen on; a non-loopback one needs ``token``.
    port : int, default 8787
        Port (0: any free port; the start-up line names it).
    token : str, optional
        Bearer token every request must carry (``/healthz`` and the API docs excepted).
    max_body_mb : float, default 256
        Largest request body, in MiB (413 beyond).
    workers : int, default 4
        Threads that read and count large bodies and render results.

    Raises
    ------
    UsageError
        A non-loopback ``host`` without a token, an address that cannot be bound, a data
        folder another server holds, or the ``service`` extra is not installed.
    ServiceStorageError
        The database is corrupt, truncated or of another schema (it is left as it is).
    """
    try:
        import uvicorn

        from segiou.service._ledger import Ledger
        from segiou.service._metrics import Metrics
        from segiou.service.app import LOGGER, create_app
    except ImportError as err:
        msg = f"segiou serve needs the service extra: pip install 'segiou[service]' ({err})"
        raise UsageError(msg) from err
    from segiou.service.storage import SQLiteStorage

    check_bind(host, token)
    folder = Path(data)
    folder.mkdir(parents=True, exist_ok=True)
    held = hold_folder(folder)  # noqa: F841 -- held open until the server stops
    storage = SQLiteStorage(folder / DB_NAME)  # a damaged database is refused before anything
    _warm_up()
    metrics_box: list[Metrics] = []
    ledger = Ledger(storage, on_batch=lambda o, px: metrics_box[0].batch(o, px),
                    on_commit=lambda n, s: metrics_box[0].commit(n, s))  # fmt: skip
    metrics = Metrics(ledger.open_runs)
    metrics_box.append(metrics)
    max_body = int(max_body_mb * (1 << 20))
    app = create_app(ledger, metrics=metrics, token=token, max_body=max_body, workers=workers)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    LOGGER.handlers[:] = [handler]
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    LOGGER.info(json.dumps({
        "event": "started", "url": f"http://{shown}:{bound}", "data": str(folder),
        "runs": len(ledger.runs), "token": token is not None, "max_body": max_body}))  # fmt: skip
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_keep_alive=30, limit_concurrency=1024)  # fmt: skip
    uvicorn.Server(config).run(sockets=[sock])
