"""Named sets of label-image files (:class:`PngSet`) and pairing by name."""

from __future__ import annotations

import os
import re
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar, Literal, NoReturn

import numpy as np

from segiou.errors import (
    LossyMaskWarning,
    MaskNotFoundError,
    NamingError,
    UsageError,
)
from segiou.io._links import folder_id, linked_across, places
from segiou.io.png._colors import Colors, Via, check_colors, check_ids, colors_to_ids
from segiou.io.png._decode import SHOWN, decode_file, read_header
from segiou.labels import IdSpace, LabelSpec, load_spec

__all__ = [
    "CITYSCAPES_GT_PATTERN",
    "CITYSCAPES_NAME",
    "FolderLayout",
    "KeyFunc",
    "PngSet",
    "check_apart",
    "check_unique",
    "find_pairs",
    "png_set",
    "read_file",
]

FolderLayout = Literal["plain", "cityscapes"]
KeyFunc = Callable[[str], str]

#: Name of an image in the Cityscapes convention: ``<city>_<seq>_<frame>`` at the start.
CITYSCAPES_NAME = r"^(?P<name>.+?_\d{6}_\d{6})(?=[_.]|$)"
CITYSCAPES_GT_PATTERN = "*_gtFine_labelIds.png"


# -- the set ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PngSet:
    """Named label images in files (PNG, TIFF or ``.npy``), one image per file.

    Small and picklable (names and paths only): workers decode their own files.

    Attributes
    ----------
    names : tuple of str
        Image names, unique, in order (what pairs a prediction with its ground truth).
    paths : tuple of str
        Absolute path of each image's file.
    root : str
        The folder the files were found in (for messages); may be empty.
    layout : str
        Always ``"files"`` (a :class:`~segiou.io.zarr.MaskSet` is ``"stack"`` or ``"group"``).

    Raises
    ------
    NamingError
        ``names`` and ``paths`` differ in length, or a name is repeated.
    """

    names: tuple[str, ...]
    paths: tuple[str, ...]
    root: str = ""
    layout: ClassVar[str] = "files"

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(map(str, self.names)))
        object.__setattr__(self, "paths", tuple(str(Path(p).absolute()) for p in self.paths))
        if len(self.names) != len(self.paths):
            msg = (
                f"{self.where()}: {len(self.names)} names for {len(self.paths)} files; give one "
                "name per file"
            )
            raise NamingError(msg)
        check_unique(self.where(), dict(zip(self.paths, self.names, strict=True)))

    def __len__(self) -> int:
        return len(self.names)

    def where(self) -> str:
        """Describe the set (its folder), for messages.

        Returns
        -------
        str
            ``"folder <root>"``, or ``"<n> image file(s)"`` when ``root`` is empty.
        """
        return f"folder {self.root}" if self.root else f"{len(self.names)} image file(s)"

    def image_where(self, i: int) -> str:
        """File and name of image ``i``, for messages.

        Parameters
        ----------
        i : int
            Image index.

        Returns
        -------
        str
            ``"<path> (image '<name>')"``.

        Raises
        ------
        IndexError
            ``i`` is out of range.
        """
        return f"{self.paths[i]} (image {self.names[i]!r})"

    def image_shape(self, i: int) -> tuple[int, int]:
        """``(H, W)`` of image ``i``, from the file header only (no pixel decoding).

        Parameters
        ----------
        i : int
            Image index.

        Returns
        -------
        tuple of int

        Raises
        ------
        MaskNotFoundError
            The file is gone.
        ImageDecodeError
            Not a readable image or array, or not one 2-D mask.
        """
        return read_header(self.paths[i]).shape

    def n_pixels(self) -> int:
        """Total number of pixels (reads every header).

        Returns
        -------
        int
            The sum of ``H * W`` over all images (0 for an empty set).

        Raises
        ------
        MaskNotFoundError
            A file is gone.
        ImageDecodeError
            A file is not a readable image or array, or not one 2-D mask.
        """
        return sum(h * w for h, w in map(self.image_shape, range(len(self.names))))

    def read(
        self,
        i: int,
        spec: LabelSpec | str | Path | None = None,
        colors: Colors = "error",
        *,
        ids: IdSpace = "class",
    ) -> np.ndarray:
        """Decode image ``i`` to a 2-D integer mask.

        Parameters
        ----------
        i : int
            Image index.
        spec : LabelSpec, str or Path, optional
            Label spec, only used for colour (RGB/RGBA) images: each colour becomes an id of
            the spec in id space ``ids`` (see the module docstring).
        colors : {"error", "ignore"}
            An unknown or ambiguous colour raises (default) or becomes the ignore value.
        ids : {"class", "raw"}
            Id space colour images are decoded to: class ids (default), or the spec's raw ids
            (e.g. Cityscapes ``labelIds``; the spec needs a raw table). Pass the id space the
            mask is evaluated in (``gt_ids`` / ``pred_ids``). Grey, palette and array images
            are returned as stored, whatever ``ids`` says.

        Returns
        -------
        numpy.ndarray
            ``H x W``: ``uint8`` for grey and palette images (the palette index is the label),
            ``uint16`` / ``int32`` for 16/32-bit images, the file's dtype for ``.npy`` (a
            read-only memory map), ids in the smallest integer type for colour images.

        Raises
        ------
        MaskNotFoundError
            The file is gone.
        ImageDecodeError
            Undecodable file, unsupported mode, not 2-D, float values, colour image without a
            spec with colours (or without raw ids, for ``ids="raw"``), unknown colours (each
            listed with its pixel count, most frequent first) or ambiguous colours (with the
            ids sharing them).
        UsageError
            ``colors`` or ``ids`` is not one of the values above.
        LabelSpecError
            ``spec`` is an unknown name or an unreadable or invalid spec file (only loaded
            for colour images).
        """
        return read_file(self.paths[i], spec, colors, ids, "read")


