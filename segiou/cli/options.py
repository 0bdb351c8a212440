"""Command-line option types, and the options of ``segiou eval`` as one dataclass.

argparse checks each value's form with the types here (a bad value is a usage error naming the
option); :meth:`EvalOptions.from_namespace` builds the evaluation's options once, checking what
only the whole set of options can tell (the preset exists, the outputs can be written) before
any mask is read.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from segiou._boundary import BoundaryWidth
from segiou.errors import SegiouError, UsageError
from segiou.io.datasets import Detected, cityscapes_paths, dataset_labels, detect_dataset
from segiou.labels import IdSpace, LabelSpec, load_spec
from segiou.outputs import check_outputs

__all__ = [
    "EvalOptions",
    "add_eval_options",
    "boundary_arg",
    "hw",
    "labels_arg",
    "nonnegative_float",
    "nonnegative_int",
    "positive_float",
    "positive_int",
    "probability",
]


def _int_from(text: str, lowest: int, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = lowest - 1
    if n < lowest:
        msg = f"{text!r} is not {what}"
        raise argparse.ArgumentTypeError(msg)
    return n


def positive_int(text: str) -> int:
    """Parse a positive integer (an argparse type).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        Not an integer of at least 1.
    """
    return _int_from(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """Parse an integer of at least 0 (an argparse type).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    int

    Raises
    ------
    argparse.ArgumentTypeError
        Not an integer of at least 0.
    """
    return _int_from(text, 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """Parse a positive finite number (an argparse type).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float

    Raises
    ------
    argparse.ArgumentTypeError
        Not a finite number above 0.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        msg = f"{text!r} is not a positive finite number"
        raise argparse.ArgumentTypeError(msg)
    return value


def nonnegative_float(text: str) -> float:
    """Parse a finite number of at least 0 (an argparse type).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float

    Raises
    ------
    argparse.ArgumentTypeError
        Not a finite number >= 0.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        msg = f"{text!r} is not a finite number >= 0"
        raise argparse.ArgumentTypeError(msg)
    return value


def probability(text: str) -> float:
    """Parse a number strictly between 0 and 1, such as a significance level (an argparse type).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    float

    Raises
    ------
    argparse.ArgumentTypeError
        Not a number in (0, 1).
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        msg = f"{text!r} is not a number between 0 and 1 (e.g. 0.05)"
        raise argparse.ArgumentTypeError(msg)
    return value


def hw(text: str) -> tuple[int, int]:
    """Parse ``"HxW"`` (e.g. ``512x1024``) into two positive integers (an argparse type).

    Parameters
    ----------
    text : str
        Height and width separated by ``x`` (or ``X``); spaces around the numbers are allowed.

    Returns
    -------
    (int, int)

    Raises
    ------
    argparse.ArgumentTypeError
        Not two positive integers separated by ``x``.
    """
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        h = w = 0
    if h < 1 or w < 1:
        msg = f"{text!r} is not HxW with two positive integers, e.g. 512x1024"
        raise argparse.ArgumentTypeError(msg)
    return h, w


def boundary_arg(text: str) -> BoundaryWidth:
    """Parse a ``--boundary`` width: a share of the diagonal (``0.02``) or pixels (``5px``).

    Parameters
    ----------
    text : str
        The option's value.

    Returns
    -------
    BoundaryWidth

    Raises
    ------
    argparse.ArgumentTypeError
        Neither a ratio in (0, 1] nor a whole number of pixels.
    """
    try:
        width = BoundaryWidth.parse(text)
    except SegiouError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    assert width is not None
    return width


def _dataset_paths(gt: str | None, pred: str | None) -> tuple[str, str, Detected]:
    """``--gt`` and ``--pred``, else the Cityscapes environment; and the dataset in ``--gt``."""
    env_gt, env_pred = cityscapes_paths()
    gt = gt or env_gt
    pred = pred or env_pred
    if gt is None or pred is None:
        which = ", ".join(o for o, v in (("--gt", gt), ("--pred", pred)) if v is None)
        msg = (
            f"the following arguments are required: {which} (a Zarr store or a folder of label "
            "images each), unless CITYSCAPES_DATASET (ground truth in "
            "$CITYSCAPES_DATASET/gtFine/val) and CITYSCAPES_RESULTS are set, as for "
            "cityscapesScripts"
        )
        raise UsageError(msg)
    return gt, pred, detect_dataset(gt)


def labels_arg(text: str) -> LabelSpec:
    """Make the label spec of a ``--labels`` value.

    Parameters
    ----------
    text : str
        A built-in spec name (``"cityscapes"``, ``"pascal_voc"``, ``"ade20k"``), the path of
        a ``.json``/``.toml`` spec file, or a number of classes ``K`` (only digits), which
        gives classes ``"0".."K-1"`` without ignore values.

    Returns
    -------
    LabelSpec

    Raises
    ------
    LabelSpecError
        Unknown name, unreadable or invalid spec file, or ``0`` classes.
    """
    if text.isascii() and text.isdigit() and not Path(text).exists():
        return LabelSpec.from_num_classes(int(text))
    return load_spec(text)


