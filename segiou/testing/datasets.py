"""Synthetic datasets written to stores: the demo's, and fixtures for tests and benchmarks."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["is_demo_store", "write_demo_store"]


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
    from segiou.testing.synthetic import cityscapes_like

    store = Path(path)
    names = [f"demo_{i:05d}" for i in range(images)]
    gt = create_stack(store, path="gt", n=images, height=height, width=width, names=names,
                      overwrite=True)  # fmt: skip
    pred = create_stack(store, path="pred", n=images, height=height, width=width, names=names,
                        overwrite=True)  # fmt: skip
    import zarr

    zarr.open_group(str(store), mode="a").attrs["segiou"] = {"demo": {"images": images,
                                                                      "seed": seed}}  # fmt: skip
    it = range(images)
    if progress:
        from tqdm import tqdm

        it = tqdm(it, desc="writing demo masks", unit="img", file=sys.stderr)
    for i in it:
        g, p = cityscapes_like(1, height, width, seed=seed + i, label_ids=True)
        gt[i], pred[i] = g[0], p[0]
    return store


def is_demo_store(path: str | Path) -> bool:
    """Whether ``path`` is a store :func:`write_demo_store` wrote (its root attribute says so).

    Parameters
    ----------
    path : str or Path
        A folder.

    Returns
    -------
    bool
    """
    try:
        import zarr

        meta = dict(zarr.open_group(str(path), mode="r").attrs).get("segiou")
    except Exception:  # noqa: BLE001 - not a Zarr group, unreadable: not the demo's
        return False
    return isinstance(meta, dict) and "demo" in meta
