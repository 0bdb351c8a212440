"""The HTTP face of ``segiou serve``: a FastAPI app over a :class:`~segiou.service.Ledger`.

Every refusal is a 4xx JSON reply ``{"error": <class>, "message": <the library's message>,
"status": <code>}`` and changes nothing. Bodies are read up to a limit (413), with a content
type the route takes (415). Batch bodies larger than 64 KiB, npz states whose members inflate to
more than that, and every raw-mask body, are read and counted on a worker thread, never on the
event loop. A batch whose body is the one counted
under its key (a client's retry) is answered as a duplicate without being counted again, and a
batch put under a key whose batch is being counted waits for it instead of being counted beside
it.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from segiou._jsontext import loads
from segiou._version import __version__
from segiou.errors import (
    ConflictError,
    CountMatrixError,
    CountOverflowError,
    DuplicateBatchError,
    IncompatibleMatrixError,
    LabelDtypeError,
    LabelRangeError,
    NotFoundError,
    PayloadError,
    SegiouError,
    ServiceStorageError,
    ShapeMismatchError,
)
from segiou.service._ledger import (
    CloseRun,
    CreateRun,
    DeleteRunOp,
    Ledger,
    Prepared,
    Run,
    body_digest,
    run_settings,
)
from segiou.service._metrics import Metrics
from segiou.service._npyio import npz_inflated
from segiou.service.wire import (
    BATCH_CONTENT_TYPES,
    CONTENT_JSON,
    CONTENT_MASKS_NPY,
    CONTENT_MASKS_NPZ,
    CONTENT_STATE_NPZ,
    check_key,
    check_run_name,
    encode_state,
    prefers,
)

__all__ = ["LOGGER", "create_app", "status_of"]

#: Structured log lines (one JSON object per line): one per batch, plus start and stop.
LOGGER = logging.getLogger("segiou.service")
_INLINE = 64 << 10  # state bodies up to this size (npz: inflated) are read on the event loop
#: Most bootstrap resamples a result request may ask for (1,000 take ~0.1 s for 5,000 images).
MAX_RESAMPLES = 100_000
_OPEN_PATHS = frozenset({"/healthz", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"})
_Scope = MutableMapping[str, Any]
_ASGI = Callable[[_Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
                 Awaitable[None]]  # fmt: skip


def status_of(err: SegiouError) -> int:
    """Return the HTTP status of a refusal.

    Parameters
    ----------
    err : SegiouError

    Returns
    -------
    int
        413/415/400 as a :class:`~segiou.errors.PayloadError` says, 404 unknown run, 409
        conflicts (a key with other content, an image or inner key counted before, a closed run,
        other settings), 422 masks or states the run's rules refuse, 503 storage failures, else
        400.
    """
    if isinstance(err, PayloadError):
        return err.status
    if isinstance(err, NotFoundError):
        return 404
    if isinstance(err, ConflictError | DuplicateBatchError):
        return 409
    if isinstance(err, ServiceStorageError):
        return 503
    unprocessable = (ShapeMismatchError, LabelDtypeError, LabelRangeError,
                     IncompatibleMatrixError, CountMatrixError, CountOverflowError)  # fmt: skip
    return 422 if isinstance(err, unprocessable) else 400


def _refusal(err: SegiouError) -> JSONResponse:
    status = status_of(err)
    return JSONResponse({"error": type(err).__name__, "message": str(err), "status": status},
                        status_code=status)  # fmt: skip


def _log(**fields: Any) -> None:
    LOGGER.info(json.dumps({"ts": round(time.time(), 3), **fields}, default=str))


class _Guard:
    """ASGI middleware: the bearer token (constant-time compare) and the latency histogram."""

    def __init__(
        self, app: _ASGI, token: str | None, metrics: Metrics, batches: _Batches | None = None
    ) -> None:
        self.app = app
        self.token = None if token is None else f"Bearer {token}".encode()
        self.metrics = metrics
        self.batches = batches

    async def __call__(self, scope: _Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        if self.token is not None and scope["path"] not in _OPEN_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.token):
                msg = (
                    "this server needs a bearer token: send 'Authorization: Bearer <token>' "
                    "(segiou.client.Client(url, token=...), or --token-file / SEGIOU_TOKEN)"
                    if not given
                    else "the bearer token is wrong"
                )
                body = {"error": "Unauthorized", "message": msg, "status": 401}
                reply = JSONResponse(body, 401, headers={"WWW-Authenticate": "Bearer"})
                await reply(scope, receive, send)
                return
        hot = None
        if self.batches is not None and scope["method"] == "PUT":
            hot = self.batches.PATH.fullmatch(scope["path"])
        try:
            if hot is not None and self.batches is not None:
                await self.batches.asgi(scope, receive, send, hot[1], hot[2])
            else:
                await self.app(scope, receive, send)
        finally:
            route = _Batches.ROUTE if hot else getattr(scope.get("route"), "path", "other")
            self.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - t0)


async def _read_body(
    headers: Mapping[bytes, bytes], receive: Any, limit: int, types: tuple[str, ...]
) -> tuple[str, bytearray]:
    """Read a body into one buffer: 415 for another content type, 413 beyond ``limit``."""
    media = headers.get(b"content-type", b"").split(b";")[0].strip().lower().decode("latin-1")
    if media not in types:
        msg = f"content type {media or 'none'!r} is not taken here; send one of {list(types)}"
        raise PayloadError(msg, 415)
    too_big = (
        f"the body is larger than this server's limit of {limit:,} bytes; send smaller batches "
        "or start the server with a larger --max-body-mb"
    )
    declared = headers.get(b"content-length")
    if declared is not None and not declared.isdigit():
        msg = f"Content-Length {declared!r} is not a number of bytes"
        raise PayloadError(msg)
    n = None if declared is None else int(declared)
    if n is not None and n > limit:
        raise PayloadError(too_big, 413)
    buf, pos = bytearray(n or 0), 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            msg = "the client went away before its body arrived; nothing was stored"
            raise PayloadError(msg)
        chunk = message.get("body", b"")
        end = pos + len(chunk)
        if n is None:
            buf += chunk
            if end > limit:
                raise PayloadError(too_big, 413)
        elif end > n:
            msg = f"the body is longer than its Content-Length of {n} bytes"
            raise PayloadError(msg)
        else:
            buf[pos:end] = chunk
        pos = end
        if not message.get("more_body", False):
            break
    if n is not None and pos != n:
        msg = f"the body ended after {pos} of its {n} bytes (Content-Length)"
        raise PayloadError(msg)
    return media, buf


async def _body(request: Request, limit: int, types: tuple[str, ...]) -> bytearray:
    return (await _read_body(dict(request.scope["headers"]), request.receive, limit, types))[1]


async def _send_json(send: Any, status: int, doc: Any) -> None:
    data = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": data})


class _Batches:
    """``PUT /v1/runs/{name}/batches/{key}``: the hot path, also served as plain ASGI."""

    ROUTE = "/v1/runs/{name}/batches/{key}"
    PATH = re.compile(r"/v1/runs/([^/]+)/batches/([^/]+)")

    def __init__(
        self, ledger: Ledger, metrics: Metrics, max_body: int, pool: ThreadPoolExecutor
    ) -> None:
        self.ledger, self.metrics, self.max_body, self.pool = ledger, metrics, max_body, pool
        #: (run incarnation, key) -> set once the batch being prepared under it is answered
        self._busy: dict[tuple[int, str], asyncio.Event] = {}

    async def handle(
        self, name: str, key: str, headers: Mapping[bytes, bytes], receive: Any
    ) -> tuple[int, dict[str, Any]]:
        """Read, prepare and commit one batch; return the status and the JSON reply."""
        t0 = time.perf_counter()
        try:
            run = self.ledger.run(name)
            check_key(key)
            media, body = await _read_body(headers, receive, self.max_body, BATCH_CONTENT_TYPES)
            inline = _inline(media, body)
            tag = body_digest(media, body) if len(body) <= _INLINE else await asyncio.to_thread(
                body_digest, media, body)  # fmt: skip
            slot = (run.incarnation, key)
            while (busy := self._busy.get(slot)) is not None:  # one attempt per key at a time:
                await busy.wait()  # a retry waits for the first, never counted beside it
            answer = self.ledger.known(run, key, tag)  # the same bytes again: not counted again
            if answer is not None:
                self.metrics.batch("duplicate")
            else:
                self._busy[slot] = done = asyncio.Event()
                try:
                    prep = await self._prepare(run, key, media, body, tag, inline=inline)
                    del body
                    answer = await self.ledger.submit_async(prep)
                finally:
                    del self._busy[slot]
                    done.set()
        except SegiouError as err:
            self.metrics.batch("refused")
            status = status_of(err)
            _log(event="batch", run=name, key=key, outcome="refused", status=status,
                 error=type(err).__name__, ms=round((time.perf_counter() - t0) * 1e3, 2))  # fmt: skip
            return status, {"error": type(err).__name__, "message": str(err), "status": status}
        except Exception as err:  # noqa: BLE001 - a bug or a resource failure (MemoryError):
            self.metrics.batch("refused")  # still a 500 (retried), but counted, logged, in form
            ms = round((time.perf_counter() - t0) * 1e3, 2)
            _log(event="batch", run=name, key=key, outcome="refused", status=500,
                 error=type(err).__name__, ms=ms, traceback=traceback.format_exc())  # fmt: skip
            msg = (
                f"batch {key!r} of run {name!r}: the server failed on it ({type(err).__name__}: "
                f"{err}); nothing was stored. A bug in segiou or a lack of memory: see the "
                "server's log (sending it again may work)"
            )
            return 500, {"error": type(err).__name__, "message": msg, "status": 500}
        _log(event="batch", run=name, key=key, outcome=answer["outcome"], pixels=answer["pixels"],
             images=answer["images"], ms=round((time.perf_counter() - t0) * 1e3, 2))  # fmt: skip
        return (201 if answer["outcome"] == "counted" else 200), answer

    async def _prepare(
        self, run: Run, key: str, media: str, body: bytearray, tag: bytes, *, inline: bool
    ) -> Prepared:
        if inline:  # npz members inflate to at most the body limit
            return self.ledger.prepare(run, key, media, body, self.max_body, tag)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self.ledger.prepare, run, key, media, body,
                                          self.max_body, tag)  # fmt: skip

    async def asgi(self, scope: _Scope, receive: Any, send: Any, name: str, key: str) -> None:
        """Serve the route without the framework's routing and middleware (it is timed)."""
        status, doc = await self.handle(name, key, dict(scope["headers"]), receive)
        await _send_json(send, status, doc)


