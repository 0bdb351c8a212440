"""``segiou box`` and ``segiou sets``: overlap of two boxes, or of two label sets.

``register(subparsers)`` adds both subcommands to an argparse subparsers object; each sets
``func`` to a callable taking the parsed namespace and returning the exit code (0 ok, 2 bad
input: a :class:`~segiou.errors.UsageError` whose message :func:`segiou.cli.main` prints).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Sequence
from fractions import Fraction
from html import escape
from pathlib import Path

from segiou.errors import OutputError, SegiouError, UsageError
from segiou.geometry.boxes import BOX_FORMATS, BoxOverlap, box_overlap
from segiou.geometry.sets import set_overlap
from segiou.geometry.verdicts import COCO_STRICT_THRESHOLD, COCO_THRESHOLDS, VOC_THRESHOLD, verdicts
from segiou.outputs import write_atomic

__all__ = ["register"]

EXIT_OK = 0

_BOX_FIELDS = {
    "xyxy": "x1,y1,x2,y2",
    "xywh": "x,y,w,h",
    "cxcywh": "cx,cy,w,h",
}
_SVG_SIZE = 400  # longest side of the drawing, in SVG units
_SVG_MARGIN = 20
_FONT = 'font-family="sans-serif" font-size="12"'


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``box`` and ``sets`` subcommands to ``subparsers``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The object returned by ``ArgumentParser.add_subparsers()``.

    Notes
    -----
    Each subparser sets ``func``: call ``args.func(args)`` after parsing; it returns 0, or
    raises :class:`~segiou.errors.UsageError` when the input is invalid (:func:`segiou.cli.main`
    prints its message and exits 2).

    Examples
    --------
    >>> import argparse
    >>> from segiou.cli.geometry import register
    >>> parser = argparse.ArgumentParser(prog="segiou")
    >>> register(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["sets", "cat,dog", "dog"])
    >>> args.func(args)  # doctest: +NORMALIZE_WHITESPACE
    set 1         cat, dog  (2)
    set 2         dog  (1)
    intersection  dog  (1)
    union         cat, dog  (2)
    Jaccard       0.500000  = 1 / 2
    Dice          0.666667  = 2 x 1 / (2 + 1)
    0
    """
    box = subparsers.add_parser(
        "box",
        help="IoU, Dice, GIoU, DIoU, CIoU and match verdicts of two bounding boxes",
        description=(
            "Compare two boxes: areas, intersection, union, IoU, Dice, GIoU, DIoU, CIoU, and "
            "the match verdicts at your threshold, PASCAL VOC 0.5, COCO 0.75 / 0.95 and the "
            "COCO 0.50:0.95 sweep. Image coordinates: origin top-left, y downward."
        ),
        epilog="Boxes may start with a negative number: segiou box -5,0,10,10 0,0,10,10",
    )
    box.add_argument("box1", metavar="BOX1", help="first box, e.g. 50,50,150,150")
    box.add_argument("box2", metavar="BOX2", help="second box, e.g. 80,80,180,180")
    box.add_argument(
        "--format",
        dest="box_format",
        choices=BOX_FORMATS,
        default="xyxy",
        help="x1,y1,x2,y2 corners, x,y,w,h or cx,cy,w,h (default: %(default)s)",
    )
    box.add_argument(
        "--threshold",
        type=float,
        default=VOC_THRESHOLD,
        help="match when IoU >= this value (default: %(default)s)",
    )
    box.add_argument(
        "--inclusive",
        action="store_true",
        help="PASCAL VOC devkit pixel corners: a box spans x2 - x1 + 1 pixels (xyxy only)",
    )
    box.add_argument(
        "--svg", metavar="PATH", type=Path, help="also draw both boxes and their overlap"
    )
    box.set_defaults(func=_cmd_box)

    sets = subparsers.add_parser(
        "sets",
        help="Jaccard and Dice of two label sets",
        description="Compare two label sets: intersection, union, Jaccard and Dice.",
    )
    sets.add_argument("gt", metavar="SET1", help='labels, e.g. "cat,dog,bird"')
    sets.add_argument("pred", metavar="SET2", help='labels, e.g. "dog,bird,fish"')
    sets.add_argument("--sep", default=",", help="label separator (default: %(default)r)")
    sets.add_argument("--lower", action="store_true", help="compare labels case-insensitively")
    sets.add_argument(
        "--keep-duplicates",
        action="store_true",
        help="compare as multisets: a label given k times counts k times",
    )
    sets.add_argument(
        "--empty",
        type=float,
        default=1.0,
        help="Jaccard and Dice of two empty sets (default: %(default)s)",
    )
    sets.set_defaults(func=_cmd_sets)


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


