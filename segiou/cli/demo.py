"""``segiou demo``: a synthetic Cityscapes-like dataset in Zarr, scored end to end."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from segiou._resources import check_memory
from segiou.cli.options import hw, nonnegative_int
from segiou.errors import UsageError
from segiou.outputs import check_outputs, write_atomic

__all__ = ["register", "run"]

#: Peak memory of making one demo image, per pixel (the synthetic fields are int64, several at
#: once: measured ~40 B/px with tracemalloc at 512 x 1024; rounded up).
_DEMO_BYTES_PER_PIXEL = 64


def register(sub: Any) -> None:
    """Add the ``demo`` subcommand to an ``argparse`` subparsers object.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        What ``ArgumentParser.add_subparsers()`` returned.
    """
    demo = sub.add_parser("demo", help="make a synthetic Cityscapes-like dataset and score it")
    demo.add_argument(
        "dir", nargs="?", default="segiou-demo", help="output folder (default: %(default)s)"
    )
    demo.add_argument(
        "--images", type=int, default=24, help="number of images (default: %(default)s)"
    )
    demo.add_argument("--size", default="512x1024", help="HxW of each image (default: %(default)s)")
    demo.add_argument("--seed", type=nonnegative_int, default=0, help="random seed (>= 0)")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """``segiou demo``: write the dataset, evaluate it with the Dask engine, print and save.

    Writes ``<dir>/demo.zarr`` (see :func:`write_demo_store`), scores it with the Cityscapes
    spec (labelIds) and preset on the threaded scheduler, prints the result table and the
    error analysis, and writes ``<dir>/report.json`` and ``<dir>/per_image.csv``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed ``segiou demo`` options: ``dir`` (output folder, created if needed),
        ``images`` (number of images), ``size`` (``"HxW"``), ``seed`` and ``quiet`` (no
        progress bars; there are none either when stderr is not a terminal).

    Returns
    -------
    int
        The exit code, 0.

    Raises
    ------
    UsageError
        ``size`` is not two positive integers ``HxW`` (see :func:`segiou.cli.options.hw`), or ``images``
        is not a positive number.
    """
    from segiou.parallel import count_stores
    from segiou.report import render_analysis, render_text, write_per_image_csv
    from segiou.results import evaluate
    from segiou.testing.datasets import is_demo_store, write_demo_store

    try:
        h, w = hw(args.size)
    except argparse.ArgumentTypeError as err:
        msg = f"--size: {err}"
        raise UsageError(msg) from None
    if args.images < 1:
        msg = f"--images {args.images}: the demo needs at least one image"
        raise UsageError(msg)
    check_memory(_DEMO_BYTES_PER_PIXEL * h * w, f"making one {h}x{w} demo image",
                 "Choose a smaller --size")  # fmt: skip
    out = Path(args.dir)
    if out.exists() and not out.is_dir():
        msg = f"{str(out)!r} is a file; give a folder for the demo (it is created if needed)"
        raise UsageError(msg)
    if (out / "demo.zarr").exists() and not is_demo_store(out / "demo.zarr"):
        msg = (
            f"{str(out / 'demo.zarr')!r} exists and was not written by segiou demo; it is never "
            "replaced: choose another folder, or remove it yourself"
        )
        raise UsageError(msg)
    out.mkdir(parents=True, exist_ok=True)
    check_outputs({"report": out / "report.json", "per-image CSV": out / "per_image.csv"})
    progress = not args.quiet and sys.stderr.isatty()
    t0 = time.perf_counter()
    store = write_demo_store(out / "demo.zarr", images=args.images, height=h, width=w,
                             seed=args.seed, progress=progress)  # fmt: skip
    t1 = time.perf_counter()
    cm = count_stores(f"{store}/gt", f"{store}/pred", labels="cityscapes", gt_ids="raw",
                       scheduler="threads", progress=progress)  # fmt: skip
    t2 = time.perf_counter()
    result = evaluate(cm, preset="cityscapes")
    print(render_text(result))
    print(render_analysis(cm, top=5, preset=result.convention))
    write_atomic(out / "report.json", result.to_json() + "\n", what="report")
    write_per_image_csv(cm, out / "per_image.csv", preset=result.convention)
    print(
        f"demo: {args.images} images of {h}x{w} written to {store} in {t1 - t0:.1f} s, scored in "
        f"{t2 - t1:.2f} s; reports: {out / 'report.json'}, {out / 'per_image.csv'}"
    )
    return 0
