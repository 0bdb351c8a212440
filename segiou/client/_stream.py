"""The streaming evaluator: count here, put keyed partial states in the background."""

from __future__ import annotations

import contextlib
import glob
import logging
import secrets
import threading
import time
import urllib.parse
import warnings
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, Self

from segiou.confusion import ConfusionMatrix
from segiou.errors import (
    CheckpointError,
    DuplicateBatchError,
    RefusedError,
    SegiouWarning,
    ServiceUnavailableError,
    UsageError,
)
from segiou.service.wire import check_key, check_run_name

__all__ = ["StreamingEvaluator"]

_LOG = logging.getLogger("segiou.client")

#: Most digits of a partial's number (a run's ``numbered`` holds numbers of every width). An
#: evaluator refuses to start, or a batch, rather than number a partial past it.
_SEQ_DIGITS = 19
#: Longest ``prefix``: its partials' keys (``<prefix>.<number>``) must be valid batch keys.
_MAX_PREFIX = 200 - len(".") - _SEQ_DIGITS


class _Server(Protocol):
    """What the evaluator needs of a :class:`~segiou.client.Client`."""

    run: str | None
    max_backoff: float

    def run_info(self, run: str | None = None) -> dict[str, Any]: ...

    def put_counts(
        self, cm: ConfusionMatrix, key: str, *, run: str | None = None, binary: bool | None = None
    ) -> dict[str, Any]: ...


