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

The log is read in pieces of a few megabytes: the memory the check needs does not grow with
the log.
"""

from __future__ import annotations

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
        Commits after ``first_bad`` whose frames verify: acknowledged, and dropped by SQLite.
    lost_frames : int
        Frames from ``first_bad`` up to the last of those commits.
    header : str
        Why the header fails, when ``first_bad`` is 0 (else empty).
    """

    frames: int
    first_bad: int
    kept_commits: int
    lost_commits: int
    lost_frames: int
    header: str = ""


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


def scan_wal(path: str | Path, *, page_size: int | None = None) -> WalDamage | None:
    """Return what SQLite's recovery of the log at ``path`` would drop, or ``None`` if nothing.

    ``None`` also for a log too short to hold a frame, for a log whose only failing frames are
    at its end (a torn tail), and for a log whose header fails with no commit verifying behind
    it (empty, or garbage). A failing header loses every commit that verifies without it (see
    the module's notes). Reads the file, a few megabytes at a time; never writes it.

    Parameters
    ----------
    path : str or Path
        The ``-wal`` file.
    page_size : int, optional
        The database's page size (:func:`db_page_size`), to read the frames by when the log's
        header fails. Without it, the header's if possible, else each size SQLite allows.

    Returns
    -------
    WalDamage or None
    """
    with Path(path).open("rb") as f:
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
                    found = _lost_without_header(fh, ok, problem)
                    if found is not None:
                        return found
            return None
        order = _MAGIC[int(head[0])]
        fh, oks = _read_frames(f, int(head[2]), (order,), start)
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
    return WalDamage(frames=n, first_bad=first + 1, kept_commits=kept,
                     lost_commits=int(later.size), lost_frames=int(later[-1]) - last_kept)  # fmt: skip


def _lost_without_header(fh: np.ndarray, ok: np.ndarray, problem: str) -> WalDamage | None:
    """Count the commits that verify behind a bad header (salts: of the first frame that does)."""
    good = np.flatnonzero(ok)
    if good.size == 0:
        return None
    salt1, salt2 = fh[good[0], 2], fh[good[0], 3]
    commits = np.flatnonzero(ok & (fh[:, 2] == salt1) & (fh[:, 3] == salt2) & (fh[:, 1] != 0))
    if commits.size == 0:
        return None  # only a transaction cut short: nothing acknowledged
    return WalDamage(frames=len(fh), first_bad=0, kept_commits=0, lost_commits=int(commits.size),
                     lost_frames=int(commits[-1]) + 1, header=problem)  # fmt: skip
