"""The write-ahead log check at start-up: a damaged log header must not lose acknowledged commits
without a word (SQLite ignores the whole log when its header fails)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from service_support import batches_after_start

from segiou.client import Client
from segiou.errors import ServiceStorageError
from segiou.service import _wal
from segiou.service._wal import db_page_size, scan_wal
from segiou.service.storage import AddBatch, BatchRecord, PutRun, RunRecord, SQLiteStorage
from segiou.testing.service import ServerProcess

BATCHES = 20

#: One byte in each field of the log's 32-byte header (bit 0 of byte 3 swaps the byte order).
FIELDS = {
    "magic": 1, "magic byte order": 3, "version": 6, "page size": 10, "checkpoint": 14,
    "salt-1": 17, "salt-2": 22, "checksum-1": 25, "checksum-2": 31,
}  # fmt: skip


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """The database and log a kill -9 leaves after 20 commits, each still in the log."""
    live = tmp_path_factory.mktemp("live")
    st = SQLiteStorage(live / "x.db")
    st._db.execute("PRAGMA wal_autocheckpoint=0")  # every commit stays in the log
    rec = RunRecord("r", "{}", "{}", "open", 0.0)
    st.commit([PutRun(rec)])
    st._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the run (no batch yet) in the main file
    for i in range(BATCHES):
        rec = replace(rec, batches=i + 1, seq=i + 1)
        st.commit([AddBatch(BatchRecord("r", f"k{i}", i + 1, "d", "state", 1, 1, b"{}" * 2000,
                                        names=(f"img-{i}",))), PutRun(rec)])  # fmt: skip
    db, wal = (live / "x.db").read_bytes(), (live / "x.db-wal").read_bytes()
    st.close()
    return db, wal


def _folder(tmp_path: Path, name: str, db: bytes, wal: bytes) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "x.db").write_bytes(db)
    (folder / "x.db-wal").write_bytes(wal)
    return folder


def _stride(wal: bytes) -> int:
    return 24 + int.from_bytes(wal[8:12], "big")


def _first_commit(wal: bytes) -> int:
    """The index of the log's first commit frame."""
    stride, i = _stride(wal), 0
    while int.from_bytes(wal[32 + i * stride + 4 : 32 + i * stride + 8], "big") == 0:
        i += 1
    return i


@pytest.mark.parametrize("field", list(FIELDS))
def test_a_damaged_log_header_is_refused_and_both_files_left(
    tmp_path: Path, crashed: tuple[bytes, bytes], field: str
) -> None:
    """One bit flipped in the log's header (bit rot in its first sector): SQLite ignored the
    whole log and serve started with 0 of 20 acknowledged batches, the first clean stop
    deleting the log. It is refused now, both files left as they are."""
    db, wal = crashed
    bad = bytearray(wal)
    bad[FIELDS[field]] ^= 0x01
    folder = _folder(tmp_path, "f", db, bytes(bad))
    damage = scan_wal(folder / "x.db-wal", page_size=db_page_size(folder / "x.db"))
    assert damage is not None
    assert (damage.first_bad, damage.kept_commits, damage.lost_commits) == (0, 0, BATCHES)
    assert damage.header
    before = {f.name: f.read_bytes() for f in folder.iterdir()}
    with pytest.raises(ServiceStorageError, match=r"write-ahead log .* is damaged") as refused:
        SQLiteStorage(folder / "x.db")
    said = str(refused.value)
    assert "\n" not in said
    assert "its 32-byte header has" in said
    assert f"lose all {BATCHES} acknowledged commits" in said
    assert "keep both files" in said
    assert "restore from a backup" in said
    assert {f.name: f.read_bytes() for f in folder.iterdir()} == before  # nothing changed


def test_a_zeroed_first_sector_of_the_log_is_refused(
    tmp_path: Path, crashed: tuple[bytes, bytes]
) -> None:
    """A bad sector at the log's start: the header and the first frame's header are zeros
    (no salts to read there); the salts come from the first frame that verifies."""
    db, wal = crashed
    folder = _folder(tmp_path, "z", db, bytes(4096) + wal[4096:])
    with pytest.raises(ServiceStorageError, match="its 32-byte header has an unknown magic"):
        SQLiteStorage(folder / "x.db")
    assert (folder / "x.db-wal").read_bytes()[4096:] == wal[4096:]
    assert (folder / "x.db").read_bytes() == db
    # without the database's page size (each allowed size is tried), found all the same
    damage = scan_wal(folder / "x.db-wal")
    assert damage is not None
    assert damage.lost_commits == BATCHES