class StreamingEvaluator:
    """Count batches here; put a keyed partial state every ``every`` batches or ``seconds``.

    A training or evaluation loop calls :meth:`update` per batch and never waits on the network:
    full partial states queue up and a background thread puts each under its own key
    (``<prefix>.000001``, ...), retrying a failed put under the same key until it is
    acknowledged, so a partial is never lost and never counted twice.

    Parameters
    ----------
    client : Client
        The server (a :class:`~segiou.client.Client`).
    run : str, optional
        The run (default: the client's); its settings are read from the server.
    every : int, default 50
        Batches per partial state.
    seconds : float, default 30
        A partial older than this is sent even if it has fewer batches.
    prefix : str, optional
        Key prefix of the partial states (default: random, unique to this evaluator), at most
        180 characters of a batch key (room for partial numbers of up to 19 digits). Give
        each process its own.
    spool : str or Path, optional
        A folder where each partial is saved until acknowledged, in a subfolder per server and
        run; partials of this run left there by a process that died are put first (under their
        keys, into this run) when an evaluator of the same run on the same server starts on
        it. Its own partials are numbered after the leftovers of its prefix, never over them.
        A partial it cannot save (a full disk) is sent all the same, with a warning (logged
        to ``segiou.client`` instead when the warning filters would raise it).

    Notes
    -----
    Partials (``<prefix>.<n>``) and batch keys the evaluator makes (``<prefix>/<n>``) are
    numbered after the highest the run already holds for the prefix (the run info's
    ``numbered``), so an evaluator restarted with the same prefix reuses no acknowledged key.

    Raises
    ------
    UsageError
        Bad ``every``, ``seconds`` or ``prefix`` (a valid batch key of at most 180 characters,
        leaving room for the partials' ``.<number>`` of up to 19 digits), or partials of the
        prefix already numbered up to the largest such number.
    RefusedError, ServiceUnavailableError
        The run's settings cannot be read from the server.
    """

    def __init__(
        self,
        client: _Server,
        *,
        run: str | None = None,
        every: int = 50,
        seconds: float = 30.0,
        prefix: str | None = None,
        spool: str | Path | None = None,
    ) -> None:
        if every < 1 or not seconds > 0:
            msg = f"every={every!r} must be >= 1 and seconds={seconds!r} > 0"
            raise UsageError(msg)
        if prefix and len(check_key(prefix)) > _MAX_PREFIX:
            msg = (
                f"prefix {prefix[:24]!r}... has {len(prefix)} characters; at most {_MAX_PREFIX}, "
                f"since its partials are put under keys <prefix>.000001, ..., numbered with up "
                f"to {_SEQ_DIGITS} digits, and a batch key has at most 200 characters"
            )
            raise UsageError(msg)
        self.client, self.every, self.seconds = client, every, seconds
        self.run = run if run is not None else client.run
        info = client.run_info(self.run)
        self._template = info["template"]
        self.prefix = prefix or f"s{secrets.token_hex(6)}"
        # one folder per server and run: a leftover goes back to the run it was sealed for
        server = urllib.parse.quote(str(getattr(client, "url", "") or "-"), safe="")
        self._spool = None if spool is None else Path(spool) / server / check_run_name(self.run)
        self._cond = threading.Condition()
        self._cm, self._n, self._since = self._empty(), 0, time.monotonic()
        # numbered after what the run holds: a restart with a fixed prefix reuses no key (the
        # acknowledged partials left the spool); a server without "numbered" knows of none
        numbered = info.get("numbered") or {}
        self._seq = int(numbered.get("batches", {}).get(self.prefix, 0))
        self._auto = int(numbered.get("inner", {}).get(self.prefix, -1)) + 1
        self._seen: set[str] = set()
        self._outbox: deque[tuple[str, ConfusionMatrix]] = deque()
        self.failed: list[tuple[str, ConfusionMatrix, RefusedError]] = []
        self.sent = 0
        self._closing = False  # the sender stops once the outbox is empty
        self._closed = False  # close() was called: update() refuses batches
        if self._spool is not None:
            self._spool.mkdir(parents=True, exist_ok=True)
            for f in sorted(self._spool.glob("*.json")):
                try:
                    left = ConfusionMatrix.load(f)
                except CheckpointError:
                    if not f.exists():  # another evaluator on the spool had it acknowledged
                        continue  # (or refused) between the listing and the reading
                    raise
                self._outbox.append((f.stem, left))
            self._seq = max(self._seq, _last_seq(self._spool, self.prefix))
            # the leftovers' own batch keys are not on the server yet: number after them too
            for _, left in self._outbox:
                self._seen.update(left.keys)
                for k in left.keys:
                    head, _, tail = k.rpartition("/")
                    if head == self.prefix and tail.isascii() and tail.isdigit():
                        self._auto = max(self._auto, int(tail) + 1)
            _warn_stray(self._spool.parent.parent)
        if len(str(self._seq + 1)) > _SEQ_DIGITS:
            raise UsageError(self._too_far())
        self._thread = threading.Thread(target=self._send_loop, name="segiou-stream", daemon=True)
        self._thread.start()

    def _too_far(self) -> str:
        return (
            f"partials of prefix {self.prefix[:24]!r}... are numbered up to {self._seq} (the "
            f"run's numbered, the spool, or this evaluator); the next would have more than "
            f"{_SEQ_DIGITS} digits, too long for a batch key: use another prefix"
        )

    def _empty(self) -> ConfusionMatrix:
        return ConfusionMatrix.from_dict(self._template, source=f"settings of run {self.run!r}")

    @property
    def pending(self) -> int:
        """Partial states not acknowledged yet (the one being filled not included)."""
        with self._cond:
            return len(self._outbox)

    def update(
        self,
        gt: object,
        pred: object,
        *,
        key: str | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        """Count one batch into the current partial state (as ``ConfusionMatrix.update``).

        Parameters
        ----------
        gt, pred : array_like
            Label masks of one shape.
        key : str, optional
            The batch key (default: ``<prefix>/<n>``); a key given twice is refused.
        names : sequence of str, optional
            Image names (per-image rows).

        Raises
        ------
        DuplicateBatchError
            ``key`` was given before to this evaluator.
        UsageError
            :meth:`close` was called: its sender has stopped, so the batch could not be sent
            (nothing of it is counted); count it with another evaluator. Or the partial the
            batch would go into would be numbered past 19 digits (see ``prefix``): nothing of
            it is counted either.
        RefusedError
            The server refused an earlier partial state (see :attr:`failed`).
        ShapeMismatchError, LabelDtypeError, LabelRangeError
            Bad masks (nothing of the batch is counted).

        Warns
        -----
        SegiouWarning
            The partial this batch sealed could not be saved to the spool (a full disk): the
            batch is counted and the partial queued and sent all the same, so this never raises
            once the batch is counted (doing it again would count it twice): when the warning
            filters make it an error, it is logged instead (logger ``segiou.client``).
        """
        self._raise_refusal()
        with self._cond:
            if self._closed and (key is None or str(key) not in self._seen):
                msg = (
                    f"batch {'(no key)' if key is None else repr(str(key))}: this evaluator is "
                    "closed (close() was called, its sender has stopped); the batch is not "
                    "counted. Count it with another evaluator (client.stream(...))"
                )
                raise UsageError(msg)
            if len(str(self._seq + 1)) > _SEQ_DIGITS:  # before it is counted, never after
                raise UsageError(self._too_far())
            if key is None:
                k, self._auto = f"{self.prefix}/{self._auto}", self._auto + 1
            else:
                k = str(key)
            if k in self._seen:
                msg = f"batch key {k!r} was given before to this evaluator; a batch counts once"
                raise DuplicateBatchError(msg)
            self._cm.update(gt, pred, key=k, names=names)
            self._seen.add(k)
            self._n += 1
            if self._n >= self.every or time.monotonic() - self._since >= self.seconds:
                self._seal(stacklevel=3)  # counted: from here on nothing raises (a retry of the
                # batch would count it twice); a partial the spool cannot save is only warned of

    def _seal(self, stacklevel: int = 2) -> None:
        """Queue the current partial under its key, then save it to the spool (if any).

        Never raises once the partial is queued: a failed save (a full disk) is a
        :class:`~segiou.errors.SegiouWarning` (``stacklevel`` as ``warnings.warn``'s, from
        here), since the partial's batches are counted and will be sent; raising would invite
        the caller to count them again.
        """
        if self._n == 0:
            return
        self._seq += 1
        if self._spool is not None:  # another process on this spool with this prefix
            with contextlib.suppress(OSError):  # unreadable: the number stays as it is
                self._seq = max(self._seq, _last_seq(self._spool, self.prefix) + 1)
        key = f"{self.prefix}.{self._seq:06d}"
        cm, self._cm, self._n, self._since = self._cm, self._empty(), 0, time.monotonic()
        self._outbox.append((key, cm))  # first: a failed save loses no batch (under the lock,
        self._cond.notify_all()  # the sender sees it once it is saved)
        if self._spool is not None:
            try:
                cm.save(self._spool / f"{key}.json")
            except Exception as err:  # noqa: BLE001 -- queued, not spooled: say so, never raise
                _warn_unspooled(key, err, stacklevel)

    def _send_loop(self) -> None:
        while True:
            with self._cond:
                while not self._outbox:
                    if self._closing:
                        return
                    if self._n and time.monotonic() - self._since >= self.seconds:
                        self._seal()
                        continue
                    self._cond.wait(timeout=min(self.seconds, 0.5))
                key, cm = self._outbox[0]
            try:
                self.client.put_counts(cm, key, run=self.run)
            except ServiceUnavailableError:
                time.sleep(self.client.max_backoff)  # never dropped: the same key again
                continue
            except RefusedError as err:  # retrying cannot help; keep it for the caller
                self._fail(key, cm, err)
                continue
            except Exception as err:  # noqa: BLE001 -- the thread must live: keep it, say why
                msg = (
                    f"partial state {key!r} was not sent ({type(err).__name__}: {err}); it is "
                    "kept in .failed (and the spool, if any): put it again with put_counts"
                )
                self._fail(key, cm, RefusedError(msg, status=0, error=type(err).__name__))
                continue
            if self._spool is not None:  # first: flush() returns once the outbox is empty
                with contextlib.suppress(OSError):  # (left, it is put again later: a duplicate)
                    (self._spool / f"{key}.json").unlink(missing_ok=True)
            with self._cond:
                self._outbox.popleft()
                self.sent += 1
                self._cond.notify_all()

    def _fail(self, key: str, cm: ConfusionMatrix, err: RefusedError) -> None:
        if self._spool is not None:  # first: flush() returns once the outbox is empty
            f = self._spool / f"{key}.json"
            with contextlib.suppress(OSError):  # gone: another evaluator on the spool took it
                f.replace(f.with_suffix(".refused"))
        with self._cond:
            self._outbox.popleft()
            self.failed.append((key, cm, err))
            self._cond.notify_all()

    def _raise_refusal(self) -> None:
        if self.failed:
            key, _, err = self.failed[0]
            msg = f"the server refused partial state {key!r} (kept in .failed): {err}"
            raise RefusedError(msg, status=err.status, error=err.error)

    def flush(self, timeout: float | None = None) -> None:
        """Send the current partial state now and wait until every partial is acknowledged.

        Parameters
        ----------
        timeout : float, optional
            Seconds to wait at most (default: as long as it takes).

        Raises
        ------
        ServiceUnavailableError
            Not all acknowledged within ``timeout`` (they stay queued; call again).
        RefusedError
            The server refused a partial state (see :attr:`failed`).

        Warns
        -----
        SegiouWarning
            The partial sealed now could not be saved to the spool; it is sent all the same
            (logged instead when the warning filters make it an error, as in :meth:`update`).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._seal(stacklevel=3)
            while self._outbox:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    keys = [k for k, _ in self._outbox]
                    msg = (
                        f"{len(keys)} partial state(s) not acknowledged within {timeout} s "
                        f"(keys {keys[:3]}...); they stay queued and are retried: call "
                        "flush() or close() again"
                    )
                    raise ServiceUnavailableError(msg)
                self._cond.wait(timeout=left)
        self._raise_refusal()

    def close(self, timeout: float | None = None) -> None:
        """Send what is left, wait until it is acknowledged (as :meth:`flush`), then stop.

        From the call on, :meth:`update` refuses batches. If the wait times out
        (:class:`~segiou.errors.ServiceUnavailableError`), the partials stay queued and are
        retried: call :meth:`close` (or :meth:`flush`) again. Once closed, :meth:`close` and
        :meth:`flush` return at once.
        """
        with self._cond:
            self._closed = True  # first: a batch counted after the flush would never be sent
        self.flush(timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _last_seq(spool: Path, prefix: str) -> int:
    """Return the highest number of a partial of ``prefix`` in ``spool`` (waiting or refused)."""
    last = 0
    for f in spool.glob(f"{glob.escape(prefix)}.*"):
        number = f.name[len(prefix) + 1 :].split(".", 1)[0]
        digits = number.isascii() and number.isdigit() and len(number) <= _SEQ_DIGITS
        if f.suffix in (".json", ".refused") and digits:
            last = max(last, int(number))
    return last


def _warn_unspooled(key: str, err: Exception, stacklevel: int) -> None:
    """Warn that a counted, queued partial is not in the spool; never raise, whatever the filters.

    Under ``-W error`` (pytest's ``filterwarnings = error``) ``warnings.warn`` raises: from
    ``update``/``flush`` the caller would count the batch again, and in the sender thread the
    thread would die with the partial unsent. The warning is then logged instead
    (``segiou.client``, level WARNING).
    """
    msg = (
        f"partial state {key!r} could not be saved to the spool ({type(err).__name__}: {err}); "
        "its batches are counted and it is queued and sent all the same (do not count them "
        "again), but it would not survive the death of this process"
    )
    try:
        warnings.warn(msg, SegiouWarning, stacklevel=stacklevel + 1)
    except Exception as raised:  # noqa: BLE001 -- a filter made it an error: counted, so log it
        _LOG.warning("SegiouWarning (logged: the warning filters raise %s): %s",
                     type(raised).__name__, msg)  # fmt: skip


def _warn_stray(spool: Path) -> None:
    """Warn of partials in the spool's own folder (an older layout: their run is not known)."""
    stray = sorted(f.name for f in spool.glob("*.json") if f.is_file())
    if stray:
        msg = (
            f"{len(stray)} partial state(s) in {str(spool)!r} itself ({', '.join(stray[:3])}"
            f"{', ...' if len(stray) > 3 else ''}) do not say their run and are not sent; put "
            "each into its run with Client.put_counts(ConfusionMatrix.load(f), key=<file stem>)"
        )
        warnings.warn(msg, SegiouWarning, stacklevel=3)