#: An argument starting with a negative number: a box ``-5,0,10,10`` (``-5,0,10,10,``,
#: ``-5,0,10`` too: the box parser names what is wrong) or labels ``-1,2``. No option of
#: ``box`` or ``sets`` starts with ``-`` and a digit, so argparse would otherwise take it for one.
_NEGATIVE = re.compile(r"-[\d.]")
#: Options whose value follows them: their value is left to argparse (``--threshold -0.5``).
_TAKES_VALUE = frozenset({"--format", "--threshold", "--svg", "--sep", "--empty"})


def shield_negative_boxes(argv: Sequence[str]) -> list[str]:
    """Mark ``segiou box`` / ``segiou sets`` arguments such as ``-5,0,10,10`` as positional.

    argparse reads a leading ``-`` as an option; a leading space keeps the argument positional
    (the box parser and the label splitter ignore it). Arguments after ``--``, option values
    and other commands are left as they are.

    Parameters
    ----------
    argv : sequence of str
        Command-line arguments without the program name.

    Returns
    -------
    list of str
        The arguments to parse.

    Examples
    --------
    >>> shield_negative_boxes(["box", "-5,0,10,10", "0,0,10,10", "--threshold", "0.7"])
    ['box', ' -5,0,10,10', '0,0,10,10', '--threshold', '0.7']
    >>> shield_negative_boxes(["sets", "-1,2", "1"])
    ['sets', ' -1,2', '1']
    """
    args = list(argv)
    if not args or args[0] not in ("box", "sets"):
        return args
    end = args.index("--") if "--" in args else len(args)
    return [
        " " + a if 0 < i < end and _NEGATIVE.match(a) and args[i - 1] not in _TAKES_VALUE else a
        for i, a in enumerate(args)
    ]


_INTEGER = re.compile(r"[+-]?\d+")


def _parse_box(text: str, name: str, fmt: str) -> list[int | float]:
    """Read four numbers: integer literals as exact ints (the library's 2**53 guard sees them).

    A number float64 cannot hold exactly from 2**53 on (``9007199254740993.0``, or such an
    integer beside a fractional number, which numpy would make a float) is refused.
    """
    text = text.strip()
    fields = _BOX_FIELDS[fmt]
    parts = [p for p in re.split(r"[,\s]+", text.strip().strip("[]()")) if p]
    if len(parts) != 4:
        msg = (
            f"{name} {text!r} has {len(parts)} number(s); expected 4 as {fields} "
            f"(--format {fmt}), e.g. 50,50,150,150"
        )
        raise UsageError(msg)
    values: list[int | float] = []
    for part in parts:
        try:
            values.append(int(part) if _INTEGER.fullmatch(part) else float(part))
        except ValueError:
            msg = f"{name} {text!r}: {part!r} is not a number; expected 4 numbers as {fields}"
            raise UsageError(msg) from None
    floats = any(isinstance(v, float) for v in values)
    for part, v in zip(parts, values, strict=True):
        if _rounded(part, v, floats):
            try:
                exact = float(v).is_integer()  # the value float64 holds, in full
                shown = str(int(float(v))) if exact else repr(float(v))
            except OverflowError:
                shown = "inf"
            msg = (
                f"{name} {text!r}: {part} cannot be held in float64, which would read it as "
                f"{shown} (whole numbers are exact only up to 2**53)"
                + (
                    " (a number with a fraction makes the box float64)"
                    if isinstance(v, int)
                    else ""
                )
                + ": shift or rescale the boxes"
            )
            raise UsageError(msg)
    return values


def _rounded(part: str, value: float, floats: bool) -> bool:
    """Whether float64 rounds the number written as ``part`` by a whole unit or more.

    Below 2**53 rounding stays under one unit (ordinary decimal rounding, ``0.1``). An integer
    literal stays an exact int unless its box holds a float, which makes numpy convert it.
    """
    if isinstance(value, int):
        if not floats:
            return False  # the library refuses integers beyond 2**53 itself
        try:
            return float(value) != value
        except OverflowError:
            return True
    if math.isfinite(value) and abs(value) < 2**53:
        return False
    if part.lstrip("+-").lower() in ("inf", "infinity", "nan"):
        return False  # the library refuses non-finite coordinates with its own message
    try:
        return Fraction(part) != Fraction(value)
    except OverflowError:  # e.g. 1e400: read as inf
        return True


