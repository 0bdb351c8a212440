"""The HTTP client of ``segiou serve`` (:class:`Client`) and results read back."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np

from segiou._jsontext import loads
from segiou.confusion import ConfusionMatrix
from segiou.errors import (
    RefusedError,
    ServiceUnavailableError,
    UsageError,
)
from segiou.labels import LabelSpec, load_spec
from segiou.results import Result
from segiou.service.wire import (
    CONTENT_JSON,
    CONTENT_STATE_NPZ,
    check_key,
    check_run_name,
    decode_state,
    encode_masks,
    encode_state,
)

if TYPE_CHECKING:
    from segiou.client._stream import StreamingEvaluator

__all__ = ["Client", "result_from_dict"]

_BUILTINS = ("cityscapes", "pascal_voc", "ade20k")
#: A state whose count matrix alone takes more JSON than this travels in the npz form
#: (deflated) without its JSON being written to compare.
_JSON_AT_MOST = 64 << 10


class Client:
    """Talk to a ``segiou serve`` server; bound to one run at a time.

    Parameters
    ----------
    url : str
        The server, e.g. ``"http://127.0.0.1:8787"`` (``https`` works too).
    token : str, optional
        The bearer token, when the server has one.
    run : str, optional
        The run methods act on when they are not given ``run=`` (:meth:`create_run` sets it).
    timeout : float, default 120
        Seconds to wait for a connection or a reply, per attempt.
    retries : int, default 8
        Retries after a connection error or a 5xx reply (0: none).
    backoff, max_backoff : float, default 0.1 and 5
        The n-th retry waits a random time between half and all of
        ``min(max_backoff, backoff * 2**(n - 1))`` seconds.

    Raises
    ------
    UsageError
        ``url`` is not an ``http`` or ``https`` URL, or ``run`` is not a valid run name.

    Notes
    -----
    Safe to share between threads (each thread keeps its own connection). ``with Client(...)
    as client:`` (or :meth:`disconnect`) closes the connections; :meth:`close` closes the run.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        run: str | None = None,
        timeout: float = 120.0,
        retries: int = 8,
        backoff: float = 0.1,
        max_backoff: float = 5.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            msg = f"server URL {url!r} is not an http:// or https:// URL with a host"
            raise UsageError(msg)
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._base = parts.path.rstrip("/")
        self._auth = None if token is None else f"Bearer {token}"
        self.run = None if run is None else check_run_name(run)
        self.timeout, self.retries = timeout, retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self._local = threading.local()
        self._conns: set[http.client.HTTPConnection] = set()
        self._conns_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Client({self.url!r}, run={self.run!r})"

    # -- transport -----------------------------------------------------------------------------
    def _conn(self) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=self.timeout)
            self._local.conn = conn
            with self._conns_lock:
                self._conns.add(conn)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._conns_lock:
                self._conns.discard(conn)

    def disconnect(self) -> None:
        """Close the connections of every thread (the next request opens a new one)."""
        with self._conns_lock:
            conns, self._conns = self._conns, set()
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disconnect()

    def _once(
        self, method: str, path: str, chunks: Sequence[bytes | memoryview], headers: dict[str, str]
    ) -> tuple[int, str, bytes, str]:
        conn = self._conn()
        conn.putrequest(method, self._base + path, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        try:
            for chunk in chunks:
                conn.send(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may have answered early (413, 401): read what it said
        resp = conn.getresponse()
        data = resp.read()
        if resp.will_close:
            self._drop()
        return resp.status, resp.getheader("content-type", ""), data, resp.getheader("location", "")

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Sequence[bytes | memoryview] = (),
        content_type: str | None = None,
        accept: str | None = None,
    ) -> tuple[int, str, bytes]:
        """Send one request, retrying connection errors and 5xx replies; raise on 4xx.

        Parameters
        ----------
        method, path : str
            E.g. ``"GET"``, ``"/v1/runs"``.
        body : sequence of bytes-like
            The body, as chunks sent one after another.
        content_type, accept : str, optional
            Headers.

        Returns
        -------
        (int, str, bytes)
            Status, content type and body of the reply (2xx only).

        Raises
        ------
        RefusedError
            A 4xx reply (the server's message; nothing was stored), or a 1xx/3xx one (segiou's
            server never redirects: something else answered, a proxy or a wrong URL).
        ServiceUnavailableError
            Still no answer, or a 5xx one, after every retry.
        """
        headers = {"Content-Length": str(sum(memoryview(c).nbytes for c in body))}
        if content_type:
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        if self._auth:
            headers["Authorization"] = self._auth
        attempt, problem, stale_ok = 0, "", True
        while True:
            reused = getattr(self._local, "conn", None) is not None
            try:
                status, ctype, data, location = self._once(method, path, body, headers)
            except (OSError, http.client.HTTPException) as err:
                self._drop()
                stale = isinstance(err, http.client.RemoteDisconnected | ConnectionResetError |
                                   BrokenPipeError)  # fmt: skip
                if reused and stale and stale_ok:  # a kept-alive connection the server closed
                    stale_ok = False  # (e.g. it restarted): once more on a new one, not a retry
                    continue
                problem = f"{type(err).__name__}: {err}"
            else:
                if 200 <= status < 300:
                    return status, ctype, data
                if status < 400:  # segiou's server never redirects: a proxy or a wrong URL
                    raise _redirected(method, path, status, location)
                if status < 500:
                    raise _refused(method, path, status, data)
                problem = f"HTTP {status}: {_message(data)}"
            attempt += 1
            if attempt > self.retries:
                msg = (
                    f"{method} {self.url}{path}: no answer after {attempt} attempt(s) (last: "
                    f"{problem}); the request can be sent again as it is"
                )
                raise ServiceUnavailableError(msg)
            delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
            time.sleep(random.uniform(delay / 2, delay))

    def _json(self, method: str, path: str, payload: Any = None) -> Any:
        body = [] if payload is None else [json.dumps(payload).encode()]
        status, _, data = self.request(method, path, body=body,
                                       content_type=CONTENT_JSON if body else None)  # fmt: skip
        return _reply_json(method, path, status, data)

    def _run_path(self, run: str | None) -> str:
        name = run if run is not None else self.run
        if name is None:
            msg = "no run given: pass run=..., or call create_run() or Client(..., run=...) first"
            raise UsageError(msg)
        return f"/v1/runs/{urllib.parse.quote(check_run_name(name))}"

    # -- runs ----------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """Return ``GET /healthz``."""
        out: dict[str, Any] = self._json("GET", "/healthz")
        return out

    def create_run(
        self,
        name: str,
        labels: int | str | Path | LabelSpec | Mapping[str, Any],
        *,
        ignore_index: int | Sequence[int] | None = None,
        gt_ids: str = "class",
        pred_ids: str | None = None,
        per_image: bool = False,
        on_unexpected: str = "raise",
    ) -> dict[str, Any]:
        """Create a run (or find it, when one with the same settings exists) and use it.

        Parameters
        ----------
        name : str
            The run's name.
        labels : int, str, Path, LabelSpec or mapping
            As for :class:`~segiou.confusion.ConfusionMatrix`; a spec file is read here and
            sent as a spec object (the server never reads files named by a request).
        ignore_index, gt_ids, pred_ids, per_image, on_unexpected
            As for :class:`~segiou.confusion.ConfusionMatrix`.

        Returns
        -------
        dict
            ``{"created": bool, "run": {...}}``.

        Raises
        ------
        RefusedError
            A run of that name exists with other settings (409, naming both), or invalid
            settings (400).
        """
        spec: Any = labels
        if isinstance(labels, LabelSpec):
            spec = labels.to_dict()
        elif isinstance(labels, Path) or (isinstance(labels, str) and labels not in _BUILTINS):
            spec = load_spec(labels).to_dict()
        ign = list(ignore_index) if isinstance(ignore_index, Sequence) else ignore_index
        settings = {"name": check_run_name(name), "labels": spec, "ignore_index": ign,
                    "gt_ids": gt_ids, "pred_ids": pred_ids, "per_image": per_image,
                    "on_unexpected": on_unexpected}  # fmt: skip
        out: dict[str, Any] = self._json("POST", "/v1/runs", settings)
        self.run = name
        return out

    def runs(self) -> list[dict[str, Any]]:
        """Return every run's settings, status and counts."""
        out: list[dict[str, Any]] = self._json("GET", "/v1/runs")["runs"]
        return out

    def run_info(self, run: str | None = None) -> dict[str, Any]:
        """Return one run's settings (with ``template``, its empty state), status and counts."""
        out: dict[str, Any] = self._json("GET", self._run_path(run))
        return out

    def close(self, run: str | None = None) -> dict[str, Any]:
        """Close the run: the server refuses later batches (409)."""
        out: dict[str, Any] = self._json("POST", self._run_path(run) + "/close")
        return out

    def delete(self, run: str | None = None) -> dict[str, Any]:
        """Delete the run and its batches."""
        out: dict[str, Any] = self._json("DELETE", self._run_path(run))
        return out

    # -- batches -------------------------------------------------------------------------------
    def put_counts(
        self, cm: ConfusionMatrix, key: str, *, run: str | None = None, binary: bool | None = None
    ) -> dict[str, Any]:
        """Put a state counted here (only the small state travels) under ``key``.

        Parameters
        ----------
        cm : ConfusionMatrix
            A partial state, counted with the run's settings.
        key : str
            The batch key: the same key with the same content again is a duplicate (200).
        run : str, optional
            Default: the client's run.
        binary : bool, optional
            Send the npz form, deflated (``True``) or JSON (``False``); default: whichever is
            smaller (JSON for the smallest states; at 4,096 classes the npz form, 0.6 MB
            against 33.6 MB of JSON), and JSON when the server refuses the npz form with 413
            (its ``--max-body-mb`` also bounds what npz members inflate to: 134 MB at 4,096
            classes).

        Returns
        -------
        dict
            ``outcome`` (``"counted"`` or ``"duplicate"``), ``pixels``, ``images``,
            ``batches`` (the run's batch count).

        Raises
        ------
        RefusedError
            409: the key holds other content, an image or inner key was counted under another
            key, or the run is closed; 422: the state's settings differ from the run's.
        ServiceUnavailableError
            No answer after every retry (the same call may be repeated).
        """
        path = f"{self._run_path(run)}/batches/{check_key(key)}"
        state = cm.to_dict()
        body, ctype = _smaller_form(state, cm.num_classes, binary)
        try:
            status, _, data = self.request("PUT", path, body=[body], content_type=ctype)
        except RefusedError as err:
            # a server bounds what npz members inflate to by its body limit: with a limit
            # below the deflated npz form's inflated size, the JSON form may still fit
            if err.status != 413 or binary is not None or ctype != CONTENT_STATE_NPZ:
                raise
            del body
            plain, ctype = encode_state(state)
            status, _, data = self.request("PUT", path, body=[plain], content_type=ctype)
        out: dict[str, Any] = _reply_json("PUT", path, status, data, needs="outcome")
        return out

    def put_masks(
        self,
        gt: object,
        pred: object,
        key: str,
        names: Sequence[str] | None = None,
        *,
        run: str | None = None,
        npz: bool = False,
    ) -> dict[str, Any]:
        """Put raw masks under ``key``; the server counts them with the run's settings.

        Parameters
        ----------
        gt, pred : array_like
            Label masks of one shape (leading axes are images).
        key : str
            The batch key (it is also the masks' batch key inside the run's state).
        names : sequence of str, optional
            Image names (per-image rows); default ``key`` or ``key/0``, ``key/1``, ...
        run : str, optional
            Default: the client's run.
        npz : bool, default False
            Send an npz instead of ``.npy`` records (which need no copy of the masks).

        Returns
        -------
        dict
            As :meth:`put_counts`.

        Raises
        ------
        RefusedError
            422: wrong shapes or dtypes, unexpected values (``on_unexpected="raise"``),
            ``names`` for a run without per-image rows or not one per image; 409 as for
            :meth:`put_counts`; 413: larger than the server's body limit.
        ServiceUnavailableError
            No answer after every retry.
        """
        path = f"{self._run_path(run)}/batches/{check_key(key)}"
        chunks, _, ctype = encode_masks(np.asarray(gt), np.asarray(pred), names, npz=npz)
        status, _, data = self.request("PUT", path, body=chunks, content_type=ctype)
        out: dict[str, Any] = _reply_json("PUT", path, status, data, needs="outcome")
        return out

    # -- results -------------------------------------------------------------------------------
    def result_json(
        self,
        preset: str = "segiou",
        *,
        beta: float | None = None,
        bootstrap: int = 0,
        seed: int = 0,
        run: str | None = None,
    ) -> dict[str, Any]:
        """Return the live result as the server sends it (``segiou.result`` JSON).

        The arguments are those of :meth:`result`.
        """
        query: dict[str, str] = {"preset": preset}
        if beta is not None:
            query["beta"] = repr(float(beta))
        if bootstrap:
            query |= {"bootstrap": str(int(bootstrap)), "seed": str(int(seed))}
        path = f"{self._run_path(run)}/result?{urllib.parse.urlencode(query)}"
        out: dict[str, Any] = self._json("GET", path)
        return out

    def result(
        self,
        preset: str = "segiou",
        *,
        beta: float | None = None,
        bootstrap: int = 0,
        seed: int = 0,
        run: str | None = None,
    ) -> Result:
        """Return the live result of the run.

        Parameters
        ----------
        preset : str, default "segiou"
            The averaging convention (see :data:`segiou.PRESETS`).
        beta : float, optional
            Also F-beta per class and its mean.
        bootstrap : int, default 0
            Image resamples for the 95% intervals of every metric, computed by the server (runs
            with per-image rows; at most 100,000); 0: no intervals.
        seed : int, default 0
            Seed of the resamples.
        run : str, optional
            Default: the client's run.

        Returns
        -------
        Result
            The server's ``segiou.result`` JSON read back (:func:`result_from_dict`).
        """
        doc = self.result_json(preset, beta=beta, bootstrap=bootstrap, seed=seed, run=run)
        return result_from_dict(doc)

    def state(self, run: str | None = None) -> ConfusionMatrix:
        """Return the run's state (every batch merged), as a :class:`ConfusionMatrix`.

        Asks for the npz form, which this server deflates (at 4,096 classes 0.6 MB against
        33.6 MB of JSON), and reads either form.
        """
        _, ctype, data = self.request("GET", self._run_path(run) + "/state",
                                      accept=f"{CONTENT_STATE_NPZ}, {CONTENT_JSON}")  # fmt: skip
        media = ctype.split(";")[0].strip()
        return decode_state(data, media, where=f"state of run {run or self.run!r}")

    def images_csv(self, run: str | None = None, *, preset: str = "segiou") -> str:
        """Return the run's per-image rows as CSV text (runs with ``per_image``).

        Parameters
        ----------
        run : str, optional
            Default: the client's run.
        preset : str, default "segiou"
            The convention each image is scored under (see :data:`segiou.PRESETS`); the
            CSV's last column names it.

        Returns
        -------
        str
            The CSV of :func:`segiou.report.render_per_image_csv`.
        """
        query = urllib.parse.urlencode({"preset": preset})
        path = f"{self._run_path(run)}/images?{query}"
        status, ctype, data = self.request("GET", path)
        if ctype.split(";")[0].strip() != "text/csv":
            raise _unreadable(method="GET", path=path, status=status, data=data)
        return data.decode("utf-8")

    def stream(self, run: str | None = None, **options: Any) -> StreamingEvaluator:
        """Return a :class:`~segiou.client.StreamingEvaluator` putting partials into the run.

        Parameters
        ----------
        run : str, optional
            Default: the client's run.
        **options
            ``every``, ``seconds``, ``prefix``, ``spool`` (see the evaluator).

        Returns
        -------
        StreamingEvaluator
        """
        from segiou.client._stream import StreamingEvaluator

        return StreamingEvaluator(self, run=run, **options)


def _smaller_form(state: dict[str, Any], k: int, binary: bool | None) -> tuple[bytes, str]:
    """Encode a state as asked, or (``binary=None``) in whichever form is smaller.

    JSON holds at least 2 bytes a count (``0,``): past 64 KiB for the matrix alone (182 classes
    or more) the deflated npz form is far smaller (its 8-byte counts deflate to a fraction of a
    byte each when most are 0) and JSON is not written to compare; below, both are written (a
    few milliseconds) and the smaller is sent.
    """
    if binary is not None:
        return encode_state(state, binary=binary)
    if 2 * k * k > _JSON_AT_MOST:
        return encode_state(state, binary=True)
    plain, packed = encode_state(state), encode_state(state, binary=True)
    return packed if len(packed[0]) < len(plain[0]) else plain


def _message(data: bytes) -> str:
    try:
        return str(loads(data)["message"])
    except (ValueError, KeyError, TypeError):
        return data[:300].decode("utf-8", "replace")


def _reply_json(method: str, path: str, status: int, data: bytes, *, needs: str = "") -> Any:
    """Return the JSON object of a 2xx reply (holding the field ``needs``, if given).

    Anything else did not come from segiou's server.
    """
    try:
        doc = loads(data)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or (needs and needs not in doc):
        raise _unreadable(method, path, status, data)
    return doc


def _unreadable(method: str, path: str, status: int, data: bytes) -> RefusedError:
    msg = (
        f"{method} {path}: the reply ({status}) is not segiou's: "
        f"{data[:120].decode('utf-8', 'replace')!r}; something else answered (a proxy, or a "
        "wrong URL): check the client's URL"
    )
    return RefusedError(msg, status=status, error="UnreadableReply")


def _redirected(method: str, path: str, status: int, location: str) -> RefusedError:
    msg = (
        f"{method} {path}: redirected ({status}{' to ' + location if location else ''}); "
        "segiou's server never redirects, so something else answered (a proxy, or a wrong URL): "
        "check the client's URL. Nothing was stored"
    )
    return RefusedError(msg, status=status, error="Redirect")


def _refused(method: str, path: str, status: int, data: bytes) -> RefusedError:
    try:
        doc = loads(data)
        error, message = str(doc.get("error", "")), str(doc["message"])
    except (ValueError, KeyError, TypeError, AttributeError):
        error, message = "", data[:300].decode("utf-8", "replace")
    return RefusedError(f"{method} {path}: refused ({status}): {message}", status=status,
                        error=error)  # fmt: skip


# -- results read back ----------------------------------------------------------------------------
def result_from_dict(d: Mapping[str, Any]) -> Result:
    """Rebuild a :class:`~segiou.results.Result` from its JSON (see :meth:`Result.from_dict`).

    Parameters
    ----------
    d : mapping
        What :meth:`Result.to_dict` wrote (for example ``GET /v1/runs/{name}/result``).

    Returns
    -------
    Result

    Raises
    ------
    UsageError
        Not a ``segiou.result`` document of a version this segiou reads.
    """
    return Result.from_dict(d)
