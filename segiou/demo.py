"""The built-in demo: a synthetic Cityscapes-like dataset in Zarr, scored end to end."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from segiou.errors import UsageError

__all__ = ["parse_size", "run_demo", "write_demo_store"]


def parse_size(text: str) -> tuple[int, int]:
    """Parse ``"HxW"`` into ``(H, W)``.

    Parameters
    ----------
    text : str
        Height and width separated by ``x`` (or ``X``), e.g. ``"512x1024"``; spaces around
        the numbers are allowed.

    Returns
    -------
    (int, int)
        Height and width, both positive.

    Raises
    ------
    UsageError
        Not two positive integers separated by ``x``.
    """
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        h = w = 0
    if h <= 0 or w <= 0:
        msg = f"size {text!r} is not HxW with positive integers, e.g. 512x1024"
        raise UsageError(msg)
    return h, w


def write_demo_store(path: str | Path, *, images: int, height: int, width: int, seed: int = 0,
                     progress: bool = False) -> Path:  # fmt: skip
    """Write synthetic Cityscapes-like ground truth and predictions (labelIds) to a Zarr store.

    The store holds the arrays ``gt`` and ``pred`` (``stack`` layout, one chunk per image,
    zstd), images named ``demo_00000``, ... Predictions have ~10% errors in coherent patches
    and ~1% void ("parking", a labelId that is not evaluated).

    Parameters
    ----------
    path : str or Path
        The store to write; existing ``gt`` and ``pred`` arrays in it are replaced.
    images : int
        Number of images.
    height, width : int
        Size of each image.
    seed : int
        Image ``i`` is made with seed ``seed + i``: the same seed gives the same masks.
    progress : bool
        Show a progress bar on stderr while writing.

    Returns
    -------
    Path
        The store.

    Raises
    ------
    StoreLayoutError
        ``images`` is negative (the image names do not match the number of images).
    """
    from segiou.io.zarr import create_stack
    from segiou.synthetic import cityscapes_like

    store = Path(path)
    names = [f"demo_{i:05d}" for i in range(images)]
    gt = create_stack(store, path="gt", n=images, height=height, width=width, names=names,
                      overwrite=True)  # fmt: skip
    pred = create_stack(store, path="pred", n=images, height=height, width=width, names=names,
                        overwrite=True)  # fmt: skip
    it = range(images)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="writing demo masks", unit="img", file=sys.stderr)
    for i in it:
        g, p = cityscapes_like(1, height, width, seed=seed + i, label_ids=True)
        gt[i], pred[i] = g[0], p[0]
    return store


def run_demo(args: argparse.Namespace) -> int:
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
        ``size`` is not two positive integers ``HxW`` (see :func:`parse_size`), or ``images``
        is not a positive number.
    """
    from segiou.parallel import evaluate_zarr
    from segiou.report import render_analysis, write_per_image_csv

    h, w = parse_size(args.size)
    if args.images < 1:
        msg = f"--images {args.images}: the demo needs at least one image"
        raise UsageError(msg)
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    progress = not args.quiet and sys.stderr.isatty()
    t0 = time.perf_counter()
    store = write_demo_store(out / "demo.zarr", images=args.images, height=h, width=w,
                             seed=args.seed, progress=progress)  # fmt: skip
    t1 = time.perf_counter()
    cm = evaluate_zarr(f"{store}/gt", f"{store}/pred", labels="cityscapes", gt_ids="raw",
                       scheduler="threads", progress=progress)  # fmt: skip
    t2 = time.perf_counter()
    result = cm.result("cityscapes")
    print(result.table())
    print(render_analysis(cm, top=5))
    (out / "report.json").write_text(result.to_json() + "\n", encoding="utf-8")
    write_per_image_csv(cm, out / "per_image.csv")
    print(
        f"demo: {args.images} images of {h}x{w} written to {store} in {t1 - t0:.1f} s, scored in "
        f"{t2 - t1:.2f} s; reports: {out / 'report.json'}, {out / 'per_image.csv'}"
    )
    return 0