# The library names its keyword arguments; the command line names the matching options.
_OPTION_NAMES = (
    (r"\bfmt='(\w+)'", r"--format \1"),
    (r"\binclusive=True\b", "--inclusive"),
    (r"\bthreshold=", "--threshold "),
    (r"\bempty=", "--empty "),
)


def _cli_terms(err: SegiouError) -> str:
    """Return the library's error message with its keyword arguments named as options."""
    message = str(err)
    for pattern, option in _OPTION_NAMES:
        message = re.sub(pattern, option, message)
    return message


# --------------------------------------------------------------------------------------------
# segiou box
# --------------------------------------------------------------------------------------------


def _num(value: float) -> str:
    """Every digit needed to tell numbers apart: ``50``, ``123456.5``, ``9007199254740991``."""
    return str(int(value)) if value.is_integer() and abs(value) <= 2**53 else repr(value)


def _score(value: float, thresholds: Sequence[float]) -> str:
    """Six decimals, or every digit where six would misstate it.

    Six decimals misstate an IoU when they cross one of the ``thresholds`` the verdicts use
    (0.4999996 shown as 0.500000 beside "no match"), or show an exact 0 or 1 it is not.
    """
    shown = f"{value:.6f}"
    rounded = float(shown)
    if rounded != value and (
        rounded in (0.0, 1.0) or any((rounded >= t) != (value >= t) for t in thresholds)
    ):
        return repr(value)
    return shown


def _coords(box: tuple[float, ...]) -> str:
    return ", ".join(_num(v) for v in box)


def _cmd_box(args: argparse.Namespace) -> int:
    fmt = args.box_format
    b1 = _parse_box(args.box1, "BOX1", fmt)
    b2 = _parse_box(args.box2, "BOX2", fmt)
    try:
        overlap = box_overlap(b1, b2, fmt=fmt, inclusive=args.inclusive)
        verdict = verdicts(overlap.iou, threshold=args.threshold)
    except SegiouError as err:
        raise UsageError(_cli_terms(err)) from err

    yes_no = {True: "match", False: "no match"}
    inter_box = (
        _coords(overlap.intersection_box) if overlap.intersection_box else "none (no overlap)"
    )
    note = ""
    if args.inclusive:
        note = "  (xyxy, inclusive corners widened by 1 pixel)"
    elif fmt != "xyxy":
        note = f"  (as xyxy, from {fmt})"
    matched = [t for t, ok in verdict.sweep if ok]
    sweep = f"{verdict.n_matched}/{len(verdict.sweep)} thresholds"
    if matched:
        sweep += f" (0.50 to {matched[-1]:.2f})"
    rows = [
        ("box 1", f"{_coords(overlap.box1)}  area {_num(overlap.area1)}{note}"),
        ("box 2", f"{_coords(overlap.box2)}  area {_num(overlap.area2)}{note}"),
        ("intersection", f"{_num(overlap.intersection)}  box {inter_box}"),
        ("union", _num(overlap.union)),
        ("enclosing", f"{_num(overlap.enclosing_area)}  box {_coords(overlap.enclosing_box)}"),
        ("IoU", _score(overlap.iou, (verdict.threshold, *COCO_THRESHOLDS))),
        ("Dice", f"{overlap.dice:.6f}"),
        ("GIoU", f"{overlap.giou:.6f}"),
        ("DIoU", f"{overlap.diou:.6f}"),
        ("CIoU", f"{overlap.ciou:.6f}"),
        (f"IoU >= {_num(verdict.threshold)}", yes_no[verdict.match]),
        (f"VOC  @{VOC_THRESHOLD:.2f}", yes_no[verdict.voc50]),
        (f"COCO @{COCO_STRICT_THRESHOLD:.2f}", yes_no[verdict.coco75]),
        (f"COCO @{COCO_THRESHOLDS[-1]:.2f}", yes_no[verdict.coco95]),
        ("COCO @.50:.95", sweep),
    ]
    if args.svg is not None:  # write first: on failure, report only the error
        try:
            write_atomic(args.svg, _svg(overlap), what="--svg")
        except (UsageError, OutputError) as err:
            msg = f"cannot write the SVG: {err}"
            raise UsageError(msg) from err
        rows.append(("SVG", f"wrote {args.svg}"))
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label:<{width}}{value}")
    return EXIT_OK


