"""Synthetic data and property-test strategies, for segiou's tests and for yours.

:mod:`~segiou.testing.synthetic` makes seeded Cityscapes-like and iid masks (numpy only);
:mod:`~segiou.testing.datasets` writes them to Zarr stores (the demo's dataset);
:mod:`~segiou.testing.strategies` holds Hypothesis strategies for label masks (needs the
``hypothesis`` package, a test extra). Import the submodule you need.
"""
