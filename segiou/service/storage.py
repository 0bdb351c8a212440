"""Where ``segiou serve`` keeps its runs: a small storage interface and its SQLite implementation.

The service keeps, per run, its settings and totals, and per batch its key, the digest of its
canonical content, the inner batch keys and image names it brings, and its state (canonical
JSON, compressed when large; the input of :meth:`~segiou.confusion.ConfusionMatrix.from_dict`). A
:class:`Storage` applies a list of changes in one durable transaction (:meth:`Storage.commit`
returns only when they are on disk) and reads them back at start-up.

:class:`SQLiteStorage`, the embedded default, is one SQLite file in WAL mode with
``synchronous=FULL`` (every commit is fsynced), checked at start-up: a file that is not a
segiou database, is truncated or fails ``PRAGMA integrity_check`` is refused, never reset. A file
left with its write-ahead log by a crash (``kill -9`` during a checkpoint leaves the main file
shorter than its header says, the missing pages being in the log) is not truncated: SQLite
recovers it from the log, checked first on a read-only connection (which changes neither file).
Before that the log itself is read (:mod:`segiou.service._wal`): SQLite ends its recovery at the
first frame whose checksum fails, so one damaged frame would silently drop every acknowledged
commit after it; a log with commits that verify after a failing frame is refused (a torn tail,
the last transaction cut short, is not).
Primary keys make a second row for a batch key, an inner batch key or an image name of one run
impossible, whatever the service above them does.
"""

from __future__ import annotations

import os
import sqlite3
import struct
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from segiou._version import __version__
from segiou.errors import ServiceStorageError
from segiou.service._wal import db_page_size, scan_wal

__all__ = [
    "SCHEMA_VERSION",
    "AddBatch",
    "BatchRecord",
    "Change",
    "DeleteRun",
    "PutRun",
    "RunIndex",
    "RunRecord",
    "SQLiteStorage",
    "Storage",
]

#: Version of the database schema this segiou writes and reads.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    name TEXT PRIMARY KEY, settings TEXT NOT NULL, template TEXT NOT NULL,
    status TEXT NOT NULL, created REAL NOT NULL, closed REAL,
    batches INTEGER NOT NULL, images INTEGER NOT NULL, pixels INTEGER NOT NULL,
    seq INTEGER NOT NULL);
CREATE TABLE batches (
    run TEXT NOT NULL, key TEXT NOT NULL, seq INTEGER NOT NULL, digest TEXT NOT NULL,
    kind TEXT NOT NULL, pixels INTEGER NOT NULL, images INTEGER NOT NULL,
    state BLOB NOT NULL, PRIMARY KEY (run, key), UNIQUE (run, seq));
CREATE TABLE batch_keys (
    run TEXT NOT NULL, key TEXT NOT NULL, batch TEXT NOT NULL, PRIMARY KEY (run, key));
CREATE TABLE images (
    run TEXT NOT NULL, name TEXT NOT NULL, batch TEXT NOT NULL, PRIMARY KEY (run, name));
"""


@dataclass(frozen=True)
class RunRecord:
    """A run's row: its settings, status and totals.

    Attributes
    ----------
    name : str
        The run's name.
    settings : str
        The settings as requested (JSON text).
    template : str
        The empty accumulator's state (JSON text): the run's effective settings.
    status : {"open", "closed"}
    created, closed : float
        Unix times (``closed`` is ``None`` while the run is open).
    batches, images, pixels : int
        Batches (keys), images and pixels counted.
    seq : int
        Sequence number of the last batch committed (batches are numbered 1, 2, ...).
    """

    name: str
    settings: str
    template: str
    status: str
    created: float
    closed: float | None = None
    batches: int = 0
    images: int = 0
    pixels: int = 0
    seq: int = 0


@dataclass(frozen=True)
class BatchRecord:
    """One batch: key, digest, inner batch keys, image names, and its state.

    Attributes
    ----------
    run, key : str
        The run and the batch key the batch was put under.
    seq : int
        Its number within the run (commit order).
    digest : str
        SHA-256 of its canonical state (see :func:`segiou.service.wire.canonical_state`).
    kind : {"state", "masks"}
        What the body was.
    pixels, images : int
        Pixels and images it counts.
    state : bytes
        The canonical state: JSON, or zlib-compressed JSON when large.
    keys, names : tuple of str
        The batch keys and image names inside its state.
    """

    run: str
    key: str
    seq: int
    digest: str
    kind: str
    pixels: int
    images: int
    state: bytes
    keys: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class PutRun:
    """Insert or replace a run's row."""

    record: RunRecord


