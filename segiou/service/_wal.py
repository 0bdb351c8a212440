"""Read an SQLite write-ahead log before SQLite does, to tell a torn tail from a damaged middle.

SQLite's recovery reads the log's frames in order and stops at the first one whose salts or
cumulative checksum do not verify: that frame and every frame after it are ignored, and the
first checkpoint then writes over them. A torn tail (the last, unanswered transaction cut
short by a crash) is exactly that, and is normal. But one frame damaged in the middle of the
log (bit rot, a bad sector) also ends the log there, and every later commit, each fsynced and
acknowledged, is dropped without a word.

The format (https://www.sqlite.org/fileformat2.html#walformat): a 32-byte header (magic
0x377f0682 or 0x377f0683, the low bit giving the byte order of the checksum words; format
version; page size; checkpoint sequence; salt-1; salt-2; checksum-1; checksum-2 of the first 24
bytes) and frames of a 24-byte header (page number; database size in pages on a commit frame,
else 0; salt-1; salt-2; checksum-1; checksum-2) and one page. The checksum of a frame runs over
its first 8 header bytes and its page, starting from the checksum of the frame before it (of
the log header for the first frame). All header fields are big-endian.

The rule. Each frame stores the running checksum after it, so frame ``k`` can be verified on
its own, from the checksum stored in frame ``k - 1``: that is the running checksum SQLite
computes whenever frames ``0 .. k - 1`` verify, so a frame verifies this way exactly when
SQLite's own check would pass on it, and it still verifies after a damaged frame before it (a
chance match is one in 2**64). A frame *after* the first failing one that carries the log's
current salts, verifies this way and is a commit frame was written, whole, by a transaction
after the failing frame. With ``synchronous=FULL`` SQLite fsyncs the log at every commit
before it writes the next transaction's frames, and a crash (``kill -9``) keeps every write
the process made, in order, so a crash leaves only a cut-short tail: a failing frame followed
by a verifying commit frame is damage, never a crash. Frames of an older generation of the log
(before a checkpoint restarted it) carry other salts and are not counted.

The log's own header. SQLite ignores the whole log when its header fails (an unknown magic
number, an impossible page size, or a header checksum that does not match: a damaged version,
checkpoint number or salt), so every commit in it is lost. Such a header says nothing reliable,
so the frames are read without it: by the database file's page size (the log's is the same),
in both checksum byte orders, with the salts of the first frame that verifies (the log's current
generation is written from its first frame on; the salts are not in the checksum, and every
frame repeats them). Any commit frame that verifies so was written whole and is lost; a header
that fails with nothing verifying behind it (an empty or garbage log) loses nothing.

What is already in the database. A commit SQLite drops is lost only if what it wrote is not
already where SQLite reads instead. A checkpoint copies the log's pages into the database file
and leaves the log as it is until the log restarts, so after a checkpoint (SQLite's automatic
one, every 1000 pages) a crash leaves a log whose every commit is also in the database file:
damage to its header then loses nothing. So, for the commits SQLite would drop, the last version
of each page they wrote (frames that verify) is compared with the page SQLite would read: that
of the last commit it keeps that wrote the page (a damaged frame's recovery reads the commits
before it from the log, not the database file), else the database file's (page ``n`` at
``(n - 1) * page_size``); and the size in pages after each commit with the database's (that of
the last commit kept, else the file's). A dropped commit keeps what it wrote to a page when SQLite
reads its version of the page or a later commit's, and its size when the database is at least
that large; a transaction with a frame that does not verify (its content unknown) is lost. The
check starts when every dropped commit keeps all it wrote; otherwise it counts the commits that
do not.

The log is read in pieces of a few megabytes: the memory the check needs does not grow with
the log.
"""

from __future__ import annotations

import hashlib
import io
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["WalDamage", "db_page_size", "scan_wal"]

_MAGIC = {0x377F0682: "<u4", 0x377F0683: ">u4"}  # checksum word byte order
_HEADER, _FRAME_HEADER = 32, 24
_PAGES = tuple(1 << k for k in range(9, 17))  # the page sizes SQLite allows: 512 .. 65536
_PIECE = 8 << 20  # bytes of frames read and checked at a time


