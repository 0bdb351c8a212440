"""Run the docstring examples of every segiou module, so that they cannot rot."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import io
import pkgutil
from pathlib import Path

import pytest

import segiou


def _module_names() -> list[str]:
    """Modules of the package whose source has examples (found without importing them)."""
    found = pkgutil.walk_packages(segiou.__path__, "segiou.", onerror=lambda name: None)
    names = []
    for name in sorted(["segiou", *(info.name for info in found)]):
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec else None
        if origin and origin.endswith(".py") and ">>>" in Path(origin).read_text("utf-8"):
            names.append(name)
    return names


@pytest.mark.parametrize("name", _module_names())
def test_docstring_examples(name, tmp_path, monkeypatch):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and err.name.split(".")[0] == "segiou":
            raise
        pytest.skip(f"{name} needs {err.name}, which is not installed")
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = [t for t in finder.find(module, name) if t.examples]
    assert tests, f"{name} has '>>>' in its source but no docstring example was found"
    out = io.StringIO()
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    for t in tests:
        runner.run(t, out=out.write)
    result = runner.summarize(verbose=False)
    if not result.attempted:
        pytest.skip(f"every docstring example of {name} is marked +SKIP")
    if result.failed:
        pytest.fail(f"{result.failed} docstring example(s) of {name} failed:\n{out.getvalue()}")


def test_core_modules_have_examples():
    # the core's public functions are documented with doctested examples (STYLE.md)
    finder = doctest.DocTestFinder(exclude_empty=True)
    for name in ("segiou.metrics", "segiou.labels", "segiou.confusion", "segiou.results"):
        module = importlib.import_module(name)
        n = sum(len(t.examples) for t in finder.find(module, name))
        assert n >= 2, name