def read_file(
    path: str, spec: LabelSpec | str | Path | None, colors: Colors, ids: IdSpace, via: Via
) -> np.ndarray:
    """Decode one file (see :meth:`PngSet.read`); ``via`` words the colour errors."""
    check_colors(colors)
    check_ids(ids)
    arr = decode_file(path)
    if arr.ndim == 3:
        sp = None if spec is None else load_spec(spec)
        return colors_to_ids(arr, sp, colors, path, ids, via)
    return arr


# -- finding files ----------------------------------------------------------------------------
def check_unique(where: str, names: dict[str, str]) -> None:
    """``names``: path -> name. Raise listing every repeated name with its files."""
    files: dict[str, list[str]] = {}
    for path, name in names.items():
        files.setdefault(name, []).append(path)
    dups = {n: ps for n, ps in files.items() if len(ps) > 1}
    if dups:
        shown = "; ".join(f"{n!r}: {', '.join(ps)}" for n, ps in sorted(dups.items())[:SHOWN])
        more = f" (and {len(dups) - SHOWN} more)" if len(dups) > SHOWN else ""
        msg = (
            f"{where}: {len(dups)} image name(s) occur more than once: {shown}{more}; every "
            "image needs a unique name. Narrow the file pattern, or name images with a regex"
        )
        raise NamingError(msg)


def _namer(
    layout: FolderLayout, regex: str | re.Pattern[str] | None, key: KeyFunc | None
) -> tuple[KeyFunc, str]:
    """Return a function relative path -> name or "" (no match), and its description."""
    if key is not None:
        return key, "the key function"
    if regex is None and layout == "cityscapes":
        regex = CITYSCAPES_NAME
        pat = re.compile(regex)
        return (lambda rel: _group(pat, rel.rsplit("/", 1)[-1])), (
            f"the Cityscapes name <city>_<seq>_<frame> ({regex}) of the file name"
        )
    if regex is not None:
        try:
            pat = regex if isinstance(regex, re.Pattern) else re.compile(regex)
        except re.error as err:
            msg = f"regex {regex!r} is invalid: {err}; give a regex with a group (?P<name>...)"
            raise NamingError(msg) from err
        if "name" not in pat.groupindex:
            msg = (
                f"regex {pat.pattern!r} has no group named 'name'; mark the image name with "
                r"(?P<name>...), e.g. '(?P<name>[^/]+)_gtFine_labelIds\.png$'"
            )
            raise NamingError(msg)
        return (lambda rel: _group(pat, rel)), f"regex {pat.pattern!r} on the relative path"
    if layout != "plain":
        msg = f"layout={layout!r} is unknown; expected 'plain' or 'cityscapes'"
        raise NamingError(msg)
    return (lambda rel: rel.rsplit(".", 1)[0] if "." in rel.rsplit("/", 1)[-1] else rel), (
        "the relative path without suffix"
    )


def _group(pat: re.Pattern[str], text: str) -> str:
    m = pat.search(text)
    return "" if m is None or m.group("name") is None else m.group("name")