@dataclass(frozen=True)
class AddBatch:
    """Insert a batch, its inner keys and its image names (refused if any already exists)."""

    batch: BatchRecord


@dataclass(frozen=True)
class DeleteRun:
    """Delete a run and everything of it."""

    name: str


#: One change of a :meth:`Storage.commit`.
Change = PutRun | AddBatch | DeleteRun


@dataclass
class RunIndex:
    """A run as :meth:`Storage.load` reads it back: its row and what its batches hold.

    Attributes
    ----------
    record : RunRecord
    batches : list of (key, digest, seq)
    keys : list of (inner batch key, batch key)
    images : list of (image name, batch key)
    """

    record: RunRecord
    batches: list[tuple[str, str, int]] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)


class Storage(Protocol):
    """What the service needs of its storage.

    A client-server database (for several servers behind one address) implements the same four
    methods with one transaction per :meth:`commit` and the same unique keys.
    """

    def load(self) -> list[RunIndex]:
        """Read every run, with its batch keys, digests, inner keys and image names."""
        ...

    def commit(self, changes: Sequence[Change]) -> None:
        """Apply ``changes`` in one transaction; return only when it is durable.

        Raises an exception (and applies nothing) if any change conflicts with a stored row.
        """
        ...

    def batch_states(self, run: str, upto: int) -> Iterator[bytes]:
        """Yield the stored states of the run's batches with ``seq <= upto``, in seq order.

        One at a time: a run's states may not fit in memory together (a state of 4,096
        classes reads into 128 MiB). Every state committed up to ``upto`` is yielded, however
        many batches are committed meanwhile.
        """
        ...

    def close(self) -> None:
        """Release the storage (a clean shutdown)."""
        ...


def _refuse(path: Path, what: str) -> ServiceStorageError:
    msg = (
        f"database {str(path)!r} {what}; segiou serve does not start on it and has not changed "
        "it. Restore it from a backup, or move it away to start with an empty database"
    )
    return ServiceStorageError(msg)