def test_an_intact_log_and_a_torn_tail_still_start(
    tmp_path: Path, crashed: tuple[bytes, bytes]
) -> None:
    db, wal = crashed
    assert scan_wal(_folder(tmp_path, "whole", db, wal) / "x.db-wal") is None
    assert batches_after_start(tmp_path / "whole") == BATCHES
    torn = _folder(tmp_path, "torn", db, wal[: len(wal) - _stride(wal) // 2])
    assert scan_wal(torn / "x.db-wal") is None
    assert batches_after_start(torn) == BATCHES - 1


def test_a_failing_header_with_no_commit_behind_it_starts(
    tmp_path: Path, crashed: tuple[bytes, bytes]
) -> None:
    """Nothing acknowledged is in such a log: garbage, or one transaction cut short."""
    db, wal = crashed
    rng = np.random.default_rng(0)
    garbage = bytearray(wal[:32] + rng.integers(0, 256, len(wal) - 32, np.uint8).tobytes())
    garbage[1] ^= 0x01
    cut = bytearray(wal[: 32 + _first_commit(wal) * _stride(wal)])  # the frames before a commit
    cut[17] ^= 0x01
    for name, content in (("garbage", garbage), ("cut", cut)):
        folder = _folder(tmp_path, name, db, bytes(content))
        assert scan_wal(folder / "x.db-wal", page_size=4096) is None
        assert batches_after_start(folder) == 0  # what the main file holds


@pytest.mark.parametrize("frames_per_piece", [1, 3])
def test_the_log_is_read_in_pieces_with_the_same_verdict(
    tmp_path: Path, crashed: tuple[bytes, bytes], monkeypatch: pytest.MonkeyPatch,
    frames_per_piece: int,
) -> None:  # fmt: skip
    """The log is read a few megabytes at a time (a whole-file read held twice its size);
    a frame is checked from the checksum stored in the frame before it, across pieces."""
    db, wal = crashed
    stride = _stride(wal)
    mid = bytearray(wal)
    mid[32 + 7 * stride + 24 + 300] ^= 0x04  # a bit in frame 8's page
    head = bytearray(wal)
    head[18] ^= 0x80
    folders = [_folder(tmp_path, n, db, bytes(c)) for n, c in
               (("whole", wal), ("mid", mid), ("head", head))]  # fmt: skip
    expected = [scan_wal(f / "x.db-wal", page_size=4096) for f in folders]
    assert expected[0] is None
    assert expected[1] is not None
    assert expected[1].first_bad == 8
    assert expected[2] is not None
    assert expected[2].first_bad == 0
    monkeypatch.setattr(_wal, "_PIECE", frames_per_piece * stride + 5)
    assert [scan_wal(f / "x.db-wal", page_size=4096) for f in folders] == expected


def test_db_page_size_reads_the_database_header(tmp_path: Path) -> None:
    head = bytearray(b"SQLite format 3\0" + bytes(84))
    for stored, size in ((4096, 4096), (512, 512), (1, 65536), (3000, None), (0, None)):
        head[16:18] = stored.to_bytes(2, "big")
        (tmp_path / "d").write_bytes(bytes(head))
        assert db_page_size(tmp_path / "d") == size
    (tmp_path / "d").write_bytes(b"not sqlite" + bytes(90))
    assert db_page_size(tmp_path / "d") is None
    assert db_page_size(tmp_path / "missing") is None


def test_serve_refuses_a_log_whose_header_is_damaged(tmp_path: Path) -> None:
    """End to end: 20 batches acknowledged, kill -9, one bit of salt-1 in the log's header
    flipped. serve started with none of them; it stops now, changing neither file."""
    data = tmp_path / "data"
    srv = ServerProcess(data).start()
    rng = np.random.default_rng(0)
    with Client(srv.url, retries=0) as c:
        c.create_run("r", 5)
        for i in range(20):
            g = rng.integers(0, 5, (2, 16, 16), dtype=np.uint8)
            assert c.put_masks(g, g, f"k{i}", run="r")["outcome"] == "counted"
    srv.kill()  # kill -9: the log keeps its frames
    wal = data / "segiou.db-wal"
    content = bytearray(wal.read_bytes())
    content[17] ^= 0x01
    wal.write_bytes(bytes(content))
    db_before = (data / "segiou.db").read_bytes()
    done = subprocess.run([sys.executable, "-m", "segiou", "serve", "--data", str(data),
                           "--port", "0"], capture_output=True, text=True, timeout=120,
                          check=False, env=os.environ)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "is damaged: its 32-byte header has" in lines[0]
    assert wal.read_bytes() == bytes(content)  # both files left as they were
    assert (data / "segiou.db").read_bytes() == db_before


def _backfill(db: bytes, wal: bytes, commits: int = BATCHES) -> bytes:
    """The database file after a checkpoint copied the log's first ``commits`` commits into it
    (each frame's page at its place, in order; the file sized as the last of them says)."""
    stride, page, out, done, i = _stride(wal), _stride(wal) - 24, bytearray(db), 0, 0
    while done < commits:
        at = 32 + i * stride
        number, size = (
            int.from_bytes(wal[at : at + 4], "big"),
            int.from_bytes(wal[at + 4 : at + 8], "big"),
        )
        out[(number - 1) * page : number * page] = wal[at + 24 : at + stride]
        if size:
            done += 1
            out = out[: size * page] + bytes(max(0, size * page - len(out)))
        i += 1
    return bytes(out)


def test_a_damaged_header_over_a_checkpointed_log_starts_with_every_batch(
    tmp_path: Path, crashed: tuple[bytes, bytes]
) -> None:
    """SQLite's automatic checkpoint copied every frame into the database file, then kill -9
    while idle, then one bit of salt-1 in the log's header: SQLite ignores the log and loses
    nothing, yet serve refused, saying all the commits would be lost ("restore from a backup").
    Likewise a torn rewrite of the header when the log restarts (its first 16 bytes, the new
    checkpoint number, written; the rest not). Both start now, with every batch."""
    db, wal = crashed
    full = _backfill(db, wal)
    flipped = bytearray(wal)
    flipped[17] ^= 0x01
    torn = bytearray(wal)
    torn[12:16] = (int.from_bytes(wal[12:16], "big") + 1).to_bytes(4, "big")
    for name, content in (("flipped", flipped), ("torn", torn)):
        folder = _folder(tmp_path, name, full, bytes(content))
        assert scan_wal(folder / "x.db-wal", page_size=4096) is None
        assert batches_after_start(folder) == BATCHES


def test_a_damaged_header_counts_only_the_commits_not_in_the_database(
    tmp_path: Path, crashed: tuple[bytes, bytes]
) -> None:
    """A checkpoint that copied the first 12 commits (the others came after it): the 8 later
    ones are lost, the message says so, and serve does not start."""
    db, wal = crashed
    bad = bytearray(wal)
    bad[17] ^= 0x01
    folder = _folder(tmp_path, "part", _backfill(db, wal, 12), bytes(bad))
    damage = scan_wal(folder / "x.db-wal", page_size=4096)
    assert damage is not None
    assert (damage.lost_commits, damage.in_database) == (BATCHES - 12, 12)
    with pytest.raises(ServiceStorageError, match="restore from a backup") as refused:
        SQLiteStorage(folder / "x.db")
    assert "lose 8 acknowledged commits not in the database file, 12 more are" in str(refused.value)


def test_a_damaged_frame_over_a_checkpointed_log_is_still_refused(
    tmp_path: Path, crashed: tuple[bytes, bytes]
) -> None:
    """Every commit is in the database file, but a damaged frame in the middle of the log:
    SQLite's recovery reads the pages of the commits before it from the log, not the newer
    ones in the database file (and sizes the database as they say), so the later commits are
    lost all the same (or the pages mixed: a malformed database). Refused, as SQLite's own
    view of a copy confirms."""
    db, wal = crashed
    bad = bytearray(wal)
    bad[32 + 7 * _stride(wal) + 24 + 300] ^= 0x04  # a bit in frame 8's page
    folder = _folder(tmp_path, "mid", _backfill(db, wal), bytes(bad))
    damage = scan_wal(folder / "x.db-wal", page_size=4096)
    assert damage is not None
    assert damage.first_bad == 8
    assert damage.kept_commits > 0
    assert damage.lost_commits + damage.kept_commits >= BATCHES
    oracle = _folder(tmp_path, "oracle", _backfill(db, wal), bytes(bad))
    view = sqlite3.connect(oracle / "x.db")
    try:
        seen = view.execute("SELECT count(*) FROM batches").fetchone()[0]
    except sqlite3.DatabaseError as err:
        seen = str(err)
    finally:
        view.close()
    assert seen == "database disk image is malformed" or seen < BATCHES
    with pytest.raises(ServiceStorageError, match="frame 8 of"):
        SQLiteStorage(folder / "x.db")