def add_eval_options(p: argparse.ArgumentParser) -> None:
    """Add the options of ``segiou eval`` that say how to count and average.

    Parameters
    ----------
    p : argparse.ArgumentParser
        The parser (or subparser) to add the options to; changed in place.
    """
    p.add_argument("--labels", default="auto",
                   help="cityscapes, pascal_voc, ade20k, a spec file (.json/.toml) or a number "
                   "of classes (default: the spec of a dataset recognised in --gt, else "
                   "cityscapes)")  # fmt: skip
    p.add_argument("--ignore", type=int, nargs="+", metavar="ID",
                   help="ignore value(s), replacing the spec's (e.g. 255)")  # fmt: skip
    p.add_argument("--gt-ids", choices=["class", "raw"], default=None,
                   help="masks hold class ids or the spec's raw ids (default: what segiou "
                   "ingest recorded in the store, else raw when the spec has a raw table, e.g. "
                   "Cityscapes labelIds, else class)")  # fmt: skip
    p.add_argument("--pred-ids", choices=["class", "raw"], default=None,
                   help="id space of predictions (default: what segiou ingest recorded, else "
                   "--gt-ids)")  # fmt: skip
    p.add_argument("--preset", default="segiou",
                   help="averaging convention: segiou, cityscapes, mmseg, hf_evaluate, "
                   "detectron2, torchmetrics, sklearn, sklearn_all_labels, keras")  # fmt: skip
    p.add_argument("--scheduler", default="threads",
                   help="threads (default), synchronous, processes, local-cluster, or the "
                   "address of a dask.distributed scheduler (tcp://host:8786)")  # fmt: skip
    p.add_argument("--split-every", type=int, default=8, help="tree-reduction fan-in")
    p.add_argument("--task-seconds", type=float, default=None, metavar="S",
                   help="dask.distributed only: seconds of counting per task (default 0.2, "
                   "raised to 2 ms per worker thread of the cluster)")  # fmt: skip
    p.add_argument("--ns-per-px", type=float, default=None, metavar="NS",
                   help="dask.distributed only: a worker thread's nanoseconds per pixel (read, "
                   "decode, count) to size tasks with (default: measured on the cluster by a "
                   "first task)")  # fmt: skip
    p.add_argument("--missing-pred", choices=["error", "void"], default="error",
                   help="a ground-truth image without prediction: error, or score it all-void")  # fmt: skip
    p.add_argument("--missing-gt-chunks", choices=["auto", "error", "fill"], default="auto",
                   help="a ground-truth chunk missing from a Zarr store: auto (default: read as "
                   "the fill value, as the Zarr spec says, and reported; refused in stores "
                   "segiou wrote, which record every chunk), error, or fill")  # fmt: skip
    p.add_argument("--missing-pred-chunks", choices=["auto", "error", "fill"], default="auto",
                   help="a prediction chunk missing from a Zarr store: auto (default: read as "
                   "the fill value; refused in stores that record every chunk and in Zarr v2 "
                   "arrays without a fill value), error, or fill (also there: a writer with "
                   "zarr's write_empty_chunks=False skipped it; 0 without a fill value); "
                   "reported per image, as the ground truth's")  # fmt: skip
    p.add_argument("--boundary", nargs="?", const="0.02", default=None, metavar="WIDTH",
                   type=boundary_arg,
                   help="also Boundary IoU: width as a share of the image diagonal (default "
                   "0.02) or in pixels (5px)")  # fmt: skip
    p.add_argument("--on-unexpected", choices=["raise", "count"], default="raise",
                   help="label values outside the spec: raise (default) or count and report")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar")


