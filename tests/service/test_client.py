"""The client: retries (against a stub server), the streaming evaluator (flush every N batches,
every T seconds, at close; a failed flush retried under the same key), results read back."""

from __future__ import annotations

import http.server
import json
import logging
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote

import numpy as np
import pytest

from segiou import ConfusionMatrix, evaluate
from segiou.client import Client, StreamingEvaluator, result_from_dict
from segiou.errors import (
    CheckpointError,
    DuplicateBatchError,
    OutputError,
    RefusedError,
    SegiouWarning,
    ServiceUnavailableError,
    UsageError,
)
from segiou.testing.service import ServerProcess
from segiou.testing.synthetic import cityscapes_like

K = 19


def batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    return cityscapes_like(2, 16, 24, seed=seed)


def settings() -> dict[str, object]:
    return {"ignore_index": 255, "per_image": True}


# -- retries, against a stub that fails as told -------------------------------------------------
class _Stub(http.server.BaseHTTPRequestHandler):
    script: ClassVar[list[int]] = []
    seen: ClassVar[list[tuple[str, str, bytes]]] = []
    reply: ClassVar[bytes | None] = None  # instead of the JSON below

    def _answer(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        type(self).seen.append((self.command, self.path, body))
        status = type(self).script.pop(0) if type(self).script else 200
        doc = {"outcome": "counted", "error": "ConflictError", "message": "no: stub says so"}
        data = json.dumps(doc).encode() if type(self).reply is None else type(self).reply
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("Location", "https://elsewhere.example/v1/runs")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[tuple[str, type[_Stub]]]:
    class Handler(_Stub):
        script: ClassVar[list[int]] = []
        seen: ClassVar[list[tuple[str, str, bytes]]] = []
        reply: ClassVar[bytes | None] = None

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", Handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_5xx_replies_are_retried_with_the_same_request(stub) -> None:
    url, handler = stub
    handler.script = [503, 500, 502]
    cm = ConfusionMatrix(3).update(np.zeros(4, np.uint8), np.ones(4, np.uint8), key="a")
    with Client(url, run="r", retries=3, backoff=0.01) as c:
        assert c.put_counts(cm, "k")["outcome"] == "counted"
    assert len(handler.seen) == 4
    assert len({(m, p, b) for m, p, b in handler.seen}) == 1  # the same key, the same body


def test_retries_give_up_with_a_clear_error_and_4xx_is_not_retried(stub) -> None:
    url, handler = stub
    handler.script = [503] * 5
    with Client(url, run="r", retries=2, backoff=0.01) as c:
        with pytest.raises(ServiceUnavailableError, match="no answer after 3 attempt"):
            c.runs()
        handler.script, handler.seen[:] = [409], []
        with pytest.raises(RefusedError) as err:
            c.runs()
    assert (err.value.status, err.value.error) == (409, "ConflictError")
    assert "no: stub says so" in str(err.value)
    assert len(handler.seen) == 1


@pytest.mark.parametrize("status", [301, 307, 308])
def test_a_redirect_is_not_an_acknowledgement(stub, status: int) -> None:
    """segiou's server never redirects: a 3xx came from something else, and stored nothing."""
    url, handler = stub
    handler.script = [status]
    cm = ConfusionMatrix(3).update(np.zeros(4, np.uint8), np.ones(4, np.uint8), key="a")
    with (
        Client(url, run="r", retries=3, backoff=0.01) as c,
        pytest.raises(RefusedError, match=rf"redirected \({status} to https://elsewhere") as err,
    ):
        c.put_counts(cm, "k")
    assert (err.value.status, err.value.error) == (status, "Redirect")
    assert len(handler.seen) == 1


def test_a_reply_that_is_not_segious_json_is_not_an_acknowledgement(stub) -> None:
    url, handler = stub
    handler.reply = b"<html>ok</html>"
    cm = ConfusionMatrix(3).update(np.zeros(4, np.uint8), np.ones(4, np.uint8), key="a")
    with Client(url, run="r", retries=3, backoff=0.01) as c:
        with pytest.raises(RefusedError, match="not segiou's: '<html>ok</html>'") as err:
            c.put_counts(cm, "k")
        assert err.value.error == "UnreadableReply"
        with pytest.raises(RefusedError, match="not segiou's"):
            c.runs()
        handler.reply = b"[1, 2]"  # JSON, but not segiou's object
        with pytest.raises(RefusedError, match="not segiou's"):
            c.health()
        handler.reply = b'{"status": "ok"}'  # an object, but no outcome: not an acknowledgement
        with pytest.raises(RefusedError, match="not segiou's"):
            c.put_counts(cm, "k")
        handler.reply = b"<html>a,b</html>"  # served as JSON, not as CSV
        with pytest.raises(RefusedError, match="not segiou's"):
            c.images_csv()


def test_connection_errors_are_retried_then_reported(tmp_path: Path) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    t0 = time.perf_counter()
    client = Client(f"http://127.0.0.1:{port}", retries=3, backoff=0.01)
    with client, pytest.raises(ServiceUnavailableError, match="ConnectionRefusedError"):
        client.health()
    assert time.perf_counter() - t0 < 5


def test_client_arguments_are_checked() -> None:
    with pytest.raises(UsageError, match="not an http"):
        Client("ftp://x")
    with pytest.raises(UsageError, match="run name"):
        Client("http://127.0.0.1:1", run="a b")
    with Client("http://127.0.0.1:1") as c, pytest.raises(UsageError, match="no run given"):
        c.state()


# -- the streaming evaluator --------------------------------------------------------------------
def test_a_prefix_too_long_for_its_partial_keys_is_refused_at_once() -> None:
    """A prefix of 181-200 characters is a valid key, but its partials' keys (+ '.000001', up to
    19 digits) are not always: every partial (from the millionth for 193) failed later."""
    srv = _FakeServer(lambda key: None)
    for bad in ("p" * 181, "p" * 193, "p" * 200, "p" * 201, "a/b"):
        with pytest.raises(UsageError, match=r"prefix|batch key") as err:
            StreamingEvaluator(srv, prefix=bad)  # type: ignore[arg-type]
        assert ("at most 180" in str(err.value)) == (len(bad) in (181, 193, 200))
    ev = StreamingEvaluator(srv, every=1, prefix="p" * 180)  # type: ignore[arg-type]
    ev.update(*batch(0))
    ev.close(timeout=30)
    assert list(srv.got) == ["p" * 180 + ".000001"]
    assert not ev.failed


@pytest.mark.parametrize("last", [999_999, 10**18 - 1])
def test_a_prefix_leaves_room_for_the_largest_partial_number(client, run_name, last: int) -> None:
    """The 193-character cap left room for 6 digits only: with a fixed prefix the millionth
    partial's key had 201 characters, was refused (400) and failed late. The run's numbered
    holds numbers of up to 18 digits: the next has at most 19, and fits."""
    client.create_run(run_name, K, **settings())
    prefix = "p" * 180
    client.put_counts(ConfusionMatrix(K, **settings()).update(*batch(0), key="x"),  # type: ignore[arg-type]
                      f"{prefix}.{last}", run=run_name)  # fmt: skip
    ev = client.stream(run_name, every=1, prefix=prefix)
    ev.update(*batch(1))
    ev.close(timeout=30)
    assert not ev.failed
    assert ev.sent == 1
    info = client.run_info(run_name)
    assert (info["batches"], info["images"]) == (2, 4)


def test_partials_numbered_up_to_the_largest_number_are_refused_at_once(tmp_path: Path) -> None:
    """Only a spool's file names can number a prefix past 19 digits (the run's numbered holds
    18): refused when the evaluator starts, never a partial that fails later."""
    folder = tmp_path / "-" / "r"
    folder.mkdir(parents=True)
    (folder / f"rank0.{10**19 - 1}.refused").write_text("{}")
    with pytest.raises(UsageError, match=r"numbered up to 9999999999999999999 .* use another"):
        StreamingEvaluator(_FakeServer(lambda key: None), prefix="rank0", spool=tmp_path)  # type: ignore[arg-type]
    (folder / f"rank0.{10**19 - 1}.refused").unlink()
    (folder / f"rank0.{10**19 - 2}.refused").write_text("{}")
    (folder / f"rank0.{10**25}.refused").write_text("{}")  # no partial number: not counted
    srv = _FakeServer(lambda key: None)
    ev = StreamingEvaluator(srv, every=1, prefix="rank0", spool=tmp_path)  # type: ignore[arg-type]
    ev.update(*batch(0))
    ev.close(timeout=30)
    assert list(srv.got) == [f"rank0.{10**19 - 1}"]


def test_evaluator_flushes_every_n_batches_every_t_seconds_and_at_close(client, run_name) -> None:
    client.create_run(run_name, K, **settings())  # type: ignore[arg-type]
    eager = ConfusionMatrix(K, **settings())  # type: ignore[arg-type]
    ev = client.stream(run_name, every=3, seconds=0.3, prefix="ev")
    for i in range(6):
        g, p = batch(i)
        ev.update(g, p, key=f"b{i}")
        eager.update(g, p, key=f"b{i}")
    deadline = time.monotonic() + 20
    while client.run_info(run_name)["batches"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.run_info(run_name)["batches"] == 2  # two partials of three batches each
    g, p = batch(6)
    ev.update(g, p)  # no key: the evaluator names it (and its images) after its prefix
    eager.update(g, p, key="ev/0")
    while client.run_info(run_name)["batches"] < 3 and time.monotonic() < deadline:
        time.sleep(0.05)  # sent after 0.3 s, without close
    assert client.run_info(run_name)["batches"] == 3
    g, p = batch(7)
    ev.update(g, p, key="b7")
    eager.update(g, p, key="b7")
    ev.close()
    assert ev.sent == 4
    assert ev.pending == 0
    assert client.state(run_name) == eager
    with pytest.raises(DuplicateBatchError):
        ev.update(g, p, key="b7")


def test_a_failed_flush_is_retried_under_the_same_key(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data").start()
    try:
        with Client(srv.url, retries=1, backoff=0.01, max_backoff=0.05) as c:
            c.create_run("r", K, **settings())  # type: ignore[arg-type]
            eager = ConfusionMatrix(K, **settings())  # type: ignore[arg-type]
            ev = c.stream("r", every=2, seconds=60)
            srv.kill()
            for i in range(5):
                g, p = batch(i)
                ev.update(g, p, key=f"k{i}")  # never waits on the network
                eager.update(g, p, key=f"k{i}")
            with pytest.raises(ServiceUnavailableError, match="not acknowledged within"):
                ev.flush(timeout=0.5)
            assert ev.pending == 3  # kept, not lost
            srv.start()
            ev.close(timeout=120)
            assert c.state() == eager
            assert c.run_info()["batches"] == 3
    finally:
        srv.stop()


def test_a_refused_partial_is_kept_and_raised(client, run_name) -> None:
    client.create_run(run_name, K, **settings())  # type: ignore[arg-type]
    g, p = batch(1)
    client.put_masks(g, p, "taken", names=["img-a", "img-b"])
    ev = client.stream(run_name, every=1)
    ev.update(g, p, key="other", names=["img-a", "img-b"])  # images counted under "taken"
    with pytest.raises(RefusedError, match="image 'img-a' was already counted"):
        ev.flush(timeout=60)
    assert [k for k, _, _ in ev.failed] == [f"{ev.prefix}.000001"]
    with pytest.raises(RefusedError):
        ev.update(*batch(2), key="next")
    assert client.run_info(run_name)["batches"] == 1


@pytest.mark.parametrize("spool", [True, False])
def test_an_evaluator_restarted_with_its_prefix_reuses_no_acknowledged_key(
    client, run_name, tmp_path: Path, spool: bool
) -> None:
    """The acknowledged partials left the spool: the restarted evaluator numbers after the run's
    own keys of the prefix (partials and the batch keys it made), so its data is counted."""
    client.create_run(run_name, K, **settings())  # type: ignore[arg-type]
    eager = ConfusionMatrix(K, **settings())  # type: ignore[arg-type]
    where = {"spool": tmp_path} if spool else {}
    for life in range(2):
        ev = client.stream(run_name, every=1, prefix="rank0", **where)  # type: ignore[arg-type]
        for i in range(2):
            g, p = batch(10 * life + i)
            ev.update(g, p)  # keys rank0/0, rank0/1, then rank0/2, rank0/3
            eager.update(g, p, key=f"rank0/{2 * life + i}")
        ev.close(timeout=60)
        assert not ev.failed
    assert client.run_info(run_name)["batches"] == 4
    assert client.run_info(run_name)["numbered"] == {"batches": {"rank0": 4},
                                                     "inner": {"rank0": 3}}  # fmt: skip
    assert client.state(run_name) == eager


class _FakeServer:
    """What the evaluator needs of a client, in this process: ``put`` decides each reply."""

    run = "r"
    max_backoff = 0.01

    def __init__(self, put: object) -> None:
        self.put, self.got = put, {}

    def run_info(self, run: str | None = None) -> dict[str, object]:
        return {"template": ConfusionMatrix(K, **settings()).to_dict()}  # type: ignore[arg-type]

    def put_counts(self, cm: ConfusionMatrix, key: str, **_: object) -> dict[str, object]:
        self.put(key)  # type: ignore[operator]
        self.got[key] = cm
        return {"outcome": "counted"}


def _down(key: str) -> None:
    msg = "down"
    raise ServiceUnavailableError(msg)


def test_a_restart_on_a_spool_numbers_after_the_leftovers_batch_keys(tmp_path: Path) -> None:
    """A partial sealed while the server was down holds the batch key rank0/0; the evaluator
    restarted on the spool numbered its own batches from rank0/0 again, so the server refused
    its next partial (409) and the batch was lost."""
    down = _FakeServer(_down)
    first = StreamingEvaluator(down, every=100, prefix="rank0", spool=tmp_path)  # type: ignore[arg-type]
    g, p = batch(1)
    first.update(g, p)
    with pytest.raises(ServiceUnavailableError):
        first.flush(timeout=0.05)  # sealed and spooled as rank0.000001; then the process dies
    still_down = StreamingEvaluator(_FakeServer(_down), every=100, prefix="rank0",
                                    spool=tmp_path)  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(DuplicateBatchError):  # a key a leftover holds is refused at once
        still_down.update(g, p, key="rank0/0")
    up = _FakeServer(lambda key: None)
    second = StreamingEvaluator(up, every=100, prefix="rank0", spool=tmp_path)  # type: ignore[arg-type]
    second.update(g, p)
    second.close(timeout=10)
    assert sorted(up.got) == ["rank0.000001", "rank0.000002"]
    assert up.got["rank0.000001"].keys == {"rank0/0"}
    assert up.got["rank0.000002"].keys == {"rank0/1"}


def test_an_unexpected_error_in_the_sender_keeps_the_partial_and_the_thread(tmp_path: Path) -> None:
    """The background thread survives any error: the partial goes to .failed (and stays in
    the spool as .refused), flush() says so, and later partials are still sent."""
    calls = []

    def put(key: str) -> None:
        calls.append(key)
        if len(calls) == 1:
            msg = "boom"
            raise KeyError(msg)

    srv = _FakeServer(put)
    ev = StreamingEvaluator(srv, every=1, prefix="p", spool=tmp_path)
    ev.update(*batch(0), key="a")
    with pytest.raises(RefusedError, match=r"'p\.000001' was not sent \(KeyError: 'boom'\)") as err:
        ev.flush(timeout=30)
    assert (err.value.status, err.value.error) == (0, "KeyError")
    assert [k for k, _, _ in ev.failed] == ["p.000001"]
    assert sorted(f.name for f in (tmp_path / "-" / "r").iterdir()) == ["p.000001.refused"]
    assert ev._thread.is_alive()
    ev.failed.clear()  # the caller took it over
    ev.update(*batch(1), key="b")
    ev.close(timeout=30)
    assert list(srv.got) == ["p.000002"]


def test_the_sender_survives_its_spool_files_vanishing_or_refusing(tmp_path: Path,
                                                                   monkeypatch) -> None:  # fmt: skip
    """Another evaluator on the spool took a refused partial's file (both were sending it), or
    a file cannot be deleted: the thread goes on (it died, and flush() waited for ever)."""

    def put(key: str) -> None:
        if key == "p.000001":
            (tmp_path / "-" / "r" / f"{key}.json").unlink()  # the other evaluator got there first
            msg = "taken"
            raise RefusedError(msg, status=409, error="ConflictError")

    srv = _FakeServer(put)
    ev = StreamingEvaluator(srv, every=1, prefix="p", spool=tmp_path)
    ev.update(*batch(0), key="a")
    with pytest.raises(RefusedError, match="taken"):
        ev.flush(timeout=30)
    ev.failed.clear()

    def deny(self: Path, missing_ok: bool = False) -> None:
        msg = "read-only spool"
        raise PermissionError(msg)

    monkeypatch.setattr(Path, "unlink", deny)
    ev.update(*batch(1), key="b")
    ev.flush(timeout=30)  # acknowledged; the file stays (put again later: a duplicate)
    assert ev._thread.is_alive()
    assert list(srv.got) == ["p.000002"]
    assert (tmp_path / "-" / "r" / "p.000002.json").exists()
    monkeypatch.undo()
    ev.close(timeout=30)


def test_a_partial_the_spool_cannot_save_is_sent_all_the_same(tmp_path: Path,
                                                              monkeypatch) -> None:  # fmt: skip
    srv = _FakeServer(lambda key: None)
    ev = StreamingEvaluator(srv, every=1, prefix="p", spool=tmp_path)

    def full(self: ConfusionMatrix, path: object) -> None:
        msg = "No space left on device"
        raise OSError(msg)

    monkeypatch.setattr(ConfusionMatrix, "save", full)
    with pytest.warns(SegiouWarning, match=r"'p\.000001' could not be saved to the spool .*No "
                      r"space left.*sent all the same \(do not count them again\)"):  # fmt: skip
        ev.update(*batch(0), key="a")  # the caller hears of it ...
    ev.close(timeout=30)
    assert list(srv.got) == ["p.000001"]  # ... and the batch is not lost
    assert srv.got["p.000001"] == ConfusionMatrix(K, **settings()).update(*batch(0), key="a")  # type: ignore[arg-type]


def _full(self: ConfusionMatrix, path: object) -> None:
    msg = f"cannot write {path} (No space left on device); nothing was changed there"
    raise OutputError(msg)


@pytest.mark.parametrize("where", ["update", "flush"])
def test_a_spool_that_cannot_save_never_makes_a_retried_batch_count_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """update() (and flush()) raised OutputError ("nothing was changed there") when the sealed
    partial could not be saved, although its batch was counted and queued: a loop that did the
    batch again counted it twice. Now they warn (the batch is counted, the partial sent)."""
    srv = _FakeServer(lambda key: None)
    ev = StreamingEvaluator(srv, every=1 if where == "update" else 100, prefix="p",  # type: ignore[arg-type]
                            spool=tmp_path)  # fmt: skip
    monkeypatch.setattr(ConfusionMatrix, "save", _full)
    g, p = batch(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # a loop that does a batch again until the call returns
            try:
                ev.update(g, p)
                if where == "flush":
                    ev.flush(timeout=30)
                break
            except OutputError:
                continue
    ev.close(timeout=30)
    assert list(srv.got) == ["p.000001"]  # one partial, holding the batch once
    assert srv.got["p.000001"] == ConfusionMatrix(K, **settings()).update(g, p, key="p/0")  # type: ignore[arg-type]
    assert [(w.category, w.filename) for w in caught] == [(SegiouWarning, __file__)]
    assert "could not be saved to the spool" in str(caught[0].message)


@pytest.mark.parametrize("where", ["update", "flush", "thread"])
def test_a_spool_that_cannot_save_is_never_an_error_even_when_warnings_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """With warnings turned into errors (-W error, this project's filterwarnings = error), the
    warning was raised from update()/flush() after the batch was counted (a retry counted it
    twice), and from the sender thread's timed seal, ending the thread (the partial unsent)."""
    srv = _FakeServer(lambda key: None)
    every, seconds = {"update": (1, 30.0), "flush": (100, 30.0), "thread": (100, 1.0)}[where]
    ev = StreamingEvaluator(srv, every=every, seconds=seconds, prefix="p",  # type: ignore[arg-type]
                            spool=tmp_path)  # fmt: skip
    monkeypatch.setattr(ConfusionMatrix, "save", _full)
    g, p = batch(0)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="segiou.client"):
        warnings.simplefilter("error")
        for _ in range(3):  # a loop that does a batch again until the call returns
            try:
                ev.update(g, p)
                if where == "flush":
                    ev.flush(timeout=10)
                break
            except Exception:  # noqa: BLE001, S112 -- what such a loop does
                continue
        deadline = time.monotonic() + 10  # the thread seals it 1 s after the evaluator began
        while where == "thread" and not srv.got and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ev._thread.is_alive()
    ev.close(timeout=10)
    assert list(srv.got) == ["p.000001"]  # one partial, holding the batch once
    assert srv.got["p.000001"] == ConfusionMatrix(K, **settings()).update(g, p, key="p/0")  # type: ignore[arg-type]
    logged = [r for r in caplog.records if "could not be saved to the spool" in r.getMessage()]
    assert len(logged) == 1
    assert logged[0].name == "segiou.client"
    assert "logged: the warning filters raise SegiouWarning" in logged[0].getMessage()


def test_a_spool_never_numbers_a_partial_over_a_leftover_of_its_prefix(tmp_path: Path) -> None:
    """Two processes in turn with one prefix on one spool, the server down for both: the second
    numbers its partial after the first's leftover, and a third sends both."""
    spool = tmp_path / "spool"
    first = StreamingEvaluator(_FakeServer(_down), every=1, prefix="rank0", spool=spool)
    first.update(*batch(0), key="img-a", names=["a0", "a1"])  # sealed, never sent
    second = StreamingEvaluator(_FakeServer(_down), every=1, prefix="rank0", spool=spool)
    second.update(*batch(1), key="img-b", names=["b0", "b1"])
    folder = spool / "-" / "r"  # (one folder per server and run: "-" for no URL)
    assert sorted(f.name for f in folder.iterdir()) == ["rank0.000001.json", "rank0.000002.json"]
    (folder / "rank0.000001.json").replace(folder / "rank0.000001.refused")  # still counts
    third = StreamingEvaluator(_FakeServer(_down), every=1, prefix="rank0", spool=spool)
    third.update(*batch(2), key="img-c", names=["c0", "c1"])
    assert (folder / "rank0.000003.json").exists()
    (folder / "rank0.000001.refused").replace(folder / "rank0.000001.json")
    srv = _FakeServer(lambda key: None)
    StreamingEvaluator(srv, prefix="rank0", spool=spool).close(timeout=30)
    assert sorted(srv.got) == ["rank0.000001", "rank0.000002", "rank0.000003"]
    assert [srv.got[f"rank0.00000{i + 1}"].images.names for i in range(3)] == [
        ["a0", "a1"], ["b0", "b1"], ["c0", "c1"]]  # fmt: skip


def test_a_leftover_goes_back_to_its_own_run(tmp_path: Path) -> None:
    """A partial sealed for run A and left in the spool is not put into run B by an evaluator
    of B on the same spool (it was: A's images were counted in B); A's next evaluator sends it.
    Partials in the spool's own folder (an older layout) do not say their run: not sent, and
    said so."""
    a_down, b_srv = _FakeServer(_down), _FakeServer(lambda key: None)
    a_down.run = "epochA"
    b_srv.run = "epochB"
    StreamingEvaluator(a_down, every=1, prefix="pa", spool=tmp_path).update(*batch(0), key="a")
    ConfusionMatrix(K, **settings()).save(tmp_path / "old.000001.json")  # type: ignore[arg-type]
    with pytest.warns(SegiouWarning, match="1 partial state\\(s\\) in .* do not say their run"):
        StreamingEvaluator(b_srv, prefix="pb", spool=tmp_path).close(timeout=30)
    assert b_srv.got == {}
    a_srv = _FakeServer(lambda key: None)
    a_srv.run = "epochA"
    with pytest.warns(SegiouWarning):
        StreamingEvaluator(a_srv, prefix="pa2", spool=tmp_path).close(timeout=30)
    assert list(a_srv.got) == ["pa.000001"]


def test_a_leftover_is_not_sent_to_a_run_of_the_same_name_on_another_server(tmp_path):
    """The spool keys its folders by server and run: run 'val' on server B does not receive a
    leftover sealed for run 'val' on server A."""
    a_down, b_srv, a_up = (
        _FakeServer(_down),
        _FakeServer(lambda key: None),
        _FakeServer(lambda k: None),
    )
    a_down.url = a_up.url = "http://127.0.0.1:1"
    b_srv.url = "http://127.0.0.1:2"
    StreamingEvaluator(a_down, every=1, prefix="pa", spool=tmp_path).update(*batch(0), key="a")
    StreamingEvaluator(b_srv, prefix="pb", spool=tmp_path).close(timeout=30)
    assert b_srv.got == {}
    StreamingEvaluator(a_up, prefix="pa2", spool=tmp_path).close(timeout=30)
    assert list(a_up.got) == ["pa.000001"]


_SPOOLER = """
import os, signal, sys
from segiou.client import Client
from segiou.testing.synthetic import cityscapes_like
c = Client(sys.argv[1], retries=0)
ev = c.stream("r", every=2, spool=sys.argv[2], prefix="dead")
os.kill(int(sys.argv[3]), signal.SIGKILL)  # the server dies: nothing can be sent
for i in range(4):
    g, p = cityscapes_like(2, 16, 24, seed=i)
    ev.update(g, p, key=f"k{i}")
os._exit(0)  # dies with both partials spooled, maybe unsent
"""


def test_a_spooled_partial_survives_the_death_of_its_process(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data").start()
    spool = tmp_path / "spool"
    try:
        with Client(srv.url, retries=0, run="r") as c:
            c.create_run("r", K, **settings())  # type: ignore[arg-type]
            assert srv.proc is not None
            subprocess.run([sys.executable, "-c", _SPOOLER, srv.url, str(spool),
                            str(srv.proc.pid)], check=True, timeout=120)  # fmt: skip
            assert srv.kill() == -9
            assert sorted(f.name for f in (spool / quote(srv.url, safe="") / "r").iterdir()) == [
                "dead.000001.json", "dead.000002.json"]  # fmt: skip
            srv.start()
            c.stream("r", spool=spool).close(timeout=120)
            eager = ConfusionMatrix(K, **settings())  # type: ignore[arg-type]
            for i in range(4):
                eager.update(*cityscapes_like(2, 16, 24, seed=i), key=f"k{i}")
            assert c.state() == eager
            assert list((spool / quote(srv.url, safe="") / "r").iterdir()) == []
    finally:
        srv.stop()


# -- results read back --------------------------------------------------------------------------
@pytest.mark.parametrize("preset", ["segiou", "cityscapes", "detectron2", "sklearn_all_labels"])
@pytest.mark.parametrize("beta", [None, 0.5])
def test_result_from_dict_round_trips(preset: str, beta: float | None) -> None:
    cm = ConfusionMatrix("cityscapes").update(*cityscapes_like(2, 32, 64, seed=3), key="a")
    r = evaluate(cm, preset=preset, beta=beta)
    back = result_from_dict(json.loads(r.to_json()))
    assert back.to_dict() == r.to_dict()
    assert back.miou == pytest.approx(r.miou, nan_ok=True)
    with pytest.raises(UsageError, match=r"not a segiou\.result"):
        result_from_dict({"format": "segiou.confusion"})


def test_a_batch_after_close_is_refused_and_close_again_returns() -> None:
    """update() after close() was taken into a partial that the stopped sender never sent
    (without a spool the batch was lost silently), and flush()/close() then waited for ever."""
    srv = _FakeServer(lambda key: None)
    ev = StreamingEvaluator(srv, every=1, prefix="p")  # type: ignore[arg-type]
    ev.update(*batch(0), key="a")
    ev.close(timeout=30)
    for key in ("b", None):
        with pytest.raises(UsageError, match=r"this evaluator is closed .* not counted"):
            ev.update(*batch(1), key=key)
    with pytest.raises(DuplicateBatchError):  # a key given before is still named so
        ev.update(*batch(0), key="a")
    again = threading.Thread(target=lambda: (ev.flush(timeout=5), ev.close(timeout=5)))
    again.start()
    again.join(10)
    assert not again.is_alive()  # both return at once
    assert list(srv.got) == ["p.000001"]
    assert (ev.pending, ev.sent, ev.failed) == (0, 1, [])


def test_a_leftover_another_evaluator_takes_while_this_one_starts_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two live evaluators on one spool: the second lists the leftovers, then reads each; one
    the first had acknowledged (and unlinked) in between made the constructor raise
    CheckpointError (1 start in 60)."""
    folder = tmp_path / "-" / "r"
    folder.mkdir(parents=True)
    for i, name in enumerate(("A.000001", "A.000002")):
        ConfusionMatrix(K, **settings()).update(*batch(i), key=f"a{i}").save(  # type: ignore[arg-type]
            folder / f"{name}.json"
        )
    load = ConfusionMatrix.load

    def taken_first(path: Path) -> ConfusionMatrix:
        if Path(path).name == "A.000001.json":
            Path(path).unlink()  # acknowledged by the other evaluator just now
        return load(path)

    monkeypatch.setattr(ConfusionMatrix, "load", taken_first)
    srv = _FakeServer(lambda key: None)
    ev = StreamingEvaluator(srv, every=1, prefix="B", spool=tmp_path)  # type: ignore[arg-type]
    ev.close(timeout=30)
    assert list(srv.got) == ["A.000002"]  # the other leftover is sent, the taken one is not
    (folder / "A.000003.json").write_text("{not a state")  # a damaged one still raises
    with pytest.raises(CheckpointError, match=r"A\.000003"):
        StreamingEvaluator(srv, every=1, prefix="B", spool=tmp_path)  # type: ignore[arg-type]


def test_an_evaluator_refuses_a_batch_before_numbering_a_partial_past_19_digits() -> None:
    """Started just below the largest number, the evaluator sealed a partial numbered past it
    (a key the server refuses with a 180-character prefix, or numbered again by a restart)."""

    class Near(_FakeServer):
        def run_info(self, run: str | None = None) -> dict[str, object]:
            return super().run_info(run) | {"numbered": {"batches": {"p": 10**19 - 2}}}

    srv = Near(lambda key: None)
    ev = StreamingEvaluator(srv, every=1, prefix="p")  # type: ignore[arg-type]
    ev.update(*batch(0), key="a")  # the partial p.9999999999999999999: the last one
    with pytest.raises(UsageError, match=r"numbered up to 9999999999999999999 .* another prefix"):
        ev.update(*batch(1), key="b")
    ev.close(timeout=30)
    assert list(srv.got) == [f"p.{10**19 - 1}"]
    assert ev.sent == 1  # nothing of "b" was counted, nor sent


def test_put_counts_sends_the_smaller_form(stub) -> None:
    """put_counts sent the npz form above 64 images and JSON below, as if npz were the smaller:
    for 4,096 classes its JSON was 33.6 MB (the npz form then 134 MB, deflated now 0.6 MB)."""
    url, handler = stub
    wide = ConfusionMatrix(256).update(np.zeros(4, np.uint8), np.ones(4, np.uint8), key="a")
    tiny = ConfusionMatrix(3).update(np.zeros(4, np.uint8), np.ones(4, np.uint8), key="a")
    with Client(url, run="r", retries=0) as c:
        for cm in (wide, tiny):
            c.put_counts(cm, "k")
    (_, _, sent_wide), (_, _, sent_tiny) = handler.seen
    plain = json.dumps(wide.to_dict(), separators=(",", ":")).encode()
    assert sent_wide[:2] == b"PK"  # the npz form: 2 KiB against 131 KiB of JSON
    assert len(sent_wide) < len(plain) / 10
    assert sent_tiny[:1] == b"{"  # JSON, smaller than any npz for 3 classes


def test_put_counts_falls_back_to_json_when_the_npz_form_inflates_past_the_limit(stub) -> None:
    """A server bounds what npz members inflate to by its body limit: at 4,096 classes the
    deflated npz form (0.6 MB) inflates to 134 MB, over a --max-body-mb of 64 under which the
    33.6 MB of JSON that put_counts used to send passed. A 413 for the npz form sends JSON."""
    url, handler = stub
    handler.script = [413]
    wide = ConfusionMatrix(256).update(np.zeros(4, np.uint8), np.ones(4, np.uint8), key="a")
    with Client(url, run="r", retries=0) as c:
        assert c.put_counts(wide, "k")["outcome"] == "counted"
        handler.script = [413]
        with pytest.raises(RefusedError, match="413"):  # asked for: no other form
            c.put_counts(wide, "k", binary=True)
    assert [body[:1] for _, _, body in handler.seen] == [b"P", b"{", b"P"]
