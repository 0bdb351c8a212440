"""The service's core: runs in memory, batches prepared anywhere, one writer that commits them.

Requests prepare their batch on any thread (:meth:`Ledger.prepare`: read the body, count raw
masks, check it against the run's settings, take its digest). One writer thread then takes the
prepared batches in arrival order, checks each against the run (key, digest, inner batch keys,
image names, status), commits all of those it accepts in one transaction (group commit), and
only then answers each of them. The in-memory index it checks against changes only after the
commit, and the database's primary keys would refuse a double row even if it were wrong.

A run's total is the merge of its batches' states, through the public accumulator API only
(:meth:`~segiou.confusion.ConfusionMatrix.from_dict` and
:meth:`~segiou.confusion.ConfusionMatrix.merge`): kept in memory, folded lazily within a memory
budget, rebuilt from the stored states, a few at a time, on its first read after a start
(:mod:`segiou.service._totals`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import os
import queue
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from segiou._batch import n_images_of, same_counting
from segiou.confusion import ConfusionMatrix
from segiou.errors import (
    ConflictError,
    CountOverflowError,
    IncompatibleMatrixError,
    NotFoundError,
    PayloadError,
    SegiouError,
    ServiceStorageError,
    ShapeMismatchError,
    UsageError,
)
from segiou.service._settings import run_settings
from segiou.service._totals import RunTotal, empty_like, footprint, pack_blob
from segiou.service.storage import (
    AddBatch,
    BatchRecord,
    Change,
    DeleteRun,
    PutRun,
    RunIndex,
    RunRecord,
    Storage,
)
from segiou.service.wire import (
    CONTENT_JSON,
    CONTENT_STATE_NPZ,
    canonical_state,
    check_run_name,
    decode_masks,
    decode_state,
    state_digest,
)

__all__ = [
    "FAULT_ENV",
    "CloseRun",
    "CreateRun",
    "DeleteRunOp",
    "Ledger",
    "Prepared",
    "Run",
    "body_digest",
    "run_settings",
]

#: Test hook: ``exit-after-commit:<key>`` makes the writer exit the process (status 86) right
#: after committing the batch put under ``<key>``, before any reply: a crash between commit and
#: reply. Read once at start-up; never set it outside tests.
FAULT_ENV = "SEGIOU_SERVICE_FAULT"
_GROUP = 256  # batches per commit at most
_INT64_MAX = 2**63 - 1  # a run's pixel total (SQLite INTEGER, the state's counts)
_incarnations = itertools.count(1)
#: Who waits for an operation: a thread (a concurrent future) or an event loop and its future.
_Waiter = Future[dict[str, Any]] | tuple[asyncio.AbstractEventLoop, asyncio.Future[dict[str, Any]]]


@dataclass
class Prepared:
    """A batch read, counted and checked against its run's settings, ready for the writer."""

    run: str
    key: str
    incarnation: int
    cm: ConfusionMatrix
    digest: str
    blob: bytes
    kind: str
    pixels: int
    images: int
    keys: tuple[str, ...]
    names: tuple[str, ...]
    size: int = 0  # estimated bytes of ``cm`` (see segiou.service._totals.footprint)
    tag: bytes = b""  # the body's digest (body_digest): a retry of it is known uncounted