def _list_files(folder: Path, pattern: str, side: str) -> list[Path]:
    if not folder.exists():
        msg = f"{side} folder {folder} does not exist; check the path"
        raise MaskNotFoundError(msg)
    if not folder.is_dir():
        msg = f"{side} folder {folder} is a file, not a folder; give the folder of the images"
        raise MaskNotFoundError(msg)
    every, broken = _walk(folder, side)
    rels = [(p, PurePosixPath(p.relative_to(folder).as_posix())) for p in every]
    files = sorted(p for p, rel in rels if rel.match(pattern))
    loose = [str(rel) for p, rel in rels if not rel.match(pattern) and _match_nocase(rel, pattern)]
    if broken_hits := [str(b) for b in broken if PurePosixPath(b.name).match(pattern)]:
        msg = (
            f"{side} folder {folder}: {len(broken_hits)} file(s) matching {pattern!r} are broken "
            f"links, e.g. {broken_hits[:3]}; their images would be skipped. Fix or remove them"
        )
        raise MaskNotFoundError(msg)
    if loose:
        msg = (
            f"{side} folder {folder}: {len(loose)} file(s) match {pattern!r} only when letter case "
            f"is ignored, e.g. {loose[:3]}, and would be skipped; rename them, or pass a pattern "
            f"that matches them (--{side}-pattern)"
        )
        raise NamingError(msg)
    if not files:
        others = Counter(p.suffix.lower() or "(none)" for p in every)
        found = ", ".join(f"{n} {s}" for s, n in others.most_common(5)) or "no files at all"
        msg = (
            f"{side} folder {folder}: no file matches {pattern!r} (searched recursively); it "
            f"holds {found}. Pass the matching file pattern (--{side}-pattern)"
        )
        raise MaskNotFoundError(msg)
    return files


def _walk(folder: Path, side: str) -> tuple[list[Path], list[Path]]:
    """Every file under ``folder`` (following links to folders), and the broken links.

    A folder reached twice (through a link, or a link loop) is read once, so an image is never
    listed under two names; a folder that cannot be read is an error, never skipped.
    """
    seen: set[tuple[int, int]] = set()
    files: list[Path] = []
    broken: list[Path] = []

    def refuse(err: OSError) -> None:
        msg = (
            f"{side} folder {folder}: cannot read {err.filename!r} ({err.strerror}); its images "
            "would be skipped. Make it readable or remove it"
        )
        raise MaskNotFoundError(msg) from err

    for top, dirs, names in os.walk(folder, followlinks=True, onerror=refuse):
        st = Path(top).stat()
        if (st.st_dev, st.st_ino) in seen:  # a link back to a folder already read
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()  # deterministic: of two ways to one folder, the first in sorted order names it
        for name in names:
            p = Path(top) / name
            if p.is_file():
                files.append(p)
            elif p.is_symlink() and not p.exists():
                broken.append(p)
    return files, broken


def _match_nocase(rel: PurePosixPath, pattern: str) -> bool:
    return PurePosixPath(str(rel).lower()).match(pattern.lower())


def png_set(
    folder: str | Path,
    pattern: str = "*.png",
    *,
    layout: FolderLayout = "plain",
    regex: str | re.Pattern[str] | None = None,
    key: KeyFunc | None = None,
    side: str = "gt",
) -> PngSet:
    """List the label images of one folder (recursively) and name them.

    Parameters
    ----------
    folder : str or Path
        Folder searched recursively.
    pattern : str
        Glob matched by file names (or relative paths), e.g. ``"*.png"``, ``"*.tif"``,
        ``"*_gtFine_labelIds.png"``.
    layout : {"plain", "cityscapes"}
        Naming rule: the relative path without suffix, or the Cityscapes
        ``<city>_<seq>_<frame>`` prefix of the file name.
    regex : str or re.Pattern, optional
        Instead: a regex with a group ``(?P<name>...)``, searched in the relative path
        (``/`` separators).
    key : callable, optional
        Instead: a function from the relative path to the name.
    side : str
        ``"gt"`` or ``"pred"``, for messages.

    Returns
    -------
    PngSet
        Sorted by name.

    Raises
    ------
    MaskNotFoundError
        The folder does not exist or no file matches.
    NamingError
        A file whose path gives no name (listed), or a name given to several files (listed).
    """
    root = Path(folder)
    files = _list_files(root, pattern, side)
    namer, how = _namer(layout, regex, key)
    named: dict[str, str] = {}
    unnamed = []
    for p in files:
        rel = p.relative_to(root).as_posix()
        name = namer(rel)
        if name:
            named[str(p.absolute())] = name
        else:
            unnamed.append(rel)
    if unnamed:
        msg = (
            f"{side} folder {root}: {len(unnamed)} of {len(files)} file(s) matching {pattern!r} "
            f"get no image name from {how}, e.g. {unnamed[:3]}; narrow the file pattern or fix "
            "the naming rule (--regex with a group (?P<name>...))"
        )
        raise NamingError(msg)
    check_unique(f"{side} folder {root}", named)
    _warn_lossy(root, side, list(named))
    order = sorted(named.items(), key=lambda kv: kv[1])
    return PngSet(tuple(n for _, n in order), tuple(p for p, _ in order), str(root))


