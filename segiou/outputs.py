"""Writing output files safely: checked before any work, written atomically, never destructive.

Every file segiou writes (saved states, JSON and CSV reports, text reports) goes through
:func:`write_atomic`: the bytes go to a temporary file beside the target, are flushed to disk,
and replace the target in one step (``os.replace``), so a reader never sees half a file and a
failure leaves the old file as it was. A symlink is written *through*: its target file is
replaced, the link stays. Anything that is not a regular file (a folder, a character device such
as ``/dev/null``, a pipe, a socket) is refused, never replaced.

:func:`check_outputs` runs before an evaluation starts, so a bad output path costs nothing: it
refuses an empty path, a path whose folder does not exist or cannot be written, two outputs that
are the same file, and an output inside an input (a store or folder being read).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from segiou.errors import OutputError, UsageError

__all__ = ["check_output", "check_outputs", "write_atomic"]


def _target(path: Path) -> Path:
    """Return the file a write to ``path`` changes: itself, or where its symlinks lead."""
    return Path(os.path.realpath(path))


def check_output(
    path: str | os.PathLike[str], *, what: str = "output", create_parents: bool = False
) -> Path:
    """Check that ``path`` can be written as a regular file; return the file it names.

    Parameters
    ----------
    path : str or os.PathLike
        The output path. A symlink is followed to the file it names.
    what : str, default "output"
        How to name it in messages (e.g. ``"--json"``).
    create_parents : bool, default False
        The caller creates missing folders: a folder that does not exist yet is fine when the
        nearest one that exists is a writable folder.

    Returns
    -------
    Path
        The resolved target (symlinks followed).

    Raises
    ------
    UsageError
        The path is empty, names something that is not a regular file (a folder, a device, a
        pipe), or lies in a folder that does not exist or cannot be written.
    """
    text = os.fspath(path)
    if not text.strip():
        msg = f"{what} is empty; give a file path"
        raise UsageError(msg)
    given = Path(text)
    target = _target(given)
    via = f" (a link to {str(target)!r})" if target != given.absolute() else ""
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as err:
        msg = (
            f"{what} {text!r}{via} cannot be inspected ({err.strerror or err}); choose another path"
        )
        raise UsageError(msg) from err
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(st.st_mode)
            else "not a regular file (a device, pipe or socket)"
        )
        msg = (
            f"{what} {text!r}{via} is {kind}; segiou writes only regular files and never "
            "replaces anything else: give a file path"
        )
        raise UsageError(msg)
    folder = target.parent
    if create_parents and not folder.exists():
        folder = next(p for p in folder.parents if p.exists())
    if not folder.is_dir():
        if folder.exists():
            msg = f"{what} {text!r}{via}: {str(folder)!r} is not a folder"
        else:
            msg = f"{what} {text!r}{via}: folder {str(folder)!r} does not exist; create it first"
        raise UsageError(msg)
    if not os.access(folder, os.W_OK | os.X_OK) or (
        st is not None and not os.access(target, os.W_OK)
    ):
        msg = f"{what} {text!r}{via}: folder {str(folder)!r} is not writable; choose another path"
        raise UsageError(msg)
    return target


def check_outputs(
    outputs: Mapping[str, str | os.PathLike[str] | None],
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
    create_parents: bool = False,
) -> dict[str, Path | None]:
    """Check every output of a run before it starts: each writable, distinct, outside the inputs.

    Parameters
    ----------
    outputs : mapping of str to path or None
        Option name (for messages, e.g. ``"--json"``) to its path; ``None`` means not asked for
        (an empty string is refused, not skipped).
    inputs : iterable of path
        Stores and folders the run reads (local paths; URLs are skipped): no output may lie in
        one, where writing it would change or destroy the data being evaluated.
    create_parents : bool, default False
        As for :func:`check_output`.

    Returns
    -------
    dict of str to Path or None
        The resolved target of each output.

    Raises
    ------
    UsageError
        An output that :func:`check_output` refuses, two outputs that are the same file, or an
        output inside an input.
    """
    resolved: dict[str, Path | None] = {}
    seen: dict[Path, str] = {}
    roots = [_target(Path(os.fspath(p))) for p in inputs if "://" not in os.fspath(p)]
    for option, value in outputs.items():
        if value is None:
            resolved[option] = None
            continue
        target = check_output(value, what=option, create_parents=create_parents)
        if target in seen:
            msg = (
                f"{option} {os.fspath(value)!r} and {seen[target]} name the same file "
                f"({str(target)!r}); each output needs its own path"
            )
            raise UsageError(msg)
        for root in roots:
            if target == root or target.is_relative_to(root):
                msg = (
                    f"{option} {os.fspath(value)!r} lies inside {str(root)!r}, an input (writing "
                    "it would change the data being evaluated) or the error maps (replaced whole "
                    "by each run): write outputs elsewhere"
                )
                raise UsageError(msg)
        seen[target] = f"{option} {os.fspath(value)!r}"
        resolved[option] = target
    return resolved


def _utf8(text: str) -> bytes:
    """Encode text as UTF-8, keeping names made from non-UTF-8 file names (lone surrogates)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # rare: character by character
        out = bytearray()
        for ch in text:
            try:
                out += ch.encode("utf-8")
            except UnicodeEncodeError:
                o = ord(ch)  # os.fsdecode's surrogates are the original bytes; others escaped
                out += (
                    bytes([o - 0xDC00])
                    if 0xDC80 <= o <= 0xDCFF
                    else ch.encode("ascii", "backslashreplace")
                )
        return bytes(out)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, what: str = "output") -> Path:
    """Write ``data`` to ``path`` atomically: a temporary file beside it, then ``os.replace``.

    Parameters
    ----------
    path : str or os.PathLike
        The file to write. A symlink is written through (its target is replaced, the link
        stays); anything that is not a regular file is refused (see :func:`check_output`).
    data : str or bytes
        The content; text is written as UTF-8 (a name decoded from a file name that is not
        UTF-8, ``os.fsdecode``, is written back as its bytes; another lone surrogate as the
        backslash escape).
    what : str, default "output"
        How to name the file in messages.

    Returns
    -------
    Path
        The file written (symlinks followed).

    Raises
    ------
    UsageError
        As for :func:`check_output`.
    OutputError
        The write failed (a full disk, a permission, a vanished folder): the message names the
        file and the cause; the temporary file is removed and the old file is left as it was.
    """
    target = check_output(path, what=what)
    payload = _utf8(data) if isinstance(data, str) else data
    # not mkstemp, whose files are private (0600): a new file gets the mode the umask gives, a
    # replaced one keeps its own (a private state file stays private)
    tmp = target.parent / f".{target.name}.{secrets.token_hex(8)}.tmp"
    try:
        old_mode = stat.S_IMODE(target.stat().st_mode)
    except OSError:
        old_mode = None
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            if old_mode is not None:
                os.fchmod(fd, old_mode)
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(target)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        msg = (
            f"{what} {os.fspath(path)!r}: cannot write {str(target)!r} "
            f"({err.strerror or err}); nothing was changed there. Free space or "
            "choose a writable path"
        )
        raise OutputError(msg) from err
    except BaseException:  # Ctrl-C included: no partial file is left behind
        tmp.unlink(missing_ok=True)
        raise
    return target
