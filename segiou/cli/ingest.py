"""``segiou ingest``: label images in folders -> one Zarr store."""

from __future__ import annotations

import argparse
from typing import Any

from segiou.cli.options import hw, positive_int

__all__ = ["register", "run"]


def _codec(text: str) -> str:
    """Check a ``--codec`` value; return its canonical name."""
    from segiou.errors import UsageError
    from segiou.io.png import parse_codec

    try:
        return parse_codec(text)[0]
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _size(n: int | None) -> str:
    if n is None:
        return "size unknown"
    if n < 1000:
        return f"{n} B"
    x = float(n)
    for unit in ("kB", "MB"):
        x /= 1000
        if x < 1000:
            return f"{x:.1f} {unit}"
    return f"{x / 1000:.1f} GB"


def _render(summary: dict[str, Any]) -> list[str]:
    """Lines describing an ingest summary."""
    sides = [(k, summary[k]) for k in ("gt", "pred") if summary.get(k)]
    shape = (
        "x".join(map(str, summary["shape"]))
        if summary["layout"] == "stack"
        else f"{summary['n_shapes']} sizes"
    )
    counts = ", ".join(f"{s['images']} {k} ({s['dtype']})" for k, s in sides)
    head = (
        f"ingested {counts} into {summary['out']}: {summary['layout']} layout, {shape}, "
        f"{summary['codec']}, "
    )
    lines = [head + f"{_size(summary['bytes'])}, {summary['seconds']:.1f} s"]
    ids = summary.get("ids")
    for k, s in sides:
        if s["colour_images"]:
            lines.append(
                f"note: {s['colour_images']} {k} image(s) were colour-coded and now hold {ids} "
                f"ids of {summary['labels']} (store attribute segiou.ids): evaluate them with "
                f"--{k}-ids {ids}"
            )
    for left in summary.get("left_over") or ():
        what = (
            "holds the store that was there before, set aside by an ingest into it that did "
            "not finish"
            if left["kind"] == "replaced"
            else "is a partial store of an ingest into it that did not finish (or still runs)"
        )
        lines.append(f"note: {left['path']} (beside {summary['out']}) {what}; segiou leaves it: "
                     "remove it when you no longer need it")  # fmt: skip
    un = summary.get("unmatched") or {}
    if un.get("gt"):
        lines.append(f"note: {un['gt']} ground-truth image(s) have no prediction")
    if un.get("pred"):
        lines.append(f"note: {un['pred']} prediction(s) match no ground-truth image")
    return lines


def run(args: argparse.Namespace) -> int:
    """Run ``segiou ingest`` (see :func:`register` for the options); return the exit code 0."""
    from segiou.io.datasets import dataset_labels, detect_dataset
    from segiou.io.png import find_pairs, ingest, png_set
    from segiou.io.sources import instance_files
    from segiou.labels import load_spec

    given = None if args.labels is None else load_spec(args.labels)  # before scanning folders
    found = detect_dataset(args.gt)  # a dataset's folder: its layout and, as eval, its spec
    name = dataset_labels(found, args.labels)
    spec = given if given is not None or name is None else load_spec(name)
    layout: Any = found.layout if args.layout == "auto" else args.layout
    if args.pred is not None:
        gt, pred = find_pairs(args.gt, args.pred, gt_pattern=args.gt_pattern,
                              pred_pattern=args.pred_pattern, layout=layout, regex=args.regex,
                              pred_regex=args.pred_regex)  # fmt: skip
    else:
        default = "*_gtFine_labelIds.png" if layout == "cityscapes" else "*.png"
        gt = png_set(args.gt, args.gt_pattern or default, layout=layout, regex=args.regex)
        pred = None
    inst = None if args.no_instances else instance_files(gt)  # *_gtFine_instanceIds.png
    summary = ingest(gt, pred, args.out, spec=spec, colors=args.colors, ids=args.ids,
                     chunks=args.chunks, codec=args.codec, workers=args.workers,
                     progress=not args.quiet, overwrite=args.overwrite,
                     instances=inst)  # fmt: skip
    if found.dataset is not None:  # say what was recognised, and what it changed (as eval)
        print(f"dataset: {found.dataset} layout ({found.why}); labels "
              f"{summary['labels'] or 'none'}")  # fmt: skip
    for line in _render(summary):
        print(line)
    return 0