def _wal_of(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _has_wal(path: Path) -> bool:
    """Whether ``path`` has a write-ahead log holding frames (a crash left it; SQLite recovers)."""
    try:
        return _wal_of(path).stat().st_size > 32  # its 32-byte header, then frames
    except OSError:
        return False


def _check_wal(path: Path) -> None:
    """Refuse a write-ahead log damaged before commits that still verify (see :mod:`._wal`).

    SQLite's recovery would end the log at the damaged frame (or ignore all of it, its header
    damaged) and drop every commit after it without a word; the first clean stop would then
    delete the log. A torn tail starts, and so does a log whose dropped commits are all already
    in what SQLite reads instead (a checkpoint copied them into the database file).
    """
    wal = _wal_of(path)
    try:
        damage = scan_wal(wal, page_size=db_page_size(path))
    except OSError as err:
        raise _refuse(path, f"has a write-ahead log that cannot be read ({err})") from err
    if damage is None:
        return
    safe = (
        f", {damage.in_database} more are already in the database file"
        if damage.in_database
        else ""
    )
    if damage.first_bad == 0:
        verify = damage.lost_commits + damage.in_database
        what = (
            f"its 32-byte header has {damage.header}, so SQLite would ignore the whole log, "
            f"yet {verify} commits in its {damage.frames} frames verify: SQLite "
            f"would lose {'all ' if not safe else ''}{damage.lost_commits} acknowledged commits"
            f" not in the database file{safe}"
        )
    else:
        what = (
            f"frame {damage.first_bad} of {damage.frames} fails its checksum, yet commits after "
            f"it verify: SQLite would recover only the commits before it "
            f"({damage.kept_commits}) and lose {damage.lost_commits} acknowledged commits{safe}"
        )
    msg = (
        f"write-ahead log {str(wal)!r} of database {str(path)!r} is damaged: {what} "
        f"({damage.lost_frames} frames) for good. segiou serve does not start on it and has "
        "changed neither file: keep both files together (copy them before anything opens the "
        "database) and restore from a backup"
    )
    raise ServiceStorageError(msg)


def _check_header(path: Path, *, wal: bool = False) -> None:
    """Refuse a file that is not SQLite or is shorter than its header says (truncated).

    With ``wal`` (a write-ahead log with frames beside it) the size is not compared: the header
    of page 1 may have been copied from the log by a checkpoint a crash cut short, before the
    pages after it; the log holds them and SQLite reads them from there. The integrity check
    that follows, on what SQLite recovers, refuses a file whose pages are really missing.
    """
    size = path.stat().st_size
    if size == 0:
        raise _refuse(path, "exists but is empty (0 bytes: truncated?)")
    with path.open("rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        raise _refuse(path, "is not an SQLite database (or its header is damaged)")
    page = struct.unpack(">H", head[16:18])[0]
    page = 65536 if page == 1 else page
    changes, pages, valid_for = struct.unpack(">I", head[24:28])[0], *struct.unpack(
        ">I", head[28:32]), struct.unpack(">I", head[92:96])[0]  # fmt: skip
    if pages and changes == valid_for and size < pages * page and not wal:
        raise _refuse(
            path, f"is truncated: its header says {pages} pages of {page} bytes, the file has "
            f"{size} bytes"
        )  # fmt: skip


def _check(path: Path, db: sqlite3.Connection) -> None:
    """Refuse a database that fails its integrity check or holds no segiou schema of this version."""
    problems = [r[0] for r in db.execute("PRAGMA integrity_check").fetchall()]
    if problems != ["ok"]:
        said = "; ".join(problems[:3]).replace("\n", "; ")  # one line, however many pages
        raise _refuse(path, f"fails its integrity check ({said[:400]})")
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "meta" not in tables:
        raise _refuse(path, f"is not a segiou database (tables: {sorted(tables)[:6]})")
    row = db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
    if row is None or row[0] != str(SCHEMA_VERSION):
        found = None if row is None else row[0]
        raise _refuse(
            path, f"has schema version {found!r}; segiou {__version__} reads "
            f"{SCHEMA_VERSION} (upgrade segiou)"
        )  # fmt: skip


class SQLiteStorage:
    """The embedded storage: one SQLite file, WAL mode, ``synchronous=FULL``.

    Parameters
    ----------
    path : str or Path
        The database file (created with its schema if it does not exist).

    Raises
    ------
    ServiceStorageError
        The file exists but is empty, not SQLite, truncated, fails ``PRAGMA integrity_check``,
        or holds no segiou schema or another schema version; or WAL mode cannot be set; or its
        write-ahead log is damaged before commits that still verify (both files left as they are).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.exists():
            self._create()
        wal = _has_wal(self.path)
        if wal:
            _check_wal(self.path)  # before SQLite reads it: it would drop what follows damage
        _check_header(self.path, wal=wal)
        try:
            if wal:  # recovered and checked read-only first: a refused file stays as it is
                ro = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                     isolation_level=None)  # fmt: skip
                try:
                    _check(self.path, ro)
                finally:
                    ro.close()  # read-only: no checkpoint, the log stays
            self._db = self._connect()
            if not wal:
                _check(self.path, self._db)
        except sqlite3.DatabaseError as err:
            raise _refuse(self.path, f"cannot be read ({err})") from err
        self._lock = threading.Lock()

    def _create(self) -> None:
        """Write the schema into a new file, then give it its name: never a half-made database."""
        tmp = self.path.with_name(f".{self.path.name}.new")
        for leftover in (tmp, tmp.with_name(tmp.name + "-wal"), tmp.with_name(tmp.name + "-shm")):
            leftover.unlink(missing_ok=True)  # a creation that died before its rename
        db = sqlite3.connect(tmp, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT INTO meta VALUES ('schema', ?), ('created_by', ?)",
                       (str(SCHEMA_VERSION), f"segiou {__version__}"))  # fmt: skip
            db.execute("COMMIT")
        finally:
            db.close()
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        tmp.replace(self.path)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # the new name is durable too
        finally:
            os.close(fd)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        db.execute("PRAGMA synchronous=FULL")
        if str(mode).lower() != "wal" or db.execute("PRAGMA synchronous").fetchone()[0] != 2:
            db.close()
            raise _refuse(self.path, f"cannot be put in WAL mode with synchronous=FULL ({mode})")
        return db

    # -- the interface ------------------------------------------------------------------------
    def load(self) -> list[RunIndex]:
        """Read every run with its batch keys, digests, inner keys and image names.

        Returns
        -------
        list of RunIndex
        """
        db = self._db
        runs = {r[0]: RunIndex(RunRecord(*r)) for r in db.execute(
            "SELECT name, settings, template, status, created, closed, batches, images, pixels, "
            "seq FROM runs ORDER BY created")}  # fmt: skip
        for run, key, digest, seq in db.execute("SELECT run, key, digest, seq FROM batches"):
            runs[run].batches.append((key, digest, seq))
        for run, key, batch in db.execute("SELECT run, key, batch FROM batch_keys"):
            runs[run].keys.append((key, batch))
        for run, name, batch in db.execute("SELECT run, name, batch FROM images"):
            runs[run].images.append((name, batch))
        return list(runs.values())

    def commit(self, changes: Sequence[Change]) -> None:
        """Apply ``changes`` in one transaction, fsynced before returning.

        Parameters
        ----------
        changes : sequence of PutRun, AddBatch or DeleteRun

        Raises
        ------
        sqlite3.Error
            Nothing was applied (for example a batch key, inner key or image name that
            already exists).
        """
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                for c in changes:
                    self._apply(db, c)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @staticmethod
    def _apply(db: sqlite3.Connection, c: Change) -> None:
        if isinstance(c, PutRun):
            r = c.record
            db.execute("INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?)",
                       (r.name, r.settings, r.template, r.status, r.created, r.closed,
                        r.batches, r.images, r.pixels, r.seq))  # fmt: skip
        elif isinstance(c, AddBatch):
            b = c.batch
            db.execute("INSERT INTO batches VALUES (?,?,?,?,?,?,?,?)",
                       (b.run, b.key, b.seq, b.digest, b.kind, b.pixels, b.images, b.state))  # fmt: skip
            db.executemany("INSERT INTO batch_keys VALUES (?,?,?)",
                           [(b.run, k, b.key) for k in b.keys])  # fmt: skip
            db.executemany("INSERT INTO images VALUES (?,?,?)",
                           [(b.run, n, b.key) for n in b.names])  # fmt: skip
        else:
            for table, column in (("images", "run"), ("batch_keys", "run"), ("batches", "run"),
                                  ("runs", "name")):  # fmt: skip
                db.execute(f"DELETE FROM {table} WHERE {column} = ?", (c.name,))

    def batch_states(self, run: str, upto: int) -> Iterator[bytes]:
        """Yield the stored states of ``run``'s batches numbered up to ``upto``, in order.

        Read one at a time in one read transaction (its own connection: a WAL reader sees the
        database as it was when the transaction began, whatever is committed meanwhile).

        Parameters
        ----------
        run : str
        upto : int

        Yields
        ------
        bytes
            Canonical states, compressed when large.
        """
        db = sqlite3.connect(self.path, isolation_level=None)  # a reader of its own (WAL)
        try:
            db.execute("BEGIN")  # one snapshot for every row
            rows = db.execute("SELECT state FROM batches WHERE run = ? AND seq <= ? ORDER BY seq",
                              (run, upto))  # fmt: skip
            for (state,) in rows:
                yield state
        finally:
            db.close()

    def close(self) -> None:
        """Close the database (SQLite checkpoints the WAL into the main file)."""
        with self._lock:
            self._db.close()