@dataclass
class Run:
    """A run in memory: its row, settings, index of keys and names, and its running total."""

    record: RunRecord
    template: ConfusionMatrix
    batches: dict[str, tuple[str, int]] = field(default_factory=dict)  # key -> digest, seq
    keys: dict[str, str] = field(default_factory=dict)  # inner batch key -> batch key
    images: dict[str, str] = field(default_factory=dict)  # image name -> batch key
    #: batch key -> digest of the body it was counted (or found a duplicate) from, then its
    #: pixels and images (int64 each): a retry of that body is answered without counting it
    #: again. Kept from this start on (a retry after a restart is counted, then known).
    bodies: dict[str, bytes] = field(default_factory=dict)
    incarnation: int = field(default_factory=lambda: next(_incarnations))
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: the running total and the committed states not folded into it yet (guarded by lock)
    sums: RunTotal = field(init=False)
    #: per prefix, the highest n of the keys <prefix>.<n> and inner keys <prefix>/<n> (kept as
    #: batches are committed: a read of the run info never walks every key)
    numbered: dict[str, dict[str, int]] = field(
        default_factory=lambda: {"batches": {}, "inner": {}}
    )

    def __post_init__(self) -> None:
        self.sums = RunTotal(self.lock)

    @property
    def name(self) -> str:
        """The run's name."""
        return self.record.name

    def summary(self, *, full: bool = True) -> dict[str, Any]:
        """Return settings, status and totals, as ``GET /v1/runs/{name}`` does.

        ``full=False``: without ``template`` and ``numbered``, as ``GET /v1/runs`` lists runs;
        the template (33.6 MB of JSON for 4096 classes) is then not parsed.
        """
        with self.lock:
            r = self.record
            numbered = {k: dict(v) for k, v in self.numbered.items()}
        t = self.template
        out = {
            "name": r.name,
            "status": r.status,
            "batches": r.batches,
            "images": r.images,
            "pixels": r.pixels,
            "created": r.created,
            "closed": r.closed,
            "settings": json.loads(r.settings),
            "labels": {"name": t.spec.name, "num_classes": t.num_classes},
        }
        if full:
            out |= {"template": json.loads(r.template), "numbered": numbered}
        return out

    def summary_json(self) -> str:
        """Return :meth:`summary` as JSON text, the stored template put in as it is (unparsed)."""
        head = self.summary(full=False)
        with self.lock:
            head["numbered"] = {k: dict(v) for k, v in self.numbered.items()}
        return f'{json.dumps(head)[:-1]}, "template": {self.record.template}}}'

    def number(self, batches: Iterable[str], inner: Iterable[str]) -> None:
        """Take batch keys and inner batch keys into :attr:`numbered` (the caller holds the lock)."""
        _number_into(self.numbered["batches"], batches, ".")
        _number_into(self.numbered["inner"], inner, "/")


def _number_into(out: dict[str, int], keys: Iterable[str], sep: str) -> None:
    """Per prefix, the highest ``n`` of the keys ``<prefix><sep><n>`` (``n`` decimal digits).

    What a restarted :class:`~segiou.client.StreamingEvaluator` numbers its partial states
    (``<prefix>.000001``) and its own batch keys (``<prefix>/0``) after: a key is never reused.
    Numbers of every width count (an evaluator numbers partials up to 19 digits; a number this
    ignored was numbered again, and refused with 409).
    """
    for k in keys:
        head, found, tail = k.rpartition(sep)
        if found and head and tail.isascii() and tail.isdigit():
            out[head] = max(out.get(head, -1), int(tail))


def body_digest(content_type: str, body: bytes | bytearray | memoryview) -> bytes:
    """Return the SHA-256 of a batch body and its content type (32 bytes).

    Equal tags under one key of one run mean the same bytes sent again: the same content,
    whatever counting it takes (a raw-mask batch of 4,096 classes with per-image rows: 0.3 s an
    image), so a retry is known a duplicate before it is counted.
    """
    h = hashlib.sha256(content_type.encode())
    h.update(b"\0")
    h.update(body)
    return h.digest()


def _legacy_digest(cm: ConfusionMatrix) -> str:
    """Digest of ``cm`` in the form an older server stored (rows and ignore values unsorted).

    Taken only when a key was counted before under another digest: a batch stored before the
    canonical form sorted them, sent again, is a duplicate, not a conflict.
    """
    try:
        return state_digest(canonical_state(cm, legacy=True))
    except PayloadError:
        return ""


def _effective(cm: ConfusionMatrix) -> dict[str, Any]:
    return {"labels": same_counting(cm.spec.to_dict()), "gt_ids": cm.gt_ids, "pred_ids": cm.pred_ids,
            "per_image": cm.per_image, "on_unexpected": cm.on_unexpected}  # fmt: skip


def _names_fit(t: ConfusionMatrix, n: int, shape: tuple[int, ...], where: str) -> None:
    """Refuse image names the run's rules cannot take (HTTP 422, not a malformed body's 400)."""
    if not t.per_image:
        msg = (
            f"{where}: the masks name their images, but the run keeps no per-image rows "
            "(per_image false), so names could not stop an image from being counted twice; "
            "leave names out, or put them into a run created with per_image true"
        )
        raise IncompatibleMatrixError(msg)
    if n != n_images_of(shape):
        msg = (
            f"{where}: {n} image name(s) given for a batch of {n_images_of(shape)} image(s) "
            f"(masks of shape {shape}); give one name per image"
        )
        raise ShapeMismatchError(msg)