def register(subparsers: Any) -> None:
    """Add the ``ingest`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.

    Returns
    -------
    None
    """
    p = subparsers.add_parser(
        "ingest",
        help="pack PNG/TIFF/NPY label images into a Zarr store (gt and pred)",
        description=(
            "Pair ground-truth and prediction images by name and write them into one Zarr "
            "store with arrays 'gt' and 'pred' (a stack when all images share one size, else "
            "a group of images). Grey and palette images hold ids; RGB images are converted "
            "through the colours of --labels to the id space segiou eval assumes for that spec "
            "(raw ids when it has them, e.g. Cityscapes labelIds; else class ids), recorded in "
            "the store. Every chunk is written, also chunks of 0s."
        ),
    )
    p.add_argument("--gt", required=True, metavar="DIR", help="ground-truth folder (recursive)")
    p.add_argument("--pred", metavar="DIR", help="prediction folder (recursive); optional")
    p.add_argument("--out", required=True, metavar="STORE.zarr", help="Zarr store to write")
    p.add_argument(
        "--layout",
        choices=["auto", "plain", "cityscapes"],
        default="auto",
        help="image names: relative path without suffix (plain), or the Cityscapes "
        "<city>_<seq>_<frame> prefix (default: cityscapes when *_gtFine_labelIds.png files "
        "are found, else plain)",
    )
    p.add_argument("--no-instances", action="store_true", help="do not store the Cityscapes "
                   "*_gtFine_instanceIds.png found beside the ground truth (array 'instances')")  # fmt: skip
    p.add_argument("--gt-pattern", metavar="GLOB", help="ground-truth files (default: *.png, "
                   "or *_gtFine_labelIds.png with --layout cityscapes)")  # fmt: skip
    p.add_argument("--pred-pattern", metavar="GLOB", help="prediction files (default: the "
                   "ground-truth pattern, or *.png with --layout cityscapes)")  # fmt: skip
    p.add_argument("--regex", metavar="REGEX", help="name images by the group (?P<name>...) "
                   "of this regex, searched in the relative path")  # fmt: skip
    p.add_argument("--pred-regex", metavar="REGEX", help="the regex of the prediction side "
                   "(default: --regex)")  # fmt: skip
    p.add_argument("--labels", metavar="SPEC", help="cityscapes, pascal_voc, ade20k or a spec "
                   "file: colours of RGB masks (default: the spec of a dataset recognised in "
                   "--gt, as for eval, else none)")  # fmt: skip
    p.add_argument(
        "--colors",
        choices=["error", "ignore"],
        default="error",
        help="unknown or ambiguous colours: fail, or store the ignore value (default: %(default)s)",
    )
    p.add_argument(
        "--ids",
        choices=["raw", "class"],
        help="id space RGB masks are decoded to (default: raw when --labels has raw ids, as "
        "segiou eval assumes; else class)",
    )
    p.add_argument("--chunks", type=hw, metavar="HxW", help="chunk shape (default: one chunk "
                   "per image)")  # fmt: skip
    p.add_argument(
        "--codec",
        type=_codec,
        default="zstd",
        metavar="CODEC",
        help="chunk compression: zstd (default, zarr's default level), zstd:LEVEL (1-22), "
        "blosc-lz4 or lz4, blosc-lz4:LEVEL (0-9), gzip, gzip:LEVEL (0-9), or none",
    )
    p.add_argument("--workers", type=positive_int, metavar="N", help="decoding threads")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.set_defaults(func=run)
