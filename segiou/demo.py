"""The built-in demo: synthetic Cityscapes-like masks, evaluated end to end."""

from __future__ import annotations

import argparse
import time

from segiou.errors import SegiouError

__all__ = ["parse_size", "run_demo"]


def parse_size(text: str) -> tuple[int, int]:
    """Parse ``"HxW"`` into ``(H, W)``."""
    try:
        h, w = (int(v) for v in text.lower().split("x"))
    except ValueError:
        h = w = 0
    if h <= 0 or w <= 0:
        msg = f"--size {text!r} is not HxW with positive integers, e.g. 512x1024"
        raise SegiouError(msg)
    return h, w


def run_demo(args: argparse.Namespace) -> int:
    """Generate the demo dataset and print its evaluation."""
    from segiou import ConfusionMatrix
    from segiou.synthetic import cityscapes_like

    h, w = parse_size(args.size)
    t0 = time.perf_counter()
    cm = ConfusionMatrix("cityscapes", gt_ids="raw")
    for i in range(args.images):
        gt, pred = cityscapes_like(1, h, w, seed=args.seed + i, label_ids=True)
        cm.update(gt, pred, key=f"img{i:04d}")
    result = cm.result("cityscapes")
    print(result.table())
    if not args.quiet:
        print(f"demo: {args.images} images of {h}x{w} scored in {time.perf_counter() - t0:.1f} s")
    return 0