class Ledger:
    """Runs, their batches and totals; every change goes through one writer thread.

    Parameters
    ----------
    storage : Storage
        Where runs and batches are kept (read back here at start).
    on_batch : callable, optional
        Called by the writer after each commit with ``(outcome, pixels)`` per batch answered
        (``outcome`` is ``"counted"`` or ``"duplicate"``), for metrics.
    on_commit : callable, optional
        Called with ``(batches, seconds)`` after each commit of batches, for metrics.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        on_batch: Callable[[str, int], None] | None = None,
        on_commit: Callable[[int, float], None] | None = None,
    ) -> None:
        self.storage = storage
        self.runs: dict[str, Run] = {}
        for ix in storage.load():
            self.runs[ix.record.name] = self._run_from_index(ix)
        self._on_batch = on_batch
        self._on_commit = on_commit
        fault = os.environ.get(FAULT_ENV, "")
        self._crash_after = fault.removeprefix("exit-after-commit:") if fault else None
        self._queue: queue.SimpleQueue[tuple[object, _Waiter] | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._loop, name="segiou-writer", daemon=True)
        self._writer.start()

    @staticmethod
    def _run_from_index(ix: RunIndex) -> Run:
        r = ix.record
        template = ConfusionMatrix.from_dict(json.loads(r.template), source=f"run {r.name!r}")
        run = Run(r, template)
        run.batches = {key: (digest, seq) for key, digest, seq in ix.batches}
        run.keys = dict(ix.keys)
        run.images = dict(ix.images)
        run.number(run.batches, run.keys)
        return run

    # -- reads ---------------------------------------------------------------------------------
    def run(self, name: str) -> Run:
        """Return a run; raise :class:`~segiou.errors.NotFoundError` if there is none."""
        run = self.runs.get(check_run_name(name))
        if run is None:
            msg = f"run {name!r} does not exist; create it first (POST /v1/runs)"
            raise NotFoundError(msg)
        return run

    def open_runs(self) -> int:
        """Return the number of open runs."""
        return sum(r.record.status == "open" for r in list(self.runs.values()))

    def total(self, name: str) -> ConfusionMatrix:
        """Return the run's total state (never mutated afterwards: safe to read unlocked).

        The first call after a start merges the stored batch states, a few at a time; later
        calls fold the batches committed since.
        """
        return self._total(self.run(name))

    def _total(self, run: Run) -> ConfusionMatrix:
        return run.sums.read(lambda: run.record.seq,
                             lambda upto: self.storage.batch_states(run.name, upto),
                             run.template, f"stored batch of run {run.name!r}")  # fmt: skip

    def known(self, run: Run, key: str, tag: bytes) -> dict[str, Any] | None:
        """Return the reply to a batch whose body is the one counted under ``key``, or ``None``.

        ``tag`` is the body's :func:`body_digest`. Equal to the tag kept for the key (a retry
        of the same bytes), the batch is a duplicate, known without counting it again; any
        other body under the key is counted and compared by content (``None``).
        """
        with run.lock:
            seen = run.bodies.get(key)
            if seen is None or seen[:32] != tag or key not in run.batches:
                return None
            pixels, images = struct.unpack("<qq", seen[32:])
            return {"run": run.name, "key": key, "pixels": pixels, "images": images,
                    "outcome": "duplicate", "batches": run.record.batches}  # fmt: skip

    def _fold(self, run: Run) -> None:
        with contextlib.suppress(SegiouError):  # unreadable: a read says so
            self._total(run)

    # -- preparing a batch (any thread) ---------------------------------------------------------
    def prepare(
        self,
        run: Run,
        key: str,
        content_type: str,
        body: bytes | bytearray,
        limit: int | None = None,
        tag: bytes = b"",
    ) -> Prepared:
        """Read a batch body, count raw masks with the run's settings, and take its digest.

        ``limit`` bounds what the members of an npz body may hold once inflated (413 beyond).
        ``tag``, the body's :func:`body_digest`, is kept with the key once the batch is
        counted or found a duplicate (see :meth:`known`).

        Raises
        ------
        PayloadError, CheckpointError
            A malformed body.
        ShapeMismatchError, LabelDtypeError, LabelRangeError, IncompatibleMatrixError
            Masks or a state the run cannot take (nothing is stored): masks naming their images
            for a run without per-image rows, or with as many names as images, included.
        UsageError
            Image names that are not one distinct non-empty string per image.
        """
        where = f"batch {key!r} of run {run.name!r}"
        t = run.template
        if content_type in (CONTENT_JSON, CONTENT_STATE_NPZ):
            cm, kind = decode_state(body, content_type, where=where, limit=limit), "state"
            t.merge(cm)  # IncompatibleMatrixError, naming both settings
        else:
            gt, pred, names = decode_masks(body, content_type, where=where, limit=limit)
            if names is not None:  # 422, as for masks of a wrong shape or a state of other rows
                _names_fit(t, len(names), gt.shape, where)
            cm, kind = empty_like(t), "masks"
            cm.update(gt, pred, key=key, names=names)
        images: tuple[str, ...] = ()
        if cm.per_image:  # names identify images; labels (#0, key/0, 000000) never do
            table = cm.images
            rows = table.rows
            images = (tuple(table.names) if rows is None  # no rows: every name counts
                      else tuple(n for n, g in zip(rows.names, rows.given, strict=True) if g))  # fmt: skip
        if len(set(images)) != len(images):
            twice = sorted(n for n, c in Counter(images).items() if c > 1)
            msg = f"{where}: image name(s) {twice[:3]} appear more than once; name each image once"
            raise UsageError(msg)
        canonical = canonical_state(cm)
        return Prepared(run.name, key, run.incarnation, cm, state_digest(canonical),
                        pack_blob(canonical), kind, cm.n_pixels, cm.n_images,
                        tuple(sorted(cm.keys)), images,
                        footprint(cm.num_classes, len(canonical)), tag)  # fmt: skip

    # -- writes (through the writer) ------------------------------------------------------------
    def submit(self, op: object) -> Future[dict[str, Any]]:
        """Queue a :class:`Prepared` batch or an admin operation; the future holds the outcome."""
        fut: Future[dict[str, Any]] = Future()
        self._queue.put((op, fut))
        return fut

    def submit_async(self, op: object) -> asyncio.Future[dict[str, Any]]:
        """As :meth:`submit`, from an event loop: one wake-up of the loop per commit, not per batch.

        Call it on the loop's own thread.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._queue.put((op, (loop, fut)))
        return fut

    @staticmethod
    def _deliver(answers: list[tuple[_Waiter, dict[str, Any] | BaseException]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
        for waiter, value in answers:
            if isinstance(waiter, Future):
                if isinstance(value, BaseException):
                    waiter.set_exception(value)
                else:
                    waiter.set_result(value)
            else:
                by_loop.setdefault(waiter[0], []).append((waiter[1], value))
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                loop.call_soon_threadsafe(_settle, items)

    def stop(self) -> None:
        """Let the writer finish what is queued, then stop it."""
        self._queue.put(None)
        self._writer.join()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            group, stop = [item], False
            while len(group) < _GROUP:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                group.append(nxt)
            batches: list[tuple[Prepared, _Waiter]] = []
            for op, fut in group:
                if isinstance(op, Prepared):
                    batches.append((op, fut))
                    continue
                self._commit_batches(batches)  # in order: what came before an admin op first
                batches = []
                self._admin(op, fut)
            self._commit_batches(batches)
            if stop:
                return

    def _commit_batches(self, items: list[tuple[Prepared, _Waiter]]) -> None:
        if not items:
            return
        staged: dict[str, dict[str, Any]] = {}  # run -> its new batches, keys, names, totals
        answers: list[tuple[_Waiter, dict[str, Any] | SegiouError]] = []
        changes: list[Change] = []
        for prep, fut in items:
            try:
                answer, change = self._plan(prep, staged)
            except SegiouError as err:
                answers.append((fut, err))
                continue
            answers.append((fut, answer))
            if change is not None:
                changes.append(change)
        changes += [PutRun(st["record"]) for st in staged.values()]
        try:
            if changes:
                t0 = time.perf_counter()
                self.storage.commit(changes)
                if self._on_commit is not None:
                    self._on_commit(sum(isinstance(c, AddBatch) for c in changes),
                                    time.perf_counter() - t0)  # fmt: skip
        except Exception as err:  # noqa: BLE001 - any storage's error: nothing was applied
            msg = f"the database could not commit ({type(err).__name__}: {err}); retry"
            failed = ServiceStorageError(msg)
            answers = [(f, a if isinstance(a, SegiouError) else failed) for f, a in answers]
            staged = {}
        for name, st in staged.items():
            run = self.runs[name]
            with run.lock:
                run.record = st["record"]
                run.batches.update(st["batches"])
                run.keys.update(st["keys"])
                run.number(st["batches"], st["keys"])
                run.images.update(st["images"])
                fold = run.sums.committed(st["states"])
            if fold:
                threading.Thread(target=self._fold, args=(run,), daemon=True).start()
        self._remember(items, answers)  # before any reply: a retry after it is known
        if self._crash_after is not None and any(
            p.key == self._crash_after for p, _ in items
        ) and staged:  # fmt: skip
            os._exit(86)  # the test hook: committed, never answered
        if self._on_batch is not None:
            for _, reply in answers:
                if not isinstance(reply, SegiouError):
                    self._on_batch(reply["outcome"], reply["pixels"])
        self._deliver(answers)  # type: ignore[arg-type]

    def _remember(
        self,
        items: list[tuple[Prepared, _Waiter]],
        answers: list[tuple[_Waiter, dict[str, Any] | SegiouError]],
    ) -> None:
        """Keep the body tag of each batch counted or found a duplicate (see :meth:`known`)."""
        for (prep, _), (_, answer) in zip(items, answers, strict=True):
            run = self.runs.get(prep.run)
            if isinstance(answer, SegiouError) or not prep.tag or run is None:
                continue
            if run.incarnation == prep.incarnation:
                with run.lock:
                    run.bodies[prep.key] = prep.tag + struct.pack("<qq", prep.pixels, prep.images)

    def _plan(
        self, prep: Prepared, staged: dict[str, dict[str, Any]]
    ) -> tuple[dict[str, Any], Change | None]:
        run = self.runs.get(prep.run)
        if run is None or run.incarnation != prep.incarnation:
            msg = (
                f"run {prep.run!r} does not exist (any more); it was deleted while batch "
                f"{prep.key!r} was read"
            )
            raise NotFoundError(msg)
        st = staged.get(run.name)
        new = {} if st is None else st["batches"]
        prev = run.batches.get(prep.key) or new.get(prep.key)
        answer = {"run": run.name, "key": prep.key, "pixels": prep.pixels, "images": prep.images}
        if prev is not None:
            if prev[0] == prep.digest or prev[0] == _legacy_digest(prep.cm):
                batches = (st["record"] if st else run.record).batches
                return answer | {"outcome": "duplicate", "batches": batches}, None
            msg = (
                f"batch key {prep.key!r} of run {run.name!r} was counted before with other "
                f"content (digest {prev[0][:12]}..., this one {prep.digest[:12]}...); nothing "
                "changed. A key names one batch: put new data under a new key"
            )
            raise ConflictError(msg)
        if run.record.status != "open":
            msg = f"run {run.name!r} is closed; it takes no more batches (batch {prep.key!r})"
            raise ConflictError(msg)
        for inner in prep.keys:
            other = run.keys.get(inner) or (st["keys"].get(inner) if st else None)
            if other is not None:
                msg = (
                    f"batch {prep.key!r}: its state counts batch key {inner!r}, already counted "
                    f"in run {run.name!r} under batch {other!r}; nothing changed (a batch is "
                    "never counted twice)"
                )
                raise ConflictError(msg)
        for image in prep.names:
            other = run.images.get(image) or (st["images"].get(image) if st else None)
            if other is not None:
                msg = (
                    f"batch {prep.key!r}: image {image!r} was already counted in run "
                    f"{run.name!r} under batch {other!r}; nothing changed (an image is counted "
                    "once per run)"
                )
                raise ConflictError(msg)
        r = st["record"] if st else run.record
        if r.pixels + prep.pixels > _INT64_MAX:  # refused before the database sees it
            msg = (
                f"batch {prep.key!r}: run {run.name!r} holds {r.pixels:,} pixels; with this "
                f"batch's {prep.pixels:,} it would pass 2**63 - 1; nothing changed. Start "
                "another run"
            )
            raise CountOverflowError(msg)
        if st is None:
            st = staged[run.name] = {"record": run.record, "batches": {}, "keys": {},
                                     "images": {}, "states": []}  # fmt: skip
        r = st["record"]
        seq = r.seq + 1
        st["record"] = replace(r, batches=r.batches + 1, images=r.images + prep.images,
                               pixels=r.pixels + prep.pixels, seq=seq)  # fmt: skip
        st["batches"][prep.key] = (prep.digest, seq)
        st["keys"].update(dict.fromkeys(prep.keys, prep.key))
        st["images"].update(dict.fromkeys(prep.names, prep.key))
        st["states"].append((prep.cm, prep.size))
        change = AddBatch(BatchRecord(run.name, prep.key, seq, prep.digest, prep.kind, prep.pixels,
                                      prep.images, prep.blob, prep.keys, prep.names))  # fmt: skip
        return answer | {"outcome": "counted", "batches": r.batches + 1}, change

    def _admin(self, op: object, fut: _Waiter) -> None:
        answer: dict[str, Any] | BaseException
        try:
            answer = self._admin_op(op)
        except SegiouError as err:
            answer = err
        except Exception as err:  # noqa: BLE001 - any storage's error: nothing changed
            msg = f"the database could not commit ({type(err).__name__}: {err}); retry"
            answer = ServiceStorageError(msg)
        self._deliver([(fut, answer)])

    def _admin_op(self, op: object) -> dict[str, Any]:
        if isinstance(op, CreateRun):
            run = self.runs.get(op.settings["name"])
            if run is not None:
                mine, theirs = _effective(run.template), _effective(op.template)
                if mine != theirs:
                    diff = [k for k in mine if mine[k] != theirs[k]]
                    stored = json.loads(run.record.settings)
                    msg = (
                        f"run {run.name!r} exists with other settings ({', '.join(diff)} "
                        f"differ): it has {_show(stored)}, the request asks for "
                        f"{_show(op.settings)}; use another name, or delete the run first"
                    )
                    raise ConflictError(msg)
                return {"created": False, "run": run.summary()}
            rec = RunRecord(op.settings["name"], json.dumps(op.settings, sort_keys=True),
                            json.dumps(op.template.to_dict(), separators=(",", ":")),  # sent as it is
                            "open", op.now)  # fmt: skip
            self.storage.commit([PutRun(rec)])
            run = self.runs[rec.name] = Run(rec, op.template)
            return {"created": True, "run": run.summary()}
        run = self.run(op.name)  # type: ignore[attr-defined]
        if isinstance(op, CloseRun):
            if run.record.status != "closed":
                rec = replace(run.record, status="closed", closed=op.now)
                self.storage.commit([PutRun(rec)])
                with run.lock:
                    run.record = rec
            return {"run": run.summary()}
        self.storage.commit([DeleteRun(run.name)])
        del self.runs[run.name]
        return {"deleted": run.name}


def _settle(items: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for fut, value in items:
        if fut.cancelled():  # the client went away: the batch is committed all the same
            continue
        if isinstance(value, BaseException):
            fut.set_exception(value)
        else:
            fut.set_result(value)


def _show(settings: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in settings.items() if k != "name"}
    labels = shown.get("labels")
    if isinstance(labels, Mapping):
        shown["labels"] = (
            f"<spec {labels.get('name', '?')!r}, {len(labels.get('classes', []))} classes>"
        )
    return json.dumps(shown, sort_keys=True)


@dataclass(frozen=True)
class CreateRun:
    """Create a run (a no-op when one with the same effective settings exists)."""

    settings: dict[str, Any]
    template: ConfusionMatrix
    now: float


@dataclass(frozen=True)
class CloseRun:
    """Close a run: later batches are refused."""

    name: str
    now: float


@dataclass(frozen=True)
class DeleteRunOp:
    """Delete a run and its batches."""

    name: str