def _svg(overlap: BoxOverlap) -> str:
    """Draw both boxes and their overlap, scaled to fit, y downward as in the image."""
    x0, y0, x1, y1 = overlap.enclosing_box
    span = max(x1 - x0, y1 - y0)
    scale = _SVG_SIZE / span if span > 0 else 1.0
    width = (x1 - x0) * scale + 2 * _SVG_MARGIN
    height = (y1 - y0) * scale + 2 * _SVG_MARGIN + 24

    def rect(box: tuple[float, float, float, float], style: str) -> str:
        ax, ay = (box[0] - x0) * scale + _SVG_MARGIN, (box[1] - y0) * scale + _SVG_MARGIN
        bx, by = (box[2] - x0) * scale + _SVG_MARGIN, (box[3] - y0) * scale + _SVG_MARGIN
        # A path, not a rect: a zero-width or zero-height box still shows as a line.
        return f'  <path d="M{ax:.2f},{ay:.2f} H{bx:.2f} V{by:.2f} H{ax:.2f} Z" {style}/>'

    caption = (
        f"box 1 blue, box 2 orange, overlap purple: IoU {overlap.iou:.4f}, "
        f"Dice {overlap.dice:.4f}, GIoU {overlap.giou:.4f}"
    )
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.2f} {height:.2f}">'
        ),
        f"  <title>{escape(caption)}</title>",
        f'  <rect width="{width:.2f}" height="{height:.2f}" fill="white"/>',
        rect(overlap.box1, 'fill="#1f77b4" fill-opacity="0.25" stroke="#1f77b4" stroke-width="2"'),
        rect(overlap.box2, 'fill="#ff7f0e" fill-opacity="0.25" stroke="#ff7f0e" stroke-width="2"'),
    ]
    if overlap.intersection_box is not None:
        lines.append(rect(overlap.intersection_box, 'fill="#7b3294" fill-opacity="0.6"'))
    for label, box, colour in (("1", overlap.box1, "#1f77b4"), ("2", overlap.box2, "#ff7f0e")):
        tx, ty = (box[0] - x0) * scale + _SVG_MARGIN + 3, (box[1] - y0) * scale + _SVG_MARGIN - 4
        lines.append(f'  <text x="{tx:.2f}" y="{ty:.2f}" {_FONT} fill="{colour}">{label}</text>')
    lines += [
        f'  <text x="{_SVG_MARGIN}" y="{height - 10:.2f}" {_FONT}>{escape(caption)}</text>',
        "</svg>",
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# segiou sets
# --------------------------------------------------------------------------------------------


def _tokens(text: str, sep: str) -> list[str]:
    """Split on ``sep``, strip blanks around each label, drop empty labels."""
    return [t.strip() for t in text.split(sep) if t.strip()]


def _shown(labels: list[str], args: argparse.Namespace) -> list[str]:
    """Return the labels as compared: case-folded with --lower, de-duplicated unless kept."""
    if args.lower:
        labels = [t.casefold() for t in labels]
    return labels if args.keep_duplicates else list(dict.fromkeys(labels))


def _cmd_sets(args: argparse.Namespace) -> int:
    if not args.sep:
        msg = "--sep is empty; pass a separator such as ',' or ' '"
        raise UsageError(msg)
    gt = _tokens(args.gt, args.sep)
    pred = _tokens(args.pred, args.sep)
    try:
        o = set_overlap(
            gt, pred, lower=args.lower, dedupe=not args.keep_duplicates, empty=args.empty
        )
    except SegiouError as err:
        raise UsageError(_cli_terms(err)) from err

    def show(items: tuple[object, ...] | list[str], size: int) -> str:
        text = ", ".join(map(str, items)) or "(none)"
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)  # no raw escapes
        return f"{text}  ({size})"

    if o.n_union:
        jaccard = f"{o.jaccard:.6f}  = {o.n_intersection} / {o.n_union}"
        dice = f"{o.dice:.6f}  = 2 x {o.n_intersection} / ({o.size_gt} + {o.size_pred})"
    else:
        jaccard = f"{o.jaccard:.6f}  (both sets empty: --empty)"
        dice = f"{o.dice:.6f}  (both sets empty: --empty)"
    rows = [
        ("set 1", show(_shown(gt, args), o.size_gt)),
        ("set 2", show(_shown(pred, args), o.size_pred)),
        ("intersection", show(o.intersection, o.n_intersection)),
        ("union", show(o.union, o.n_union)),
        ("Jaccard", jaccard),
        ("Dice", dice),
    ]
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label:<{width}}{value}")
    return EXIT_OK