#: Lossy image formats (Pillow's names; MPO files are JPEG and identified as such here).
LOSSY_FORMATS = {"JPEG": "JPEG", "WEBP": "WebP"}


def lossy_format(path: str) -> str | None:
    """Return the lossy format of a file's data (``"JPEG"``, ``"WebP"``), else ``None``.

    Decided by the file's first bytes, as Pillow identifies the format it decodes (its
    plugins' own tests of them), not by the file's suffix: JPEG data in a file named ``.png``
    is JPEG. ``None`` for any other format and for a file that cannot be read (decoding it
    reports that).
    """
    from PIL import Image, JpegImagePlugin, WebPImagePlugin  # noqa: F401 - registers both

    try:
        with Path(path).open("rb") as f:
            prefix = f.read(16)
    except OSError:
        return None
    for fmt, shown in LOSSY_FORMATS.items():
        accept = Image.OPEN[fmt][1]
        if accept is not None and accept(prefix) is True:
            return shown
    return None


def _warn_lossy(root: Path, side: str, paths: list[str]) -> None:
    """Warn once per folder when label masks come in a lossy format (JPEG, WebP).

    Every file's data are checked (a few microseconds a file): the suffix can lie.
    """
    found = [(p, f) for p in paths if (f := lossy_format(p)) is not None]
    if found:
        path, fmt = found[0]
        name = Path(path).name
        named = Path(path).suffix.lower() in (".jpg", ".jpeg", ".jpe", ".jfif", ".webp")
        lie = (
            ""
            if named
            else f" ({fmt} data in a file named {Path(path).suffix or 'without suffix'})"
        )
        kinds = "/".join(sorted({f for _, f in found}))
        msg = (
            f"{side} folder {root}: {len(found)} of {len(paths)} mask(s) are stored in a lossy "
            f"format ({kinds}), e.g. {name!r}{lie}: compression changes labels "
            "near region edges. Values that are no class nor ignore value are reported as "
            "unexpected; artefacts that happen to be valid class ids cannot be told apart and "
            "are counted as such. Save label masks as PNG"
        )
        warnings.warn(LossyMaskWarning(msg), stacklevel=3)