def _inline(media: str, body: bytearray) -> bool:
    """Whether a batch body is light enough to read on the event loop, by the work it needs.

    A JSON state of at most :data:`_INLINE` bytes (its matrix is written out in full, so its
    classes are few); an npz state whose members, as its zip directory says, inflate to at
    most that (a deflated npz of 38 KB may hold 33 MB: decoding, checking and serialising it
    again took seconds, during which no other request was answered). Never raw masks.
    """
    if len(body) > _INLINE or media in (CONTENT_MASKS_NPZ, CONTENT_MASKS_NPY):
        return False
    if media == CONTENT_STATE_NPZ:
        inflated = npz_inflated(body)
        return inflated is not None and inflated <= _INLINE
    return True


def _json(body: bytes | bytearray) -> Any:
    try:
        return loads(body)
    except ValueError as err:  # UnicodeDecodeError, and nesting too deep, among them
        msg = f"the body is not valid JSON ({err})"
        raise PayloadError(msg) from err


_RUN_SCHEMA = {
    "type": "object",
    "required": ["name", "labels"],
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
        "labels": {"description": "a built-in spec name (cityscapes, pascal_voc, ade20k), a "
                   "number of classes, or a spec object (see the README)"},
        "ignore_index": {"description": "null, an integer or a list of integers"},
        "gt_ids": {"enum": ["class", "raw"], "default": "class"},
        "pred_ids": {"enum": ["class", "raw", None], "default": None},
        "per_image": {"type": "boolean", "default": False},
        "on_unexpected": {"enum": ["raise", "count"], "default": "raise"},
    },
}  # fmt: skip
_BATCH_BODY = {
    "requestBody": {
        "required": True,
        "description": "a partial state (segiou.confusion JSON, or its npz form) or raw masks "
        "(npz with gt, pred and optionally names; or .npy records gt, pred[, names])",
        "content": {t: {"schema": {"type": "string", "format": "binary"}}
                    for t in BATCH_CONTENT_TYPES} | {CONTENT_JSON: {"schema": {"type": "object"}}},
    }
}  # fmt: skip


