"""The package's shape holds: imports point one way, no circles, no private names borrowed.

Every ``import`` in ``segiou/`` is read (function-level and ``TYPE_CHECKING`` imports too: a
lazy upward import is still a dependency), resolved to a module of the package, and checked:

* it goes to the importer's layer or a lower one (the table below, from the style guide);
* the graph of modules has no circle;
* no module imports a ``_private`` name defined in another module, nor a private module from
  outside the package that holds it (``segiou.io.png._decode`` is for ``segiou.io.png`` only);
* no source file is longer than 700 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "segiou"

#: Layers, lowest first. A module may import modules of its own layer and of the layers before
#: it. A module belongs to the layer of the longest prefix that names it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("segiou._version", "segiou.errors", "segiou._typing", "segiou._jit",
              "segiou.outputs", "segiou._resources", "segiou._jsontext")),
    ("per-image rows", ("segiou.images", "segiou._unexpected")),
    ("kernels", ("segiou._kernels", "segiou._word_kernels", "segiou.geometry._box_kernels",
                 "segiou._boundary_kernels", "segiou._instance_kernels", "segiou._entry_kernels")),
    ("typed wrappers", ("segiou._arrays", "segiou._lookup", "segiou._tally", "segiou._count", "segiou._boundary", "segiou._stream", "segiou._scores")),
    ("label specs", ("segiou._builtin_specs", "segiou._spec_checks", "segiou.labels",
                     "segiou._instances")),
    ("accumulator", ("segiou._absent", "segiou._extras", "segiou._batch", "segiou._state", "segiou._state_fields",
                     "segiou.confusion")),
    ("reducers and results", ("segiou._matrix", "segiou.metrics", "segiou.quality", "segiou.conventions", "segiou.results",
                              "segiou.compare", "segiou.stats")),
    ("geometry (beside)", ("segiou.geometry",)),
    ("storage", ("segiou.io",)),
    ("orchestration", ("segiou.parallel",)),
    ("testing (beside)", ("segiou.testing",)),
    ("edges", ("segiou.report", "segiou.cli", "segiou.service", "segiou.client",
               "segiou.__main__")),
    ("public face", ("segiou",)),
]  # fmt: skip


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS"
    return rank


def _imports(module: str) -> list[tuple[int, str, str | None]]:
    """(line, imported module, imported name or None) of every import of a segiou module."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names if a.name.startswith("segiou")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the importer's package
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if not base.startswith("segiou"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append(
                    (node.lineno, sub, None) if sub in MODULES else (node.lineno, base, a.name)
                )
    return out


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for _, target, _ in _imports(m):
            if target in MODULES and target != m:
                graph[m].add(target)
    return graph


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        _layer(m)


def test_imports_point_downward() -> None:
    upward = []
    for m, path in MODULES.items():
        where = path.relative_to(ROOT)
        for line, target, _ in _imports(m):
            if target not in MODULES:
                upward.append(f"{where}:{line} imports {target}, which is no module")
            elif _layer(target) > _layer(m):
                upward.append(
                    f"{where}:{line}: {m} ({LAYERS[_layer(m)][0]}) imports "
                    f"{target} ({LAYERS[_layer(target)][0]})"
                )
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_circles() -> None:
    graph = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert not circles, f"modules that import each other (directly or around a circle): {circles}"


def _private_module_owner(module: str) -> str | None:
    """The package a private module belongs to (``segiou.io`` for ``segiou.io._zarr_fast``)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _private_borrowings(importer: str, imports: list[tuple[int, str, str | None]]) -> list[str]:
    found = []
    for line, target, name in imports:
        if name is not None and name.startswith("_") and not name.startswith("__"):
            found.append(f"{importer}:{line} imports private name {name!r} from {target}")
        owner = _private_module_owner(target)
        if owner is not None and not (importer == owner or importer.startswith(owner + ".")):
            found.append(f"{importer}:{line} imports private module {target} (of {owner})")
    return found


def test_no_private_names_across_modules() -> None:
    found = []
    for m in MODULES:
        found += _private_borrowings(m, _imports(m))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", sorted((ROOT / "pipelines").glob("*.py")), ids=lambda p: p.name)
def test_pipelines_use_the_public_api(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("segiou"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                imports.append((node.lineno, sub, None) if sub in MODULES else
                               (node.lineno, node.module or "", a.name))  # fmt: skip
    # a pipeline is outside the package: every private module is someone else's
    found = [f"{path.name}:{line} imports {t}{'.' + n if n else ''}" for line, t, n in imports
             if (n or "").startswith("_") or _private_module_owner(t) is not None]  # fmt: skip
    assert not found, "\n".join(found)


def test_the_checks_catch_what_they_should() -> None:
    # the rules themselves, on made-up imports: a check that cannot fail proves nothing
    assert _layer("segiou.io.png._decode") > _layer("segiou.labels")
    assert _layer("segiou.confusion") < _layer("segiou.results")
    assert _private_borrowings("segiou.parallel", [(1, "segiou._count", "_describe")])
    assert _private_borrowings("segiou.parallel", [(1, "segiou.io._zarr_fast", None)])
    assert not _private_borrowings("segiou.io.zarr", [(1, "segiou.io._zarr_fast", None)])
    assert not _private_borrowings("segiou.confusion", [(1, "segiou._count", "Lookup")])


def test_no_file_is_over_700_lines() -> None:
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "pipelines").glob("*.py")]
    long = {str(p.relative_to(ROOT)): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 700}  # fmt: skip
    assert not long, f"files over 700 lines (split them by job): {long}"
