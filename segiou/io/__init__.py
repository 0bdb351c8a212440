"""Storage adapters: open and validate mask stores, read masks. No metric math.

:mod:`~segiou.io.zarr` (Zarr mask stores; every zarr internal the fast reader uses is in
:mod:`~segiou.io._zarr_fast`), :mod:`~segiou.io.png` (folders of label images, and ``ingest``
into Zarr), :mod:`~segiou.io.chunks` (image regions read chunk by chunk) and
:mod:`~segiou.io.sources` (open what a path names). Import the submodule you need: each loads
zarr, numcodecs or Pillow only when it is imported.
"""