def create_app(
    ledger: Ledger,
    *,
    metrics: Metrics,
    token: str | None = None,
    max_body: int = 256 << 20,
    workers: int = 4,
) -> FastAPI:
    """Build the ASGI app.

    Parameters
    ----------
    ledger : Ledger
        Runs and batches (its writer commits every change).
    metrics : Metrics
        The Prometheus metrics the app updates and serves at ``/metrics``.
    token : str, optional
        Bearer token every route but ``/healthz`` and the API docs requires.
    max_body : int
        Largest request body in bytes (413 beyond).
    workers : int
        Threads that read and count large bodies and render results.

    Returns
    -------
    FastAPI
    """
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="segiou-count")

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> Any:
        yield
        ledger.stop()
        pool.shutdown(wait=True)
        ledger.storage.close()
        _log(event="stopped")

    app = FastAPI(
        title="segiou",
        version=__version__,
        description="Durable, exactly-once semantic-segmentation metrics: put keyed batches "
        "(partial states or raw masks) into runs; read live results.",
        lifespan=lifespan,
        redirect_slashes=False,  # a trailing slash names no route: a 404, never a 307
    )
    batches = _Batches(ledger, metrics, max_body, pool)
    app.add_middleware(_Guard, token=token, metrics=metrics, batches=batches)

    async def in_pool(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def write(op: object) -> dict[str, Any]:
        return await ledger.submit_async(op)

    @app.exception_handler(SegiouError)
    async def _refused(_: Request, err: SegiouError) -> JSONResponse:
        return _refusal(err)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, err: RequestValidationError) -> JSONResponse:
        parts = [f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in err.errors()]
        msg = "invalid request: " + "; ".join(parts)
        return JSONResponse({"error": "UsageError", "message": msg, "status": 400}, 400)

    @app.exception_handler(StarletteHTTPException)
    async def _no_route(request: Request, err: StarletteHTTPException) -> Response:
        # routes that do not exist answer in the refusal form too (a run name or key holding
        # '/', sent as %2F, names no route: it is not a valid name)
        if err.status_code not in (404, 405):
            return JSONResponse({"detail": err.detail}, err.status_code, headers=err.headers)
        what = "no route" if err.status_code == 404 else "method not allowed"
        msg = (
            f"{what}: {request.method} {request.url.path} ({err.detail}); run names and "
            "batch keys hold no '/' (their patterns: /docs)"
        )
        error = "NotFoundError" if err.status_code == 404 else "UsageError"
        return JSONResponse({"error": error, "message": msg, "status": err.status_code},
                            err.status_code, headers=err.headers)  # fmt: skip

    @app.get("/healthz", tags=["service"])
    async def healthz() -> dict[str, Any]:
        """Say the server is up (liveness)."""
        return {"status": "ok", "runs": len(ledger.runs), "segiou": __version__}

    @app.get("/metrics", tags=["service"])
    async def prometheus() -> Response:
        """Return the Prometheus text metrics."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/runs", tags=["runs"], status_code=201,
              openapi_extra={"requestBody": {"required": True, "content": {
                  CONTENT_JSON: {"schema": _RUN_SCHEMA}}}})  # fmt: skip
    async def create_run(request: Request) -> JSONResponse:
        """Create a run (201); the same settings again are a no-op (200); others give 409."""
        settings, template = run_settings(_json(await _body(request, max_body, (CONTENT_JSON,))))
        answer = await write(CreateRun(settings, template, time.time()))
        if answer["created"]:
            _log(event="run", run=settings["name"], outcome="created")
        return JSONResponse(answer, status_code=201 if answer["created"] else 200)

    @app.get("/v1/runs", tags=["runs"])
    async def list_runs() -> dict[str, Any]:
        """List every run: settings, status, batch, image and pixel counts."""
        return {"runs": [r.summary(full=False) for r in list(ledger.runs.values())]}

    @app.get("/v1/runs/{name}", tags=["runs"])
    async def get_run(name: str) -> Response:
        """Return one run: settings (and ``template``, its empty state), status and counts."""
        run = ledger.run(name)  # the stored template as it is: never parsed here
        big = len(run.record.template) > _INLINE
        text = await in_pool(run.summary_json) if big else run.summary_json()
        return Response(text, media_type=CONTENT_JSON)

    @app.put("/v1/runs/{name}/batches/{key}", tags=["batches"], status_code=201,
             openapi_extra=_BATCH_BODY)  # fmt: skip
    async def put_batch(name: str, key: str, request: Request) -> JSONResponse:
        """Count a batch once (201); the same content again is a duplicate (200), other 409."""
        status, doc = await batches.handle(name, key, dict(request.scope["headers"]),
                                           request.receive)  # fmt: skip
        return JSONResponse(doc, status_code=status)

    @app.get("/v1/runs/{name}/result", tags=["results"])
    async def result(
        name: str,
        preset: str = "segiou",
        beta: float | None = None,
        bootstrap: int = Query(0, ge=0, le=MAX_RESAMPLES),
        seed: int = Query(0, ge=0),
    ) -> Response:
        """Return the live result, in the ``segiou.result`` JSON of ``segiou eval --json``.

        ``bootstrap=N`` adds the 95% intervals of every metric from ``N`` image resamples with
        ``seed``, as ``segiou eval --bootstrap N`` does (a run without per-image rows is refused:
        it has no images to resample); ``0`` (the default, cheap enough to poll) leaves
        ``intervals`` null.
        """
        from segiou.results import evaluate

        cm = await in_pool(ledger.total, name)

        def render() -> str:
            if bootstrap:  # a run without per-image rows is refused, saying why
                from segiou.stats import evaluate_with_intervals

                res = evaluate_with_intervals(cm, preset=preset, beta=beta,
                                              resamples=bootstrap, seed=seed)  # fmt: skip
            else:
                res = evaluate(cm, preset=preset, beta=beta)
            return res.to_json(indent=None)

        return Response(await in_pool(render), media_type=CONTENT_JSON)

    @app.get("/v1/runs/{name}/state", tags=["results"])
    async def state(name: str, request: Request) -> Response:
        """Return the run's state (``ConfusionMatrix.from_dict`` reads it); npz when accepted."""
        binary = prefers(request.headers.get("accept", ""), CONTENT_STATE_NPZ, CONTENT_JSON)
        cm = await in_pool(ledger.total, name)
        body, media = await in_pool(lambda: encode_state(cm.to_dict(), binary=binary))
        return Response(body, media_type=media)

    @app.get("/v1/runs/{name}/images", tags=["results"])
    async def images(name: str, preset: str = "segiou") -> Response:
        """Return the per-image rows as CSV (runs created with ``per_image``).

        Each image is scored under ``preset`` (as ``segiou eval --preset``), which the CSV's
        last column names.
        """
        from segiou.report import render_per_image_csv

        run = ledger.run(name)
        if not run.template.per_image:
            msg = f"run {name!r} keeps no per-image rows; create a run with per_image true"
            raise ConflictError(msg)
        cm = await in_pool(ledger.total, name)
        text = await in_pool(lambda: render_per_image_csv(cm, preset=preset))
        return Response(text, media_type="text/csv")

    @app.post("/v1/runs/{name}/close", tags=["runs"])
    async def close(name: str) -> dict[str, Any]:
        """Close the run: later batches get 409 (a batch already counted is still a duplicate)."""
        answer = await write(CloseRun(check_run_name(name), time.time()))
        _log(event="run", run=name, outcome="closed")
        return answer

    @app.delete("/v1/runs/{name}", tags=["runs"])
    async def delete(name: str) -> dict[str, Any]:
        """Delete the run and all its batches."""
        answer = await write(DeleteRunOp(check_run_name(name)))
        _log(event="run", run=name, outcome="deleted")
        return answer

    return app
