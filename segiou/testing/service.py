"""Run ``segiou serve`` as a real process on a loopback port, for tests and benchmarks.

:class:`ServerProcess` starts ``python -m segiou serve`` on ``127.0.0.1`` (a free port the
server picks, kept across restarts), waits until ``/healthz`` answers, and stops it (SIGTERM)
or kills it (SIGKILL). The server's log lines go to ``<data>/server.log``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self

__all__ = ["ServerProcess"]


class ServerProcess:
    """A ``segiou serve`` subprocess on 127.0.0.1.

    Parameters
    ----------
    data : str or Path
        The data folder (kept across restarts).
    token_file : str or Path, optional
        Passed as ``--token-file``.
    max_body_mb : float, optional
        Passed as ``--max-body-mb``.
    env : mapping, optional
        Extra environment variables of the process (e.g. a fault-injection hook).
    args : sequence of str
        More command-line arguments.
    """

    def __init__(
        self,
        data: str | Path,
        *,
        token_file: str | Path | None = None,
        max_body_mb: float | None = None,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> None:
        self.data = Path(data)
        self.port = 0
        self.url = ""
        self.env = dict(env or {})
        self.args = list(args)
        if token_file is not None:
            self.args += ["--token-file", str(token_file)]
        if max_body_mb is not None:
            self.args += ["--max-body-mb", str(max_body_mb)]
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.data / "server.log"

    def command(self) -> list[str]:
        """Return the command line that starts the server."""
        return [sys.executable, "-m", "segiou", "serve", "--data", str(self.data),
                "--host", "127.0.0.1", "--port", str(self.port), *self.args]  # fmt: skip

    def start(self, timeout: float = 120.0, env: dict[str, str] | None = None) -> Self:
        """Start the server and wait until it answers ``/healthz``.

        Parameters
        ----------
        timeout : float
            Seconds to wait.
        env : mapping, optional
            Environment variables for this start only (on top of the constructor's).

        Returns
        -------
        ServerProcess
            ``self``.

        Raises
        ------
        RuntimeError
            The process exited, or did not answer within ``timeout`` (the log's tail is
            in the message).
        """
        self.data.mkdir(parents=True, exist_ok=True)
        seen = self.log.read_text(encoding="utf-8").count("\n") if self.log.exists() else 0
        full_env = os.environ | self.env | dict(env or {})
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=log,
                                         stdin=subprocess.DEVNULL, env=full_env)  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                msg = f"segiou serve exited with {self.proc.returncode}: {self.tail()}"
                raise RuntimeError(msg)
            for line in self.log.read_text(encoding="utf-8").splitlines()[seen:]:
                if line.startswith("{") and '"started"' in line:
                    self.url = json.loads(line)["url"]
                    self.port = int(self.url.rsplit(":", 1)[1])
            if self.url and self._healthy():
                return self
            time.sleep(0.05)
        self.kill()
        msg = f"segiou serve did not answer within {timeout} s: {self.tail()}"
        raise RuntimeError(msg)

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def tail(self, lines: int = 20) -> str:
        """Return the last lines of the server's log."""
        if not self.log.exists():
            return "(no log)"
        return "\n".join(self.log.read_text(encoding="utf-8").splitlines()[-lines:])

    def stop(self, timeout: float = 60.0) -> int:
        """Stop the server with SIGTERM (a clean shutdown); return its exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return -1 if self.proc is None else int(self.proc.returncode)
        self.proc.send_signal(signal.SIGTERM)
        try:
            return int(self.proc.wait(timeout))
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int:
        """Kill the server with SIGKILL (``kill -9``); return its exit code."""
        if self.proc is None:
            return -1
        if self.proc.poll() is None:
            self.proc.kill()
        return int(self.proc.wait())

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