@dataclass(frozen=True)
class WalDamage:
    """What a damaged log would lose.

    Attributes
    ----------
    frames : int
        Whole frames in the log.
    first_bad : int
        The first frame SQLite's recovery rejects (numbered from 1; 0 for the log's header).
    kept_commits : int
        Commits SQLite would recover (those before ``first_bad``).
    lost_commits : int
        Commits after ``first_bad`` whose frames verify: acknowledged, dropped by SQLite, and
        not (all their pages) in what it reads instead.
    lost_frames : int
        Frames from ``first_bad`` up to the last of those commits.
    header : str
        Why the header fails, when ``first_bad`` is 0 (else empty).
    in_database : int
        Commits SQLite drops whose every page is already in what it reads (a checkpoint copied
        them into the database file): not lost, not in ``lost_commits``.
    """

    frames: int
    first_bad: int
    kept_commits: int
    lost_commits: int
    lost_frames: int
    header: str = ""
    in_database: int = 0


def _checksums(words: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SQLite's WAL checksum of each row of ``words`` (uint32, even length), from ``(s0, s1)``.

    ``s0 += x[i] + s1; s1 += x[i + 1] + s0`` over the pairs of 32-bit words, modulo 2**32; one
    row per frame, all frames at once (rows are independent given their starting values).
    """
    cols = np.ascontiguousarray(words.T, dtype=np.uint32)  # one row per word position, native
    s0, s1 = s0.astype(np.uint32), s1.astype(np.uint32)
    for i in range(0, cols.shape[0], 2):
        s0 += cols[i]
        s0 += s1
        s1 += cols[i + 1]
        s1 += s0
    return s0, s1


def _read_frames(
    f: io.BufferedReader, page: int, orders: tuple[str, ...], start: tuple[int, int]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Frame headers and, per checksum byte order, which frames verify (salts not compared).

    A frame verifies when its page number is not 0 and its stored checksum is the one computed
    from the checksum stored in the frame before it (``start`` for the first frame). Reads the
    frames from the log's 33rd byte to its end in pieces of about ``_PIECE`` bytes.
    """
    stride = _FRAME_HEADER + page
    per = max(1, _PIECE // stride)
    buf = bytearray(per * stride)
    arr = np.frombuffer(buf, np.uint8)
    heads: list[np.ndarray] = []
    oks: dict[str, list[np.ndarray]] = {o: [] for o in orders}
    prev = np.array(start, np.uint32)
    f.seek(_HEADER)
    while True:
        m = f.readinto(buf) // stride
        if m == 0:
            break
        body = arr[: m * stride].reshape(m, stride)
        fh = body[:, :_FRAME_HEADER].copy().view(">u4").astype(np.uint32)  # (m, 6)
        start0 = np.concatenate([prev[:1], fh[:-1, 4]])
        start1 = np.concatenate([prev[1:], fh[:-1, 5]])
        for order in orders:
            c0, c1 = _checksums(body[:, :8].copy().view(order), start0, start1)
            c0, c1 = _checksums(body[:, _FRAME_HEADER:].view(order), c0, c1)
            oks[order].append((c0 == fh[:, 4]) & (c1 == fh[:, 5]) & (fh[:, 0] != 0))
        heads.append(fh)
        prev = fh[-1, 4:6].copy()
        if m < per:
            break
    if not heads:
        return np.zeros((0, 6), np.uint32), {o: np.zeros(0, bool) for o in orders}
    return np.concatenate(heads), {o: np.concatenate(v) for o, v in oks.items()}


def _header_problem(head: np.ndarray, raw: bytes) -> str:
    """Why SQLite ignores the log with the 32-byte header ``raw`` (``head``: its words), or ``""``."""
    magic, page = int(head[0]), int(head[2])
    order = _MAGIC.get(magic)
    if order is None:
        return f"an unknown magic number (0x{magic:08x})"
    if page not in _PAGES:
        return f"an impossible page size ({page})"
    h0, h1 = _checksums(np.frombuffer(raw, dtype=order, count=6).reshape(1, 6),
                        np.zeros(1, np.uint32), np.zeros(1, np.uint32))  # fmt: skip
    if int(h0[0]) != int(head[6]) or int(h1[0]) != int(head[7]):
        return "a checksum that does not match its first 24 bytes (one of them, or it, is damaged)"
    return ""


def db_page_size(path: str | Path) -> int | None:
    """Return the page size in the header of the SQLite database at ``path`` (``None``: unreadable).

    Parameters
    ----------
    path : str or Path
        The database file (not its log).

    Returns
    -------
    int or None
    """
    try:
        with Path(path).open("rb") as f:
            head = f.read(18)
    except OSError:
        return None
    if len(head) < 18 or not head.startswith(b"SQLite format 3\0"):
        return None
    page = struct.unpack(">H", head[16:18])[0]
    page = 65536 if page == 1 else page
    return page if page in _PAGES else None


def scan_wal(
    path: str | Path, *, page_size: int | None = None, database: str | Path | None = None
) -> WalDamage | None:
    """Return what SQLite's recovery of the log at ``path`` would drop, or ``None`` if nothing.

    ``None`` also for a log too short to hold a frame, for a log whose only failing frames are
    at its end (a torn tail), for a log whose header fails with no commit verifying behind it
    (empty, or garbage), and when every commit SQLite would drop is already in the database file
    (a checkpoint copied it there; see the module's notes). A failing header loses every commit
    that verifies without it and is not in the database file. Reads the files, a few megabytes
    at a time; never writes them.

    Parameters
    ----------
    path : str or Path
        The ``-wal`` file.
    page_size : int, optional
        The database's page size (:func:`db_page_size`), to read the frames by when the log's
        header fails. Without it, the header's if possible, else each size SQLite allows.
    database : str or Path, optional
        The database file, whose pages are compared with those of the commits SQLite would
        drop. By default ``path`` without its ``-wal`` suffix; a file that cannot be read holds
        none of them.

    Returns
    -------
    WalDamage or None
    """
    path = Path(path)
    if database is None and path.name.endswith("-wal"):
        database = path.with_name(path.name[: -len("-wal")])
    with path.open("rb") as f:
        raw = f.read(_HEADER)
        if len(raw) < _HEADER:
            return None
        head = np.frombuffer(raw, dtype=">u4", count=8)
        start = (int(head[6]), int(head[7]))
        problem = _header_problem(head, raw)
        if problem:
            pages = [page_size] if page_size in _PAGES else []
            pages += [p for p in (int(head[2]),) if p in _PAGES and p not in pages]
            pages = pages or list(_PAGES)
            for page in pages:
                fh, oks = _read_frames(f, page, ("<u4", ">u4"), start)
                for ok in oks.values():
                    good = np.flatnonzero(ok)
                    if good.size == 0:
                        continue
                    member = ok & (fh[:, 2] == fh[good[0], 2]) & (fh[:, 3] == fh[good[0], 3])
                    commits = np.flatnonzero(member & (fh[:, 1] != 0))
                    if commits.size == 0:
                        return None  # only a transaction cut short: nothing acknowledged
                    lost = _not_in_database(f, page, fh, member, commits, 0, None, database)
                    if not lost.any():
                        return None  # every commit in the log is in the database file
                    return WalDamage(frames=len(fh), first_bad=0, kept_commits=0,
                                     lost_commits=int(lost.sum()),
                                     lost_frames=int(commits[lost][-1]) + 1, header=problem,
                                     in_database=int(np.count_nonzero(~lost)))  # fmt: skip
            return None
        order = _MAGIC[int(head[0])]
        page = int(head[2])
        fh, oks = _read_frames(f, page, (order,), start)
        n = len(fh)
        ok = oks[order] & (fh[:, 2] == head[4]) & (fh[:, 3] == head[5])
        commit = ok & (fh[:, 1] != 0)
        bad = np.flatnonzero(~ok)
        first = int(bad[0]) if bad.size else n
        if first >= n:
            return None  # every frame verifies (or there is none)
        later = np.flatnonzero(commit[first + 1 :]) + first + 1
        if later.size == 0:
            return None  # a torn tail: nothing committed after the failing frame
        kept = int(np.count_nonzero(commit[:first]))
        last_kept = int(np.flatnonzero(commit[:first])[-1]) if kept else -1
        size = int(fh[last_kept, 1]) if kept else None
        lost = _not_in_database(f, page, fh, ok, later, last_kept + 1, size, database)
    if not lost.any():
        return None  # every commit SQLite drops is in what it reads (a checkpoint copied it)
    return WalDamage(frames=n, first_bad=first + 1, kept_commits=kept,
                     lost_commits=int(lost.sum()), lost_frames=int(later[lost][-1]) - last_kept,
                     in_database=int(np.count_nonzero(~lost)))  # fmt: skip


def _digest(data: bytes | memoryview) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _frame_digests(f: io.BufferedReader, page: int, frames: np.ndarray) -> dict[int, bytes]:
    """Digest the page in each of ``frames`` (indices), reading the log in pieces."""
    stride = _FRAME_HEADER + page
    per = max(1, _PIECE // stride)
    buf = bytearray(per * stride)
    view = memoryview(buf)
    wanted = np.unique(frames)
    out: dict[int, bytes] = {}
    at = k = 0
    f.seek(_HEADER)
    while k < wanted.size:
        m = f.readinto(buf) // stride
        if m == 0:
            break
        while k < wanted.size and wanted[k] < at + m:
            j = int(wanted[k]) - at
            out[int(wanted[k])] = _digest(view[j * stride + _FRAME_HEADER : (j + 1) * stride])
            k += 1
        at += m
        if m < per:
            break
    return out


def _not_in_database(
    f: io.BufferedReader, page: int, fh: np.ndarray, member: np.ndarray, lost: np.ndarray,
    begin: int, kept_size: int | None, database: str | Path | None,
) -> np.ndarray:  # fmt: skip
    """Which of the commit frames ``lost`` (that SQLite drops) wrote what SQLite would not read.

    Their transactions are the frames from ``begin`` to ``lost[-1]``; ``member`` says which
    frames verify. SQLite reads page ``n`` from the last frame before ``begin`` that wrote it (the
    commits it keeps), else from the database file (at ``(n - 1) * page``), and the database has
    ``kept_size`` pages (the file's size without kept commits). A commit keeps what it wrote to a
    page when SQLite reads its version of the page or a later commit's; its size in pages when
    the database has that many. A transaction with a frame that does not verify (its content
    unknown) is lost.
    """
    out = np.ones(lost.size, bool)
    try:
        size = Path(database).stat().st_size if database is not None else -1
    except OSError:
        size = -1
    if size < 0:
        return out  # no database file to compare with: everything is lost
    pages_now = size // page if kept_size is None else kept_size
    idx = np.arange(begin, int(lost[-1]) + 1)
    txn = np.searchsorted(lost, idx)  # each frame's commit, by its position in ``lost``
    out[:] = fh[lost, 1] > pages_now
    out[np.unique(txn[~member[idx]])] = True
    mine = idx[member[idx]]
    written = np.unique(fh[mine, 0])
    older = fh[:begin, 0][::-1]
    pgs, at = np.unique(older, return_index=True)
    keep = np.isin(pgs, written)
    shadow = dict(zip(pgs[keep].tolist(), (begin - 1 - at[keep]).tolist(), strict=True))
    digests = _frame_digests(f, page, np.concatenate([mine, np.array(list(shadow.values()), int)]))
    reads: dict[int, bytes | None] = {}  # page: the version SQLite reads
    try:
        with Path(database).open("rb") as db:  # type: ignore[arg-type]
            for p in written.tolist():
                if p > pages_now:
                    reads[p] = None
                elif p in shadow:
                    reads[p] = digests[shadow[p]]
                else:
                    db.seek((p - 1) * page)
                    data = db.read(page)
                    reads[p] = _digest(data) if len(data) == page else None
    except OSError:
        return np.ones(lost.size, bool)
    versions: dict[int, dict[int, bytes]] = {}  # page: commit: the version it wrote
    for i in mine.tolist():
        versions.setdefault(int(fh[i, 0]), {})[int(txn[i - begin])] = digests[i]
    for p, by in versions.items():
        held = max((j for j, d in by.items() if d == reads[p]), default=-1)
        for j in by:
            if j > held:
                out[j] = True
    return out
