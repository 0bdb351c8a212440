"""Durability and exactly-once: kill -9 and restart under streaming clients, a crash between
commit and reply, and a damaged database refused at start."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from service_support import batches_after_start

from segiou import ConfusionMatrix
from segiou.client import Client
from segiou.errors import RefusedError, ServiceStorageError, ServiceUnavailableError
from segiou.service._ledger import FAULT_ENV
from segiou.testing.service import ServerProcess
from segiou.testing.synthetic import cityscapes_like

K = 19
RUN = "stream"


def settings() -> dict[str, object]:
    return {"ignore_index": 255, "per_image": True, "on_unexpected": "count"}


def batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    g, p = cityscapes_like(2, 16, 24, seed=seed)
    if seed % 7 == 0:
        p[0, 0, :3] = 99  # unexpected values too: counted and reported
    return g, p


def test_kill_9_and_restart_while_clients_stream(tmp_path: Path) -> None:
    """Six kill -9 at random moments while three threads stream keyed batches with retries;
    the final state is the eager accumulator of every batch, exactly."""
    srv = ServerProcess(tmp_path / "data").start()
    with Client(srv.url, retries=0) as admin:
        admin.create_run(RUN, K, **settings())  # type: ignore[arg-type]
    sent: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    lock, stop, failures = threading.Lock(), threading.Event(), []

    def evaluator(tid: int) -> None:
        with Client(srv.url, retries=40, backoff=0.05, max_backoff=0.3) as c:
            ev = c.stream(RUN, every=3, seconds=0.2, prefix=f"ev{tid}")
            i = 0
            while not stop.is_set():
                key, (g, p) = f"t{tid}-{i}", batch(1000 * tid + i)
                ev.update(g, p, key=key)
                with lock:
                    sent[key] = (g, p)
                i += 1
                time.sleep(0.03)
            ev.close(timeout=300)

    def masks_putter(tid: int) -> None:
        with Client(srv.url, retries=40, backoff=0.05, max_backoff=0.3) as c:
            i = 0
            while not stop.is_set():
                key, (g, p) = f"m{tid}-{i}", batch(1000 * tid + i)
                while True:
                    try:
                        c.put_masks(g, p, key, run=RUN)
                        break
                    except ServiceUnavailableError:
                        time.sleep(0.2)  # the same key again: never lost, never doubled
                with lock:
                    sent[key] = (g, p)
                i += 1
                time.sleep(0.03)

    def guarded(fn: Callable[[int], None], tid: int) -> None:
        try:
            fn(tid)
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            failures.append(err)

    threads = [threading.Thread(target=guarded, args=(fn, tid))
               for tid, fn in enumerate((evaluator, evaluator, masks_putter))]  # fmt: skip
    for t in threads:
        t.start()
    rng, kills = random.Random(1), 0
    try:
        for _ in range(6):
            time.sleep(rng.uniform(0.3, 1.2))
            assert srv.kill() == -9
            kills += 1
            srv.start()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=300)
    try:
        assert not failures, failures
        assert kills >= 5
        eager = ConfusionMatrix(K, **settings())  # type: ignore[arg-type]
        for key, (g, p) in sent.items():
            eager.update(g, p, key=key)
        with Client(srv.url, retries=5) as c:
            state = c.state(RUN)
        assert state.keys == eager.keys
        np.testing.assert_array_equal(state.counts, eager.counts)
        np.testing.assert_array_equal(state.void, eager.void)
        assert (state.n_ignored, state.unexpected_pred) == (eager.n_ignored, eager.unexpected_pred)
        assert state == eager  # and the per-image rows, as a multiset
        assert len(sent) > 60
    finally:
        srv.stop()


def test_a_crash_between_commit_and_reply_does_not_double_count(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "data", env={FAULT_ENV: "exit-after-commit:boom"}).start()
    (g1, p1), (g2, p2) = batch(1), batch(2)
    first = ConfusionMatrix(K, **settings()).update(g1, p1, key="first")  # type: ignore[arg-type]
    boom = ConfusionMatrix(K, **settings()).update(g2, p2, key="boom")  # type: ignore[arg-type]
    with Client(srv.url, retries=0) as c:
        c.create_run(RUN, K, **settings())  # type: ignore[arg-type]
        assert c.put_counts(first, "first")["outcome"] == "counted"
        with pytest.raises(ServiceUnavailableError):
            c.put_counts(boom, "boom")  # committed, then the process died: no reply
    assert srv.proc is not None
    assert srv.proc.wait(60) == 86
    srv.start(env={FAULT_ENV: ""})
    try:
        with Client(srv.url, retries=0, run=RUN) as c:
            assert c.run_info(RUN)["batches"] == 2  # it was committed
            assert c.put_counts(boom, "boom")["outcome"] == "duplicate"  # the client's retry
            assert c.state(RUN) == first + boom
            assert c.run_info(RUN)["pixels"] == first.n_pixels + boom.n_pixels
    finally:
        srv.stop()


def _serve(data: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "segiou", "serve", "--data", str(data),
                           "--port", "0"], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip


def test_a_damaged_database_is_refused_at_start_and_left_as_it_is(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with ServerProcess(data) as srv, Client(srv.url, retries=0) as c:
        c.create_run(RUN, K, **settings())  # type: ignore[arg-type]
        for i in range(40):
            c.put_masks(*batch(i), f"k{i}")
    db = data / "segiou.db"
    whole = db.read_bytes()
    assert len(whole) > 16 * 4096  # several pages, so that half of it is a real truncation
    assert not (data / "segiou.db-wal").exists() or (data / "segiou.db-wal").stat().st_size == 0
    page = int.from_bytes(whole[16:18], "big")
    damaged = {
        "truncated": whole[: len(whole) // 2],
        "empty": b"",
        "not an SQLite database": b"hello world " * 1000,
        "integrity check": whole[:page] + b"\x00" * 8 + whole[page + 8 :],  # page 2's header
    }
    for needle, content in damaged.items():
        db.write_bytes(content)
        done = _serve(data)
        assert done.returncode == 2, (needle, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert needle in lines[0] or (needle == "integrity check" and "cannot be read" in lines[0])
        assert "has not changed it" in lines[0]
        assert db.read_bytes() == content  # never reset
    db.write_bytes(whole)  # the intact file serves again, with every batch
    with ServerProcess(data) as srv, Client(srv.url, retries=0) as c:
        assert c.run_info(RUN)["batches"] == 40


def test_the_database_is_wal_with_synchronous_full(tmp_path: Path) -> None:
    from segiou.service.storage import SQLiteStorage

    st = SQLiteStorage(tmp_path / "x.db")
    try:
        db = st._db
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        st.close()
    assert (tmp_path / "x.db").stat().st_size > 0


def test_a_second_server_on_one_data_folder_is_refused(tmp_path: Path) -> None:
    # two servers on one folder each kept their own index: the second served stale results,
    # answered every batch "retry" and could write over a run's row (acknowledged batches
    # then vanished from the report). The folder is held by the first until it stops.
    data = tmp_path / "data"
    with ServerProcess(data) as srv, Client(srv.url, retries=0) as c:
        c.create_run(RUN, K, **settings())  # type: ignore[arg-type]
        c.put_masks(*batch(1), "k1")
        done = _serve(data)
        assert done.returncode == 2, done.stderr
        assert f"in use by another segiou serve (pid {srv.proc.pid})" in done.stderr
        c.put_masks(*batch(2), "k2")  # the first one serves on, untouched
        assert c.run_info(RUN)["batches"] == 2
    with ServerProcess(data) as srv, Client(srv.url, retries=0) as c:  # released when it stopped
        assert c.run_info(RUN)["batches"] == 2


def test_a_batch_stored_by_an_older_server_is_a_duplicate_when_sent_again(tmp_path: Path) -> None:
    """segiou 0.2 took batch digests of rows and ignore values in the order held; this version
    sorts them. Sent again after an upgrade (a lost reply, a restarted streaming evaluator), a
    batch the older server stored was refused with 409 "other content"."""
    import sqlite3

    from segiou.service.wire import canonical_state, state_digest

    data = tmp_path / "data"
    g, p = batch(3)
    part = ConfusionMatrix(K, ignore_index=[255, 254], per_image=True, on_unexpected="count")
    part.update(g[1:], p[1:], key="b", names=["zeta"])
    part.update(g[:1], p[:1], key="a", names=["alpha"])  # rows not in name order
    old = state_digest(canonical_state(part, legacy=True))
    assert old != state_digest(canonical_state(part))
    with ServerProcess(data) as srv, Client(srv.url, retries=0) as c:
        c.create_run(RUN, K, ignore_index=[255, 254], per_image=True, on_unexpected="count")
        c.put_counts(part, "p.000001")
    db = sqlite3.connect(data / "segiou.db")  # as the older server wrote it
    with db:
        db.execute("UPDATE batches SET digest = ? WHERE key = ?", (old, "p.000001"))
    db.close()
    with ServerProcess(data) as srv, Client(srv.url, run=RUN, retries=0) as c:
        assert c.put_counts(part, "p.000001")["outcome"] == "duplicate"
        assert c.run_info(RUN)["batches"] == 1
        # the numbering a restarted evaluator reads, rebuilt from the database at start
        assert c.run_info(RUN)["numbered"] == {"batches": {"p": 1}, "inner": {}}
        assert "numbered" not in c.runs()[0]  # the listing stays small
        other = ConfusionMatrix(K, ignore_index=[255, 254], per_image=True, on_unexpected="count")
        other.update(g, g, key="c", names=["x", "y"])
        with pytest.raises(RefusedError, match="other content"):  # still a conflict
            c.put_counts(other, "p.000001")


def _wal_page_1(wal: bytes) -> bytes:
    """The last copy of page 1 in a write-ahead log (what a checkpoint writes first)."""
    size = int.from_bytes(wal[8:12], "big")
    salts, off, page = wal[16:24], 32, b""
    while off + 24 + size <= len(wal):
        if wal[off + 8 : off + 16] == salts and int.from_bytes(wal[off : off + 4], "big") == 1:
            page = wal[off + 24 : off + 24 + size]
        off += 24 + size
    assert page, "no page 1 in the log"
    return page


def _crash_copy(src: Path, dst: Path) -> None:
    """The files a kill -9 leaves: the database and its log, copied while the writer is open."""
    dst.mkdir()
    for suffix in ("", "-wal"):
        (dst / f"x.db{suffix}").write_bytes((src / f"x.db{suffix}").read_bytes())


def test_a_checkpoint_cut_short_by_a_crash_is_recovered_not_refused(tmp_path: Path) -> None:
    """kill -9 during SQLite's checkpoint: page 1 (the header, with the new page count) is
    copied from the log into the main file first, the pages after it not yet. The main file is
    then shorter than its header says, but the log holds every page: segiou serve refused to
    start ("truncated ... restore it from a backup") although SQLite recovers it in full."""
    from segiou.service.storage import AddBatch, BatchRecord, PutRun, RunRecord, SQLiteStorage

    live = tmp_path / "live"
    live.mkdir()
    st = SQLiteStorage(live / "x.db")
    rec = RunRecord("r", "{}", "{}", "open", 0.0)
    for i in range(40):
        rec = replace(rec, batches=i + 1, seq=i + 1)
        st.commit([AddBatch(BatchRecord("r", f"k{i}", i + 1, "d", "state", 1, 1, b"{}" * 2000,
                                        names=(f"img-{i}",))), PutRun(rec)])  # fmt: skip
    crashed = tmp_path / "crashed"
    _crash_copy(live, crashed)
    db, wal = crashed / "x.db", crashed / "x.db-wal"
    page_1 = _wal_page_1(wal.read_bytes())
    header_pages = int.from_bytes(page_1[28:32], "big")
    assert db.stat().st_size < header_pages * len(page_1)  # looks truncated by its header
    with db.open("r+b") as f:
        f.write(page_1)  # the checkpoint's first write; killed before the rest
    recovered = SQLiteStorage(db)  # starts, with every batch
    try:
        (run,) = recovered.load()
        assert run.record.batches == 40
        assert len(run.batches) == len(run.images) == 40
        assert len(list(recovered.batch_states("r", 40))) == 40
    finally:
        recovered.close()
    # a database really missing pages is still refused, log or not, and left as it is
    st.commit([PutRun(replace(rec, status="closed"))])
    st._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file
    st.commit([PutRun(rec)])  # the log holds a frame again
    cut = tmp_path / "cut"
    _crash_copy(live, cut)
    st.close()
    whole = (cut / "x.db").read_bytes()
    assert len(whole) > 16 * 4096
    assert (cut / "x.db-wal").stat().st_size > 32
    (cut / "x.db").write_bytes(whole[: len(whole) // 2])
    before = {f.name: f.read_bytes() for f in cut.iterdir()}
    with pytest.raises(ServiceStorageError, match="has not changed it") as refused:
        SQLiteStorage(cut / "x.db")
    assert "integrity check" in str(refused.value) or "cannot be read" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert {f.name: f.read_bytes() for f in cut.iterdir() if f.name in before} == before


def _wal_frames(wal: bytes) -> int:
    return (len(wal) - 32) // (24 + int.from_bytes(wal[8:12], "big"))


def test_a_damaged_write_ahead_log_is_refused_a_torn_tail_is_not(tmp_path: Path) -> None:
    """One bit flipped in an early frame of the log (bit rot) ended SQLite's recovery there:
    every later commit, each fsynced and acknowledged, vanished without a word, and the first
    clean stop deleted the log. Such a log is refused and both files are left as they are; a
    log cut short in its last frame (a crash mid-write) or intact still starts."""
    from segiou.service._wal import scan_wal
    from segiou.service.storage import AddBatch, BatchRecord, PutRun, RunRecord, SQLiteStorage

    live = tmp_path / "live"
    live.mkdir()
    st = SQLiteStorage(live / "x.db")
    st._db.execute("PRAGMA wal_autocheckpoint=0")  # every commit stays in the log
    rec = RunRecord("r", "{}", "{}", "open", 0.0)
    for i in range(40):
        rec = replace(rec, batches=i + 1, seq=i + 1)
        st.commit([AddBatch(BatchRecord("r", f"k{i}", i + 1, "d", "state", 1, 1, b"{}" * 2000,
                                        names=(f"img-{i}",))), PutRun(rec)])  # fmt: skip
    clean = tmp_path / "clean"
    _crash_copy(live, clean)
    st.close()
    wal = (clean / "x.db-wal").read_bytes()
    page, n = int.from_bytes(wal[8:12], "big"), _wal_frames(wal)
    assert n > 40

    def variant(name: str, content: bytes) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "x.db").write_bytes((clean / "x.db").read_bytes())
        (folder / "x.db-wal").write_bytes(content)
        return folder

    # damaged: a bit inside frame 5's page, then one in frame 5's header (its page number)
    for at in (32 + 4 * (24 + page) + 24 + 500, 32 + 4 * (24 + page) + 2):
        bad = bytearray(wal)
        bad[at] ^= 0x01
        folder = variant(f"flip{at}", bytes(bad))
        damage = scan_wal(folder / "x.db-wal")
        assert damage is not None
        assert damage.first_bad == 5
        assert damage.frames == n
        assert damage.lost_commits >= 39  # every batch but at most the first
        before = {f.name: f.read_bytes() for f in folder.iterdir()}
        with pytest.raises(ServiceStorageError, match=r"write-ahead log .* is damaged") as refused:
            SQLiteStorage(folder / "x.db")
        said = str(refused.value)
        assert "\n" not in said
        assert "frame 5 of" in said
        assert "keep both files" in said
        assert f"lose {damage.lost_commits} acknowledged commits" in said
        assert {f.name: f.read_bytes() for f in folder.iterdir()} == before  # nothing changed
    # a torn tail: the last frame cut short, or garbage in it: the last commit goes, no more
    torn_cut = variant("torn_cut", wal[: len(wal) - page // 2])
    garbled = bytearray(wal)
    garbled[len(wal) - 100] ^= 0xFF
    torn_bit = variant("torn_bit", bytes(garbled))
    for folder in (torn_cut, torn_bit):
        assert scan_wal(folder / "x.db-wal") is None
        assert batches_after_start(folder) == 39
    assert scan_wal(clean / "x.db-wal") is None
    assert batches_after_start(clean) == 40


def test_a_damaged_write_ahead_log_stops_segiou_serve(tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = ServerProcess(data).start()
    with Client(srv.url, retries=0) as c:
        c.create_run(RUN, K, **settings())  # type: ignore[arg-type]
        for i in range(20):
            c.put_masks(*batch(i), f"k{i}")
    srv.kill()  # kill -9: the log keeps its frames
    wal = data / "segiou.db-wal"
    content = bytearray(wal.read_bytes())
    page = int.from_bytes(content[8:12], "big")
    assert _wal_frames(bytes(content)) > 20
    content[32 + 3 * (24 + page) + 24 + 100] ^= 0x10
    wal.write_bytes(bytes(content))
    db_before = (data / "segiou.db").read_bytes()
    done = _serve(data)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "is damaged: frame 4 of" in lines[0], done.stderr
    assert wal.read_bytes() == bytes(content)  # both files left as they were
    assert (data / "segiou.db").read_bytes() == db_before