def find_pairs(
    gt_dir: str | Path,
    pred_dir: str | Path,
    *,
    gt_pattern: str | None = None,
    pred_pattern: str | None = None,
    layout: FolderLayout = "plain",
    regex: str | re.Pattern[str] | None = None,
    pred_regex: str | re.Pattern[str] | None = None,
    key: KeyFunc | None = None,
) -> tuple[PngSet, PngSet]:
    """List ground-truth and prediction images and name them so that pairs share a name.

    Which ground-truth images lack a prediction (or the reverse) is not decided here: the
    evaluation reports that.

    Parameters
    ----------
    gt_dir, pred_dir : str or Path
        Folders searched recursively.
    gt_pattern : str, optional
        Glob of ground-truth files: ``"*.png"``, or ``"*_gtFine_labelIds.png"`` with
        ``layout="cityscapes"``.
    pred_pattern : str, optional
        Glob of prediction files: ``gt_pattern``, or ``"*.png"`` with ``layout="cityscapes"``.
    layout : {"plain", "cityscapes"}
        ``plain``: an image's name is its path relative to the folder without suffix.
        ``cityscapes``: ``gtFine/<split>/<city>/<name>_gtFine_labelIds.png`` pairs with a
        result ``<name>*.png`` anywhere under ``pred_dir`` (``name`` is
        ``<city>_<seq>_<frame>``), as in cityscapesScripts.
    regex : str or re.Pattern, optional
        A regex with a group ``(?P<name>...)`` searched in each relative path (both sides,
        unless ``pred_regex`` is given); overrides ``layout``'s naming.
    pred_regex : str or re.Pattern, optional
        The regex of the prediction side.
    key : callable, optional
        A function from a relative path to the image name, for both sides; overrides all.

    Returns
    -------
    (PngSet, PngSet)
        Ground truth and predictions, each sorted by name.

    Raises
    ------
    MaskNotFoundError
        A folder does not exist, or no file matches its pattern.
    NamingError
        A file that gets no name, or duplicate names on one side (listed with their files).
    UsageError
        A file listed on both sides (:func:`check_apart`): the same folder, or one inside the
        other.

    Examples
    --------
    >>> from PIL import Image
    >>> for path in ("gtFine/val/frankfurt/frankfurt_000000_000294_gtFine_labelIds.png",
    ...              "results/frankfurt_000000_000294_pred.png"):
    ...     Path(path).parent.mkdir(parents=True, exist_ok=True)
    ...     Image.fromarray(np.zeros((4, 6), np.uint8)).save(path)
    >>> gt, pred = find_pairs("gtFine/val", "results", layout="cityscapes")
    >>> gt.names, pred.names
    (('frankfurt_000000_000294',), ('frankfurt_000000_000294',))
    """
    city = layout == "cityscapes"
    gp = gt_pattern or (CITYSCAPES_GT_PATTERN if city else "*.png")
    pp = pred_pattern or ("*.png" if city else gp)
    gt = png_set(gt_dir, gp, layout=layout, regex=regex, key=key, side="gt")
    pr = pred_regex if pred_regex is not None else regex
    pred = png_set(pred_dir, pp, layout=layout, regex=pr, key=key, side="pred")
    check_apart(gt, pred)
    return gt, pred


def check_apart(gt: PngSet, pred: PngSet) -> None:
    """Refuse ground-truth and prediction sets that share files.

    The same folder on both sides scores every prediction against itself (100%); a folder
    inside the other (``--gt val --pred val/preds``, or linked into it) is listed with it, so
    its files are counted on both sides (predictions as extra ground-truth images). Folders
    are compared by identity (device and inode: links followed, and a bind mount is the
    folder it mounts, which resolving paths cannot see). A file that is a link to a file the
    other side lists is that file; two files linking to one target that neither side lists
    (a content-addressed cache's blob) are not shared. Sets that share a folder but no file
    (different file patterns) are fine.

    Parameters
    ----------
    gt, pred : PngSet
        The two sides.

    Raises
    ------
    UsageError
        A file is in both sets (the message says how, and what to do).
    """
    seen: dict[str, tuple[int, int] | str] = {}
    gt_places, pred_places = places(gt.paths, seen), places(pred.paths, seen)
    shared = [p for r, p in pred_places[0].items() if r in gt_places[0]]
    if shared:
        _refuse_shared(gt, pred, shared, seen)
    linked, side, other = linked_across(gt_places, pred_places)
    if not linked:
        return
    path, target = linked[0]
    msg = (
        f"{len(linked)} {side} file(s) are links to the {other} files themselves, e.g. "
        f"{path} -> {target}: every such prediction would be scored against itself. Give "
        "the predictions' own files (--pred); links to one blob of a cache that neither side "
        "lists (Hugging Face hub, git-annex, DVC) are fine"
    )
    raise UsageError(msg)


def _refuse_shared(
    gt: PngSet, pred: PngSet, shared: list[str], seen: dict[str, tuple[int, int] | str]
) -> NoReturn:
    same = (
        gt.root
        and pred.root
        and folder_id(str(Path(gt.root).absolute()), seen)
        == folder_id(str(Path(pred.root).absolute()), seen)
    )
    if same:
        msg = (
            f"the ground truth and the predictions are the same folder, {gt.root}"
            + (f" and {pred.root}" if pred.root != gt.root else "")
            + f" ({len(shared)} file(s) on both sides): every prediction would be scored "
            "against itself. Give the predictions' folder (--pred), or file patterns that "
            "tell the two apart (--gt-pattern, --pred-pattern)"
        )
        raise UsageError(msg)
    msg = (
        f"{len(shared)} file(s) are listed both as ground truth ({gt.where()}) and as "
        f"predictions ({pred.where()}), e.g. {shared[:3]}: one folder is inside the other (or "
        "linked into it), and the folders are searched recursively, so these files would be "
        "counted on both sides. Move the predictions out of the ground-truth folder (or the "
        "other way round), or give file patterns that tell the two apart (--gt-pattern, "
        "--pred-pattern)"
    )
    raise UsageError(msg)