@dataclass(frozen=True)
class EvalOptions:
    """Everything ``segiou eval`` was asked to do, checked once, before any mask is read.

    Attributes mirror the command-line options (see ``segiou eval --help``); ``labels`` is
    the loaded spec, outputs are paths or ``None``.
    """

    gt: str
    pred: str
    labels: LabelSpec
    ignore: tuple[int, ...] | None
    gt_ids: IdSpace | None
    pred_ids: IdSpace | None
    preset: str
    beta: float | None
    scheduler: str
    split_every: int
    task_seconds: float | None
    ns_per_px: float | None
    missing_pred: Literal["error", "void"]
    missing_gt_chunks: Literal["auto", "error", "fill"]
    missing_pred_chunks: Literal["auto", "error", "fill"]
    on_unexpected: Literal["raise", "count"]
    layout: Literal["auto", "plain", "cityscapes"]
    gt_pattern: str | None
    pred_pattern: str | None
    json: Path | None
    per_image: Path | None
    state: Path | None
    report: Path | None
    report_format: str | None
    top: int
    quiet: bool
    bootstrap: int = 1000
    bootstrap_seed: int = 0
    bootstrap_groups: str | None = None
    slices: str | None = None
    min_slice_images: int = 30
    error_maps: Path | None = None
    boundary: BoundaryWidth | None = None
    instances: str | bool | None = None
    dataset: Detected = field(default_factory=Detected)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> EvalOptions:
        """Build and check the options parsed by the ``eval`` subparser.

        Parameters
        ----------
        ns : argparse.Namespace
            What ``segiou eval``'s parser returned.

        Returns
        -------
        EvalOptions

        Raises
        ------
        UsageError
            An unknown preset, ``--split-every`` below 2, ``--task-seconds`` or
            ``--ns-per-px`` not positive, ``--bootstrap-groups`` without ``--slices`` or with
            ``--bootstrap 0``, an output
            that cannot be written (see :func:`segiou.outputs.check_outputs`: empty, not a
            regular file, in a folder that does not exist or is not writable, the same file as
            another output, or inside an input; for ``--error-maps``
            :func:`segiou.io.maps.check_maps_output`), a ``--report`` whose suffix names no
            report format, or an HTML report without the ``report`` extra.
        StoreExistsError
            ``--error-maps`` names something other than error maps segiou wrote.
        LabelSpecError
            An invalid ``--labels`` value.
        """
        from segiou.conventions import PRESETS

        if ns.preset not in PRESETS:  # refused before counting, not after
            msg = f"--preset {ns.preset!r} is not a preset; choose one of {sorted(PRESETS)}"
            raise UsageError(msg)
        if ns.split_every < 2:
            msg = f"--split-every {ns.split_every}: the fan-in of the tree of sums must be >= 2"
            raise UsageError(msg)
        gt, pred, found = _dataset_paths(ns.gt, ns.pred)
        for opt in ("task_seconds", "ns_per_px"):
            value = getattr(ns, opt)
            if value is not None and not value > 0:  # (not: also refuses nan)
                msg = f"--{opt.replace('_', '-')} {value}: give a positive number"
                raise UsageError(msg)
        groups = getattr(ns, "bootstrap_groups", None)
        slices = getattr(ns, "slices", None)
        if groups and not slices:
            msg = (
                f"--bootstrap-groups {groups!r} names a column of the image metadata: give the "
                "metadata with --slices meta.csv"
            )
            raise UsageError(msg)
        if groups and getattr(ns, "bootstrap", 1000) == 0:
            msg = (
                f"--bootstrap-groups {groups!r} says how to resample for the intervals, but "
                "--bootstrap 0 turns them off: leave one of them out"
            )
            raise UsageError(msg)
        maps = None
        if getattr(ns, "error_maps", None) is not None:
            from segiou.io.maps import check_maps_output

            maps = check_maps_output(ns.error_maps, inputs=[gt, pred])
        outputs = check_outputs(
            {
                f"--{o.replace('_', '-')}": getattr(ns, o, None)
                for o in ("json", "per_image", "state", "report")
            },
            inputs=[gt, pred] + ([] if maps is None else [maps]),  # (maps are replaced whole)
        )  # every output writable, distinct and outside the inputs, before anything is read
        report_format = None
        if outputs["--report"] is not None:
            from segiou.report import report_format as format_of
            from segiou.report.plots import require_plotting

            report_format = format_of(ns.report, what="--report")
            if report_format == "html":
                require_plotting("--report (HTML)")
        given = None if ns.labels == "auto" else ns.labels
        labels = labels_arg(dataset_labels(found, given, "cityscapes") or "cityscapes")
        return cls(
            gt=gt, pred=pred, labels=labels,
            ignore=None if ns.ignore is None else tuple(ns.ignore), gt_ids=ns.gt_ids,
            pred_ids=ns.pred_ids, preset=ns.preset, beta=ns.beta, scheduler=ns.scheduler,
            split_every=ns.split_every, task_seconds=ns.task_seconds,
            ns_per_px=ns.ns_per_px, missing_pred=ns.missing_pred,
            missing_gt_chunks=ns.missing_gt_chunks,
            missing_pred_chunks=ns.missing_pred_chunks,
            on_unexpected=ns.on_unexpected,
            layout=ns.layout, gt_pattern=ns.gt_pattern, pred_pattern=ns.pred_pattern,
            json=outputs["--json"], per_image=outputs["--per-image"], state=outputs["--state"],
            report=outputs["--report"], report_format=report_format, top=ns.top, quiet=ns.quiet,
            bootstrap=getattr(ns, "bootstrap", 1000),
            bootstrap_seed=getattr(ns, "bootstrap_seed", 0), bootstrap_groups=groups,
            slices=slices, min_slice_images=getattr(ns, "min_slice_images", 30), error_maps=maps,
            boundary=ns.boundary, instances=False if ns.no_instances else ns.instances,
            dataset=found,
        )  # fmt: skip
