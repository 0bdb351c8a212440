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
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["WalDamage", "scan_wal"]

_MAGIC = {0x377F0682: "<u4", 0x377F0683: ">u4"}  # checksum word byte order
_HEADER, _FRAME_HEADER = 32, 24


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
    """

    frames: int
    first_bad: int
    kept_commits: int
    lost_commits: int
    lost_frames: int


def _checksums(words: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SQLite's WAL checksum of each row of ``words`` (uint32, even length), from ``(s0, s1)``.

    ``s0 += x[i] + s1; s1 += x[i + 1] + s0`` over the pairs of 32-bit words, modulo 2**32; one
    row per frame, all frames at once (rows are independent given their starting values).
    """
    cols = np.ascontiguousarray(words.T)  # one contiguous row per word position
    s0, s1 = s0.astype(np.uint32), s1.astype(np.uint32)
    for i in range(0, cols.shape[0], 2):
        s0 += cols[i]
        s0 += s1
        s1 += cols[i + 1]
        s1 += s0
    return s0, s1


def scan_wal(path: str | Path) -> WalDamage | None:
    """Return what SQLite's recovery of the log at ``path`` would drop, or ``None`` if nothing.

    ``None`` also for a log SQLite would ignore anyway with nothing verifying in it (too short,
    no known magic, an impossible page size) and for a log whose only failing frames are at its
    end (a torn tail). Reads the file; never writes it.

    Parameters
    ----------
    path : str or Path
        The ``-wal`` file.

    Returns
    -------
    WalDamage or None
    """
    raw = Path(path).read_bytes()
    if len(raw) < _HEADER:
        return None
    head = np.frombuffer(raw, dtype=">u4", count=8)
    magic, page = int(head[0]), int(head[2])
    order = _MAGIC.get(magic)
    if order is None or page < 512 or page > 65536 or page & (page - 1):
        return None  # SQLite ignores such a log; nothing here to read frames by
    stride = _FRAME_HEADER + page
    n = (len(raw) - _HEADER) // stride
    if n == 0:
        return None
    h0, h1 = _checksums(np.frombuffer(raw, dtype=order, count=6).reshape(1, 6),
                        np.zeros(1, np.uint32), np.zeros(1, np.uint32))  # fmt: skip
    header_ok = int(h0[0]) == int(head[6]) and int(h1[0]) == int(head[7])
    body = np.frombuffer(raw, dtype=np.uint8, count=n * stride, offset=_HEADER).reshape(n, stride)
    fh = body[:, :_FRAME_HEADER].copy().view(">u4")  # (n, 6) frame headers, big-endian
    words = body[:, _FRAME_HEADER:].view(order)  # (n, page / 4), the checksum's byte order
    first8 = body[:, :8].copy().view(order)
    start0 = np.concatenate([head[6:7], fh[:-1, 4]]).astype(np.uint32)
    start1 = np.concatenate([head[7:8], fh[:-1, 5]]).astype(np.uint32)
    c0, c1 = _checksums(first8, start0, start1)
    c0, c1 = _checksums(words, c0, c1)
    salts_ok = (fh[:, 2] == head[4]) & (fh[:, 3] == head[5])
    ok = (c0 == fh[:, 4]) & (c1 == fh[:, 5]) & salts_ok & (fh[:, 0] != 0)
    commit = ok & (fh[:, 1] != 0)
    bad = np.flatnonzero(~ok)
    first = -1 if not header_ok else (int(bad[0]) if bad.size else n)
    if first >= n:
        return None  # every frame verifies
    later = np.flatnonzero(commit[first + 1 :]) + first + 1
    if later.size == 0:
        return None  # a torn tail: nothing committed after the failing frame
    kept = int(np.count_nonzero(commit[: max(first, 0)]))
    last_kept = int(np.flatnonzero(commit[:first])[-1]) if kept else -1
    return WalDamage(frames=n, first_bad=first + 1, kept_commits=kept,
                     lost_commits=int(later.size), lost_frames=int(later[-1]) - last_kept)  # fmt: skip
