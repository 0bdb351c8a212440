"""Issue 15: nothing silently wrong, nothing destroyed.

One test (at least) per defect of issue 15, grouped by its six numbered classes. Every test here
fails on the code before the fix, for the defect's reason, and states what the fixed code must
do: exit code 2 with one ``segiou <command>: error: ...`` line and no traceback; an exception of
:mod:`segiou.errors` (a ``SegiouError`` that also subclasses the fitting builtin); a refusal that
leaves files as they were; exact counts.

Only names that survive a restructuring of the package are used: ``segiou.ConfusionMatrix``,
``segiou.errors``, ``segiou.cli.main`` (in-process, a list of arguments) or
``python -m segiou.cli`` (a real process: Ctrl-C, closed or full stdout, memory limits),
``segiou.parallel.evaluate_zarr``, ``segiou.io.zarr`` (``create_stack``, ``open_masks``,
``ChunkError``), ``segiou.io.png`` (``find_pairs``, ``png_set``) and ``segiou.sets.set_overlap``.

Safety: ``/dev/full`` is only ever given to ``--json`` and ``--per-image`` (opened for writing);
never to ``--state``, which on the code before the fix replaces whatever is at its path (as root,
the device node itself). Memory refusals run in a child process under ``RLIMIT_AS``: nothing here
allocates gigabytes.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import segiou
from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.errors import (
    CheckpointError,
    DuplicateBatchError,
    LabelRangeError,
    LabelSpecError,
    SegiouError,
    StoreLayoutError,
)
from segiou.geometry.sets import set_overlap
from segiou.io.png import find_pairs, png_set
from segiou.io.zarr import ChunkError, canonical_url, create_stack, open_masks
from segiou.parallel import evaluate_zarr

GIB = 1 << 30


# -- helpers ----------------------------------------------------------------------------------
def cli(*args: object) -> tuple[int, str, str]:
    """Run ``segiou`` in-process; return (exit code, stdout, stderr).

    An exception escaping ``main`` is what the user sees as a traceback: the test fails there,
    saying so.
    """
    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 2
        except Exception as exc:  # noqa: BLE001 - the defect: a traceback
            pytest.fail(
                f"segiou {' '.join(map(repr, argv))} raised {type(exc).__name__}: {exc} "
                f"(a traceback) instead of exiting 2 with a one-line message; "
                f"stderr so far: {err.getvalue()!r}"
            )
    return int(rc), out.getvalue(), err.getvalue()


def raised(exc_type: type[BaseException], fn: Any, *args: Any,
           describe: Any = repr, **kwargs: Any) -> BaseException:  # fmt: skip
    """Call ``fn``; return the ``exc_type`` it raised, or fail describing what it returned.

    Any other exception propagates (the test fails with it).
    """
    try:
        result = fn(*args, **kwargs)
    except exc_type as err:
        return err
    pytest.fail(f"no {exc_type.__name__}: {getattr(fn, '__name__', fn)} returned "
                f"{describe(result)}")  # fmt: skip


def _state_of(cm: ConfusionMatrix) -> str:
    return (f"accepted: counts {cm.counts.tolist()}, void {cm.void.tolist()}, keys "
            f"{sorted(cm.keys)}, pixels {cm.n_pixels:,}")  # fmt: skip


def _merged(cm: ConfusionMatrix) -> str:
    return f"a merge of {cm.n_images} images and {cm.n_pixels:,} pixels (counted twice)"


def assert_refused(rc: int, err: str, *needles: str) -> str:
    """Exit code 2, no traceback, one ``error:`` line naming every needle; return that line."""
    assert rc == 2, f"exit code {rc}, expected 2 (bad input, said in one line); stderr: {err!r}"
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, f"expected one 'segiou <command>: error: ...' line; stderr: {err!r}"
    for needle in needles:
        assert needle.lower() in lines[0].lower(), f"{needle!r} not named in {lines[0]!r}"
    return lines[0]


def segiou_cmd(*args: object) -> list[str]:
    return [sys.executable, "-m", "segiou.cli", *map(str, args)]


def run_proc(*args: object, limit_as: int | None = None, timeout: float = 120,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run ``python -m segiou.cli ARGS`` (optionally with an address-space limit)."""

    def limit() -> None:
        if limit_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run(segiou_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit, cwd=cwd, check=False)  # fmt: skip


def assert_proc_refused(r: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return assert_refused(r.returncode, r.stderr, *needles)


def stack_pair(root: Path, gt: Any, pred: Any = None,
               names: list[str] | None = None) -> tuple[Path, Path]:  # fmt: skip
    """``root/gt.zarr`` and ``root/pred.zarr``: stacks (uint8, one chunk per image)."""
    g = np.asarray(gt, dtype=np.uint8)
    p = g if pred is None else np.asarray(pred, dtype=np.uint8)
    n, h, w = g.shape
    root.mkdir(parents=True, exist_ok=True)
    for side, masks in (("gt", g), ("pred", p)):
        a = create_stack(root / f"{side}.zarr", n=n, height=h, width=w, names=names)
        a[:] = masks
    return root / "gt.zarr", root / "pred.zarr"


def halves(n: int = 2, h: int = 8, w: int = 8) -> np.ndarray:
    m = np.zeros((n, h, w), dtype=np.uint8)
    m[:, : h // 2] = 1
    return m


def eval_args(gt: Path | str, pred: Path | str, *extra: object, labels: str = "2") -> list[object]:
    return ["eval", "--gt", gt, "--pred", pred, "--labels", labels, "--quiet",
            "--scheduler", "synchronous", *extra]  # fmt: skip


def write_pngs(folder: Path, names: list[str], mask: np.ndarray) -> None:
    from PIL import Image

    for name in names:
        path = folder / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(mask).save(path)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes), to tell whether it changed."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody can create files in (mode 0555; as root, the immutable attribute)."""
    d = tmp_path / "readonly"
    d.mkdir()
    if os.geteuid() != 0:
        d.chmod(0o555)
        try:
            yield d
        finally:
            d.chmod(0o755)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(d)], check=False).returncode:
        pytest.skip("running as root without 'chattr +i': no way to make a read-only folder")
    try:
        yield d
    finally:
        subprocess.run([chattr, "-i", str(d)], check=False)


# == 1. a chunk that decodes to the wrong size ==================================================
def _codec(name: str) -> tuple[int, Any]:
    """(zarr format, compressors) of a codec case."""
    import numcodecs
    from zarr import codecs as zc

    if name == "v2-lz4" and not hasattr(numcodecs, "LZ4"):
        pytest.skip("numcodecs was built without LZ4")
    cases: dict[str, Any] = {
        "v3-zstd": lambda: (3, [zc.ZstdCodec()]),
        "v3-zstd-checksum": lambda: (3, [zc.ZstdCodec(checksum=True)]),
        "v3-zstd-crc32c": lambda: (3, [zc.ZstdCodec(), zc.Crc32cCodec()]),
        "v3-gzip": lambda: (3, [zc.GzipCodec()]),
        "v3-blosc": lambda: (3, [zc.BloscCodec(cname="lz4")]),
        "v2-zstd": lambda: (2, numcodecs.Zstd()),
        "v2-zstd-checksum": lambda: (2, numcodecs.Zstd(checksum=True)),
        "v2-gzip": lambda: (2, numcodecs.GZip()),
        "v2-blosc": lambda: (2, numcodecs.Blosc(cname="lz4")),
        "v2-lz4": lambda: (2, numcodecs.LZ4()),
    }
    out: tuple[int, Any] = cases[name]()
    return out


CODECS = ["v3-zstd", "v3-zstd-checksum", "v3-zstd-crc32c", "v3-gzip", "v3-blosc", "v2-zstd",
          "v2-zstd-checksum", "v2-gzip", "v2-blosc", "v2-lz4"]  # fmt: skip


def _array(path: Path, codec: str, shape: tuple[int, ...], chunks: tuple[int, ...],
           value: int) -> Any:  # fmt: skip
    import zarr

    fmt, comp = _codec(codec)
    a = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype="uint8", fill_value=0,
                          zarr_format=fmt, compressors=comp,
                          config={"write_empty_chunks": True})  # fmt: skip
    a[:] = value
    return a


def short_chunk_stores(root: Path, codec: str) -> tuple[Path, Path]:
    """The issue's stores: 4 x 128 x 128 of 1s in 64 x 64 chunks, ground-truth chunk (2, 0, 0)
    replaced by a valid frame of the same codecs that holds 2048 bytes instead of 4096."""
    import zarr

    for side in ("gt", "pred"):
        _array(root / f"{side}.zarr", codec, (4, 128, 128), (1, 64, 64), 1)
    _array(root / "donor.zarr", codec, (1, 32, 64), (1, 32, 64), 0)  # 2048 B, same codecs
    fmt = _codec(codec)[0]
    src, dst = ("c/0/0/0", "c/2/0/0") if fmt == 3 else ("0.0.0", "2.0.0")
    shutil.copyfile(root / "donor.zarr" / src, root / "gt.zarr" / dst)
    with pytest.raises(Exception):  # noqa: B017, PT011 - zarr-python itself refuses the chunk
        zarr.open_array(str(root / "gt.zarr"), mode="r")[2]
    return root / "gt.zarr", root / "pred.zarr"


@pytest.fixture(scope="module")
def process_pool() -> Iterator[Any]:
    """One pool of worker processes for the ``processes`` cases (a fresh one costs seconds)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"))
    yield pool
    pool.shutdown(cancel_futures=True)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads", "processes"])
@pytest.mark.parametrize("codec", CODECS)
def test_chunk_of_the_wrong_size_is_a_chunk_error(tmp_path: Path, codec: str, scheduler: str,
                                                  request: pytest.FixtureRequest) -> None:  # fmt: skip
    """Every decode path checks that it produced exactly the chunk's bytes, on every scheduler."""
    import dask

    gt, pred = short_chunk_stores(tmp_path, codec)
    ctx: Any = contextlib.nullcontext()
    if scheduler == "processes":
        ctx = dask.config.set(pool=request.getfixturevalue("process_pool"))
    with ctx:
        try:
            cm = evaluate_zarr(gt, pred, labels=2, scheduler=scheduler)
        except ChunkError as err:
            msg = str(err)
        else:
            pytest.fail(
                f"{codec}, {scheduler}: a chunk that decodes to 2048 of its 4096 bytes was "
                f"counted (counts {cm.counts.tolist()}, the other half from a reused buffer); "
                "expected ChunkError"
            )
    assert "(2, 0, 0)" in msg, msg
    assert "000002" in msg, msg


def test_issue_example_exits_2_on_every_scheduler(tmp_path: Path) -> None:
    """The issue's exact chunk (``Zstd().encode(bytes(2048))``): exit 2 and the same message on
    every scheduler; today exit 0 with an mIoU that depends on the scheduler."""
    import numcodecs

    gt, pred = stack_pair(tmp_path, np.ones((4, 128, 128)))
    for side in (gt, pred):  # 64 x 64 chunks, as in the issue
        shutil.rmtree(side)
        _array(side, "v3-zstd", (4, 128, 128), (1, 64, 64), 1)
    (gt / "c/2/0/0").write_bytes(numcodecs.Zstd().encode(bytes(2048)))
    seen = {}
    for scheduler in ("synchronous", "threads", "processes"):
        args = eval_args(gt, pred)
        args[args.index("--scheduler") + 1] = scheduler
        rc, out, err = cli(*args)
        miou = re.search(r"miou\s+([\d.]+)", out)
        assert rc == 2, f"{scheduler}: exit {rc}, mIoU {miou and miou.group(1)}; expected 2"
        seen[scheduler] = assert_refused(rc, err, "(2, 0, 0)")
    assert len(set(seen.values())) == 1, seen


def test_decoding_into_a_reused_buffer_never_keeps_its_old_values(tmp_path: Path) -> None:
    """A pooled decode buffer's old bytes never reach a count: a short chunk is refused."""
    gt, _ = short_chunk_stores(tmp_path, "v3-zstd")
    arr = open_masks(gt).arrays[0]
    dirty = np.full(arr.chunks, 7, dtype=np.uint8)  # what a buffer held from an earlier chunk
    try:
        got = arr.read_chunk((2, 0, 0), missing="error", images="'000002'", out=dirty)
    except ChunkError:
        return
    pytest.fail(f"read_chunk returned the chunk with {int((got == 7).sum())} values left over "
                "from the buffer's previous use (7); expected ChunkError")  # fmt: skip


@pytest.mark.parametrize("side", ["gt", "pred"])
def test_chunk_path_that_is_a_folder_is_a_chunk_error(tmp_path: Path, side: str) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    chunk = (gt if side == "gt" else pred) / "c/1/0/0"
    chunk.unlink()
    chunk.mkdir()
    with pytest.raises(ChunkError, match=r"\(1, 0, 0\)"):  # today: IsADirectoryError
        evaluate_zarr(gt, pred, labels=2, scheduler="synchronous")


# == 2. the same PNG folder under two spellings ================================================
def _png_dataset(root: Path) -> None:
    """png/g1 and png/p1: 5 images of 40 x 60 (12,000 pixels)."""
    mask = (np.arange(40 * 60).reshape(40, 60) % 2).astype(np.uint8)
    for side in ("g1", "p1"):
        write_pngs(root / "png" / side, [str(i) for i in range(5)], mask)


@pytest.mark.parametrize("spelling", ["absolute", "dotdot", "symlink"])
def test_png_folder_has_one_batch_key_whatever_its_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _png_dataset(tmp_path)
    (tmp_path / "png" / "sub").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "png" / "g1")
    other = {"absolute": str(tmp_path / "png" / "g1"), "dotdot": "png/sub/../g1",
             "symlink": "alias"}[spelling]  # fmt: skip
    pred = png_set("png/p1", side="pred")
    a = evaluate_zarr(png_set("png/g1"), pred, labels=2, scheduler="synchronous")
    b = evaluate_zarr(png_set(other), pred, labels=2, scheduler="synchronous")
    assert (a.n_images, a.n_pixels) == (5, 12_000)
    assert a.keys == b.keys, "one folder, two batch keys: merging counts it twice"
    raised(DuplicateBatchError, a.merge, b, describe=_merged)


def test_saved_states_of_one_png_folder_under_two_spellings_do_not_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _png_dataset(tmp_path)
    for gt, state in (("png/g1", "s1.json"), (str(tmp_path / "png" / "g1"), "s2.json")):
        rc, _, err = cli(*eval_args(gt, "png/p1", "--state", state))
        assert rc == 0, err
    a, b = ConfusionMatrix.load("s1.json"), ConfusionMatrix.load("s2.json")
    raised(DuplicateBatchError, a.merge, b, describe=_merged)  # the 5 images counted twice


def test_a_remote_store_has_one_batch_key_whatever_its_spelling(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    import zarr

    bucket = f"memory://segiou-{tmp_path.name}"
    for side in ("gt", "pred"):
        a = zarr.create_array(f"{bucket}/{side}.zarr", shape=(2, 8, 8), chunks=(1, 8, 8),
                              dtype="uint8", fill_value=0)  # fmt: skip
        a[:] = 1
    pred = f"{bucket}/pred.zarr"
    a = evaluate_zarr(f"{bucket}/gt.zarr", pred, labels=2, scheduler="synchronous")
    b = evaluate_zarr(f"{bucket}/gt.zarr/", pred, labels=2, scheduler="synchronous")
    assert (a.n_images, a.n_pixels) == (2, 128)
    assert a.keys == b.keys, "one store, two batch keys: merging counts it twice"
    raised(DuplicateBatchError, a.merge, b, describe=_merged)


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("s3://bucket/val/gt.zarr", "s3://bucket/val/gt.zarr"),
        ("S3://Bucket//val/./gt.zarr/", "s3://bucket/val/gt.zarr"),
        ("gs://b/a/../gt.zarr", "gs://b/a/../gt.zarr"),  # object stores do not resolve '..'
        ("https://Host:8080/x/gt.zarr/?v=2", "https://host:8080/x/gt.zarr?v=2"),
        ("s3://bucket/", "s3://bucket"),
    ],
)
def test_canonical_url(url: str, want: str) -> None:
    assert canonical_url(url) == want
    assert canonical_url(want) == want


# == 3. images skipped without a word ==========================================================
def test_zarr_group_with_a_subgroup_counts_every_image_or_refuses(tmp_path: Path) -> None:
    import zarr

    for side in ("gt", "pred"):
        root = zarr.open_group(str(tmp_path / f"{side}.zarr"), mode="w")
        arrays = [(root, "top")] + [(root.require_group("city"), n) for n in ("x", "y")]
        for group, name in arrays:
            a = group.create_array(name, shape=(10, 12), dtype="uint8", fill_value=0,
                                   config={"write_empty_chunks": True})  # fmt: skip
            a[:] = 1
    refusal = ""
    try:
        cm = evaluate_zarr(tmp_path / "gt.zarr", tmp_path / "pred.zarr", labels=2,
                           scheduler="synchronous")  # fmt: skip
    except SegiouError as err:  # refused, naming what it would skip
        refusal = str(err)
    if refusal:
        assert "city" in refusal, refusal
        return
    assert (cm.n_images, cm.n_pixels) == (3, 3 * 120), (
        f"counted {cm.n_images} image(s) of 3: the subgroup 'city' was skipped without a word"
    )


def test_png_tree_with_a_symlinked_folder_counts_every_image(tmp_path: Path) -> None:
    ones = np.ones((10, 12), dtype=np.uint8)
    for side in ("gt", "pred"):
        write_pngs(tmp_path / side, ["a"], ones)
        write_pngs(tmp_path / "elsewhere" / side, ["b", "c", "d"], ones)
        (tmp_path / side / "city").symlink_to(tmp_path / "elsewhere" / side)
    g, p = find_pairs(tmp_path / "gt", tmp_path / "pred")
    assert sorted(g.names) == ["a", "city/b", "city/c", "city/d"], g.names
    cm = evaluate_zarr(g, p, labels=2, scheduler="synchronous")
    assert (cm.n_images, cm.n_pixels) == (4, 4 * 120)
    # following links is guarded against loops: each image once, or a refusal naming the loop
    for side in ("gt", "pred"):
        (tmp_path / "elsewhere" / side / "self").symlink_to(".")
    refusal = ""
    try:
        g2, _ = find_pairs(tmp_path / "gt", tmp_path / "pred")
    except SegiouError as err:
        refusal = str(err)
    if refusal:
        assert "self" in refusal, refusal
    else:
        assert sorted(g2.names) == sorted(g.names)


# == 4. outputs that destroy things ============================================================
def _make_node(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
        return
    try:  # a private null device (major 1, minor 3), in the test's folder
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("cannot create a character device here (not root)")


def _is_node(kind: str, path: Path) -> bool:
    mode = os.lstat(path).st_mode
    return stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)


@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_state_refuses_a_path_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    node, report = tmp_path / "node", tmp_path / "report.json"
    _make_node(kind, node)
    rc, _, err = cli(*eval_args(gt, pred, "--state", node, "--json", report))
    assert _is_node(kind, node), f"--state replaced the {kind} at {node} by a regular file"
    assert_refused(rc, err, "--state")
    assert not report.exists(), "refused only after evaluating: --json was written"


@pytest.mark.parametrize("kind", ["fifo", "chardev"])
def test_save_refuses_a_path_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    cm = ConfusionMatrix(2).update(halves(), halves(), key="a")
    node = tmp_path / "node"
    _make_node(kind, node)
    with pytest.raises(SegiouError):
        cm.save(node)
    assert _is_node(kind, node), f"save() replaced the {kind} by a regular file"


def test_outputs_write_through_symlinks_to_their_targets(tmp_path: Path) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    real, out = tmp_path / "real", tmp_path / "out"
    real.mkdir()
    out.mkdir()
    for name in ("state.json", "report.json"):
        (real / name).write_text("old", encoding="utf-8")
        (out / name).symlink_to(real / name)
    rc, _, err = cli(*eval_args(gt, pred, "--state", out / "state.json",
                                "--json", out / "report.json"))  # fmt: skip
    assert rc == 0, err
    assert (out / "report.json").is_symlink()
    assert (out / "state.json").is_symlink(), (
        "--state replaced its symlink by a file (while --json wrote through its link)"
    )
    assert ConfusionMatrix.load(real / "state.json").n_images == 2
    assert json.loads((real / "report.json").read_text(encoding="utf-8"))["images"] == 2


def test_save_writes_through_a_symlink_atomically(tmp_path: Path) -> None:
    cm = ConfusionMatrix(2).update(halves(), halves(), key="a")
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old", encoding="utf-8")
    link.symlink_to(target)
    cm.save(link)
    assert link.is_symlink(), "save() replaced the symlink by a file"
    assert ConfusionMatrix.load(target) == cm
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "target.json"]


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    """A private (0600) state stays private when saved again; a new file gets the umask's."""
    cm = ConfusionMatrix(2).update(halves(), halves(), key="a")
    private = tmp_path / "private.json"
    cm.save(private)
    private.chmod(0o600)
    cm.save(private)
    assert private.stat().st_mode & 0o777 == 0o600
    umask = os.umask(0o022)
    os.umask(umask)
    cm.save(tmp_path / "new.json")
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("spelling", ["same", "dotdot", "symlink"])
def test_two_outputs_that_are_one_file_are_refused_before_evaluating(
    tmp_path: Path, spelling: str
) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    x = tmp_path / "x.out"
    (tmp_path / "d").mkdir()
    (tmp_path / "y.out").symlink_to(x)  # dangling until x is written
    other = {"same": x, "dotdot": tmp_path / "d" / ".." / "x.out",
             "symlink": tmp_path / "y.out"}[spelling]  # fmt: skip
    state = x if spelling == "same" else tmp_path / "s.json"
    rc, _, err = cli(*eval_args(gt, pred, "--json", x, "--per-image", other, "--state", state))
    line = assert_refused(rc, err)
    assert sum(opt in line for opt in ("--json", "--per-image", "--state")) >= 2, line
    assert not x.exists(), "refused only after writing"


@pytest.mark.parametrize(
    ("opt", "inside"),
    [
        ("--json", "gt.zarr/zarr.json"),  # the issue: destroys the ground-truth store
        ("--per-image", "pred.zarr/zarr.json"),
        ("--state", "gt.zarr/c/0/0/0"),  # a chunk replaced by JSON
        ("--json", "gt.zarr/report.json"),  # nothing overwritten, still inside an input
    ],
)
def test_output_inside_an_input_store_is_refused(tmp_path: Path, opt: str, inside: str) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    before = (tree(gt), tree(pred))
    rc, _, err = cli(*eval_args(gt, pred, opt, tmp_path / inside))
    assert (tree(gt), tree(pred)) == before, f"{opt} {inside} changed an input store"
    assert_refused(rc, err, opt)


def test_output_inside_an_input_png_folder_is_refused(tmp_path: Path) -> None:
    mask = np.eye(8, dtype=np.uint8)
    for side in ("gt", "pred"):
        write_pngs(tmp_path / side, ["a", "b"], mask)
    before = tree(tmp_path / "gt")
    rc, _, err = cli(*eval_args(tmp_path / "gt", tmp_path / "pred",
                                "--state", tmp_path / "gt" / "a.png"))  # fmt: skip
    assert tree(tmp_path / "gt") == before, "--state overwrote an input mask"
    assert_refused(rc, err, "--state")


# == 5. tracebacks where the promise is exit code 2 and a clear message ========================
@pytest.mark.parametrize("opt", ["--json", "--per-image", "--state"])
def test_output_in_a_read_only_folder_is_refused_before_evaluating(
    tmp_path: Path, readonly_dir: Path, opt: str
) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    other_opt, other = ("--state", tmp_path / "s.json") if opt == "--json" else (
        "--json", tmp_path / "r.json")  # fmt: skip
    rc, _, err = cli(*eval_args(gt, pred, opt, readonly_dir / "out", other_opt, other))
    assert_refused(rc, err, opt, str(readonly_dir))
    assert not other.exists(), "refused only after evaluating (another output was written)"


def test_ingest_into_a_read_only_folder_exits_2(tmp_path: Path, readonly_dir: Path) -> None:
    for side in ("gt", "pred"):
        write_pngs(tmp_path / side, ["a", "b"], np.eye(8, dtype=np.uint8))
    rc, _, err = cli("ingest", "--gt", tmp_path / "gt", "--pred", tmp_path / "pred",
                     "--out", readonly_dir / "s.zarr", "--quiet")  # fmt: skip
    assert_refused(rc, err, str(readonly_dir))


@pytest.mark.parametrize("opt", ["--json", "--per-image"])
def test_output_on_a_full_device_exits_2(tmp_path: Path, opt: str) -> None:
    # /dev/full: every write fails with ENOSPC (never pass it to --state, see the module doc)
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    gt, pred = stack_pair(tmp_path, halves())
    rc, _, err = cli(*eval_args(gt, pred, opt, "/dev/full"))
    assert_refused(rc, err, "/dev/full")


def test_state_on_a_full_disk_exits_2_and_leaves_nothing(tmp_path: Path) -> None:
    """A disk that fills up while the state is written: exit 2, no temporary file left."""
    gt, pred = stack_pair(tmp_path / "data", halves())
    out = tmp_path / "out"
    out.mkdir()

    def small_files() -> None:  # files beyond 64 KiB fail with EFBIG, like a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    # 250 classes: the state (a 250 x 250 count matrix) is larger than 64 KiB
    r = subprocess.run(segiou_cmd(*eval_args(gt, pred, "--state", out / "state.json",
                                             labels="250")),
                       capture_output=True, text=True, timeout=120, preexec_fn=small_files,
                       check=False)  # fmt: skip
    assert_proc_refused(r, "state.json")
    assert list(out.iterdir()) == [], "a partial or temporary state file was left behind"


def test_closed_stdout_exits_2_without_a_traceback(tmp_path: Path) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    # segiou eval ... >&-
    r = subprocess.run(segiou_cmd(*eval_args(gt, pred)), stdout=None, stderr=subprocess.PIPE,
                       text=True, timeout=120, preexec_fn=lambda: os.close(1),
                       check=False)  # fmt: skip
    assert_proc_refused(r)


def test_full_stdout_exits_2_without_a_traceback(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    gt, pred = stack_pair(tmp_path, halves())
    with open("/dev/full", "w") as full:  # noqa: PTH123 - opened for writing only
        r = subprocess.run(segiou_cmd(*eval_args(gt, pred)), stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=120, check=False)  # fmt: skip
    assert_proc_refused(r)


def test_demo_into_a_path_that_is_a_file_exits_2(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("keep me", encoding="utf-8")
    rc, _, err = cli("demo", f, "--images", "1", "--size", "8x8", "--quiet")
    assert_refused(rc, err, str(f))
    assert f.read_text(encoding="utf-8") == "keep me"


def test_demo_negative_seed_exits_2_before_writing(tmp_path: Path) -> None:
    d = tmp_path / "d"
    rc, _, err = cli("demo", d, "--images", "1", "--size", "8x8", "--seed", "-1", "--quiet")
    assert_refused(rc, err, "--seed")
    assert not (d / "demo.zarr").exists()


def test_demo_size_too_large_is_refused_before_allocating(tmp_path: Path) -> None:
    d = tmp_path / "d"
    r = run_proc("demo", d, "--size", "99999x99999", "--images", "1", "--quiet", limit_as=2 * GIB)
    assert_proc_refused(r, "99999")
    assert not (d / "demo.zarr").exists(), "the store was started before the size was checked"


SIZE = re.compile(r"\d[\d,.]*\s*(?:[KMGTPE]i?B|bytes)", re.IGNORECASE)


@pytest.mark.parametrize("labels", ["30000", "99999999999"])
def test_class_count_too_large_is_refused_before_allocating(tmp_path: Path, labels: str) -> None:
    """6.7 GiB for 30000 classes; 99999999999 grew past 20 GB before the kernel killed it."""
    gt, pred = stack_pair(tmp_path, halves())
    r = run_proc(*eval_args(gt, pred, labels=labels), limit_as=2 * GIB, timeout=300)
    line = assert_proc_refused(r)
    assert SIZE.search(line), f"the message does not say the size: {line!r}"


def test_confusion_matrix_too_large_is_refused_before_allocating() -> None:
    code = (
        "import segiou\nfrom segiou.errors import SegiouError\n"
        "try:\n    segiou.ConfusionMatrix(30000)\n"
        "except SegiouError as err:\n    print(err)\n    raise SystemExit(3)\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * GIB, 2 * GIB))

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       preexec_fn=limit, check=False)  # fmt: skip
    assert r.returncode == 3, f"expected a SegiouError before allocating; got {r.stderr[-500:]}"
    assert SIZE.search(r.stdout), r.stdout


@pytest.mark.parametrize("attr", ["abc", {"names": [["a"], ["b"]]}], ids=["string", "name-lists"])
def test_bad_segiou_attribute_is_a_store_layout_error(tmp_path: Path, attr: object) -> None:
    import zarr

    gt, pred = stack_pair(tmp_path, halves())
    zarr.open_array(str(gt), mode="r+").attrs["segiou"] = attr
    with pytest.raises(StoreLayoutError, match="segiou"):
        open_masks(gt)
    rc, _, err = cli(*eval_args(gt, pred))
    assert_refused(rc, err, "segiou")


def test_chunk_path_that_is_a_folder_exits_2(tmp_path: Path) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    (gt / "c/1/0/0").unlink()
    (gt / "c/1/0/0").mkdir()
    rc, _, err = cli(*eval_args(gt, pred))
    assert_refused(rc, err, "(1, 0, 0)")


def _spec_file(path: Path, raw: list[dict[str, Any]]) -> Path:
    spec = {"name": path.stem, "classes": ["a", "b"], "raw": raw}
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize("base", [2**63, 2**64], ids=["2**63", "2**64"])
def test_spec_raw_ids_beyond_int64_are_a_label_spec_error(tmp_path: Path, base: int) -> None:
    """README: uint64 values >= 2**63 are unexpected values; a spec cannot name them as ids."""
    spec = _spec_file(tmp_path / "big.json", [{"id": base, "name": "x", "class": 0},
                                              {"id": base + 1, "name": "y", "class": 1}])  # fmt: skip
    z = np.zeros((4, 4), dtype=np.uint8)
    with pytest.raises(LabelSpecError, match=str(base)):  # today OverflowError / TypingError
        ConfusionMatrix(spec, gt_ids="raw").update(z, z, key="a")
    for side in ("gt", "pred"):  # image folders: no dtype check shields the kernels
        write_pngs(tmp_path / side, ["a"], z)
    rc, _, err = cli(*eval_args(tmp_path / "gt", tmp_path / "pred", labels=str(spec)))
    assert_refused(rc, err, str(base))


def test_ctrl_c_exits_130_with_one_line_and_no_partial_output(tmp_path: Path) -> None:
    """SIGINT while segiou eval runs: one line on stderr, exit 130, no half-written file."""
    if not hasattr(fcntl, "F_SETPIPE_SZ"):
        pytest.skip("needs Linux pipes (F_SETPIPE_SZ)")
    gt, pred = stack_pair(tmp_path / "data", halves())
    out = tmp_path / "out"
    out.mkdir()
    report, state = out / "report.json", out / "state.json"
    # stdout is a 4 KiB pipe nobody reads: the tables of 250 classes fill it, and the process
    # blocks in a write inside segiou, a moment this test can see (FIONREAD) and interrupt
    rfd, wfd = os.pipe()
    fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, 4096)
    cap = fcntl.fcntl(wfd, fcntl.F_GETPIPE_SZ)
    proc = subprocess.Popen(segiou_cmd(*eval_args(gt, pred, "--json", report, "--state", state,
                                                  labels="250")),
                            stdout=wfd, stderr=subprocess.PIPE, text=True)  # fmt: skip
    os.close(wfd)
    try:
        deadline = time.monotonic() + 120
        while struct.unpack("i", fcntl.ioctl(rfd, termios.FIONREAD, b"\0" * 4))[0] < cap:
            assert proc.poll() is None, f"finished before the pipe filled: {proc.returncode}"
            assert time.monotonic() < deadline, "segiou never filled its stdout"
            time.sleep(0.05)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        while os.read(rfd, 1 << 16):  # drain, so that the process can exit
            pass
        rc = proc.wait(timeout=60)
    finally:
        os.close(rfd)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    assert "Traceback" not in err, err[-2000:]
    assert "KeyboardInterrupt" not in err, err[-2000:]
    assert rc == 130, f"exit code {rc}, expected 130 after Ctrl-C; stderr {err!r}"
    last = err.strip().splitlines()[-1] if err.strip() else ""
    assert re.search(r"interrupt", last, re.IGNORECASE), f"no one-line message: {err!r}"
    # no partial output: each file is complete or absent, and no temporary file is left
    if report.exists():
        json.loads(report.read_text(encoding="utf-8"))
    if state.exists():
        ConfusionMatrix.load(state)
    assert {p.name for p in out.iterdir()} <= {"report.json", "state.json"}


# == 6. messages and states that mislead =======================================================
def test_engine_names_every_image_with_unexpected_values_whatever_the_tasks(tmp_path: Path) -> None:
    g = np.zeros((4, 16, 16), dtype=np.uint8)
    g[1, 3, 4], g[3, 5, 6] = 7, 9
    gt, pred = stack_pair(tmp_path, g, np.zeros_like(g))
    with pytest.raises(LabelRangeError) as mem:  # in memory: every value is listed
        ConfusionMatrix(2).update(g, np.zeros_like(g))
    assert "7 (1 px" in str(mem.value)
    assert "9 (1 px" in str(mem.value)
    messages = {}
    for scheduler in ("synchronous", "threads"):
        for ppt in (256, 10**9):  # one image per task, or all images in few tasks
            with pytest.raises(LabelRangeError) as info:
                evaluate_zarr(gt, pred, labels=2, scheduler=scheduler, pixels_per_task=ppt)
            messages[(scheduler, ppt)] = msg = str(info.value)
            for needle in ("'000001'", "'000003'", "7 (1 px", "9 (1 px"):
                assert needle in msg, f"{scheduler}, {ppt} px/task: {needle} missing from {msg!r}"
    assert len(set(messages.values())) == 1, messages


def test_prediction_problems_name_the_prediction_store(tmp_path: Path) -> None:
    p = np.zeros((2, 8, 8), dtype=np.uint8)
    p[1, 2, 3] = 5
    gt, pred = stack_pair(tmp_path, np.zeros_like(p), p)
    with pytest.raises(LabelRangeError) as info:
        evaluate_zarr(gt, pred, labels=2, scheduler="synchronous")
    msg = str(info.value)
    assert "pred.zarr" in msg, f"a prediction problem named after the ground-truth store: {msg!r}"


def test_spec_with_a_negative_raw_id_counts_a_uint8_store_as_in_memory(tmp_path: Path) -> None:
    spec = _spec_file(tmp_path / "neg.json", [{"id": -1, "name": "minus", "class": 0},
                                              {"id": 0, "name": "zero", "class": 0},
                                              {"id": 1, "name": "one", "class": 1}])  # fmt: skip
    g, p = halves(), np.zeros((2, 8, 8), dtype=np.uint8)
    mem = ConfusionMatrix(spec, gt_ids="raw").update(g, p)
    gt, pred = stack_pair(tmp_path / "s", g, p)
    cm = evaluate_zarr(gt, pred, labels=spec, gt_ids="raw", scheduler="synchronous")
    np.testing.assert_array_equal(cm.counts, mem.counts)


def _state() -> dict[str, Any]:
    g = np.array([[[0, 1], [1, 1]], [[0, 0], [1, 0]]], dtype=np.uint8)
    return ConfusionMatrix(2, per_image=True).update(g, g, key="k").to_dict()


def _plain(counts: list[list[int]], void: tuple[int, int] = (0, 0), **kw: Any) -> dict[str, Any]:
    """A state without per-image rows holding ``counts`` (pixels consistent)."""
    d = ConfusionMatrix(2, **kw).to_dict()
    d.update(counts=counts, void=list(void), images=1, keys=["old"])
    d["pixels"] = sum(map(sum, counts)) + sum(void)
    return d


def _rows(d: dict[str, Any]) -> None:  # (state format 2: per-image confusion entries)
    d["image_rows"]["entries"]["count"][0] += 5


def _ignored(d: dict[str, Any]) -> None:
    d["ignored"] = 10**30
    d["pixels"] += 10**30


def _unexpected(d: dict[str, Any]) -> None:  # on_unexpected is "raise"
    d["unexpected"]["gt"] = {"7": 5}
    d["pixels"] += 5


def _keys(d: dict[str, Any]) -> None:
    d["keys"] = "abc"


def _big_count(d: dict[str, Any]) -> None:
    d["pixels"] += 2**63 - d["counts"][0][0]
    d["counts"][0][0] = 2**63


@pytest.mark.parametrize("mutate", [_rows, _ignored, _unexpected, _keys, _big_count],
                         ids=["rows-not-summing", "ignored-1e30", "unexpected-in-raise-mode",
                              "keys-string", "count-2**63"])  # fmt: skip
def test_from_dict_refuses_states_that_break_its_invariants(mutate: Any) -> None:
    d = _state()
    mutate(d)
    msg = str(raised(CheckpointError, ConfusionMatrix.from_dict, d, describe=_state_of))
    assert not re.search(r"float|object", msg), f"misleading dtype in {msg!r}"


@pytest.mark.parametrize("recorded", ["true-total", "wrapped-total"])
def test_from_dict_refuses_a_pixel_total_beyond_int64(recorded: str) -> None:
    d = _plain([[2**62, 2**62], [2**62, 0]])  # each count fits int64, their sum does not
    if recorded == "wrapped-total":
        d["pixels"] = d["pixels"] - 2**64  # what an int64 sum wraps to: negative
    msg = str(raised(CheckpointError, ConfusionMatrix.from_dict, d, describe=_state_of))
    assert not re.search(r"-\d", msg), f"a negative pixel count in the message: {msg!r}"
    assert re.search(r"int64|2\*\*63|overflow|too large", msg, re.IGNORECASE), msg


@pytest.mark.parametrize("where", ["same-cell", "void", "pixel-total"])
def test_update_that_would_pass_2_63_is_refused_and_counts_nothing(where: str) -> None:
    z = np.zeros((10, 10), dtype=np.uint8)
    if where == "same-cell":
        d, gt, pred = _plain([[2**63 - 10, 0], [0, 0]]), z, z
    elif where == "void":  # far from the counts: the void vector
        d = _plain([[0, 0], [0, 0]], void=(2**63 - 10, 0), ignore_index=255)
        gt, pred = z, np.full_like(z, 255)
    else:  # no single count passes 2**63, their total does
        d, gt, pred = _plain([[2**62, 0], [0, 2**62 - 10]]), z + 1, z + 1
    cm = ConfusionMatrix.from_dict(d)
    before = cm.to_dict()
    err = raised(SegiouError, cm.update, gt, pred, key="next", describe=_state_of)
    assert isinstance(err, OverflowError), type(err).__mro__
    assert cm.to_dict() == before, "a refused update changed the state"


def test_merge_that_would_pass_2_63_is_refused() -> None:
    a = ConfusionMatrix.from_dict(dict(_plain([[2**62, 0], [0, 0]]), keys=["a"]))
    b = ConfusionMatrix.from_dict(dict(_plain([[2**62, 0], [0, 0]]), keys=["b"]))
    before = (a.to_dict(), b.to_dict())
    err = raised(SegiouError, a.merge, b, describe=_state_of)
    assert isinstance(err, OverflowError), type(err).__mro__
    assert (a.to_dict(), b.to_dict()) == before


@pytest.mark.parametrize("names", [[1, "1", None], "abc"], ids=["mixed", "string"])
def test_image_names_must_be_one_distinct_string_per_image(names: object) -> None:
    cm = ConfusionMatrix(2, per_image=True)
    z = np.zeros((3, 2, 2), dtype=np.uint8)
    raised(SegiouError, cm.update, z, z, names=names, describe=lambda r: r.images.names)
    assert cm.n_images == 0


def test_store_names_that_are_a_string_are_refused(tmp_path: Path) -> None:
    import zarr

    gt, _ = stack_pair(tmp_path, halves(3))
    zarr.open_array(str(gt), mode="r+").attrs["segiou"] = {"names": "abc"}
    err = raised(StoreLayoutError, open_masks, gt, describe=lambda ms: f"names {ms.names}")
    assert "names" in str(err)


def test_image_names_with_escapes_and_newlines_are_printed_escaped(tmp_path: Path) -> None:
    names = ["ok", "evil\x1b[31mred\nline2"]
    g = halves()
    p = g.copy()
    p[:, :, :2] = 1 - p[:, :, :2]
    gt, pred = stack_pair(tmp_path, g, p, names=names)
    rc, out, err = cli(*eval_args(gt, pred))
    assert rc == 0, err
    assert "\x1b" not in out, "an ANSI escape of an image name reached the terminal"
    assert "red\nline2" not in out, "a newline in an image name broke a table row"


def test_image_names_that_look_like_markup_are_printed_as_they_are(tmp_path: Path) -> None:
    g = halves()
    p = g.copy()
    p[:, :, :2] = 1 - p[:, :, :2]
    gt, pred = stack_pair(tmp_path / "a", g, p, names=["[b]x[/b]", "y"])
    rc, out, err = cli(*eval_args(gt, pred))
    assert rc == 0, err
    assert "[b]x[/b]" in out, "the table interpreted an image name as markup"
    gt, pred = stack_pair(tmp_path / "b", g, p, names=["a[/b]", "y"])  # today: MarkupError
    rc, out, err = cli(*eval_args(gt, pred))
    assert rc == 0, err
    assert "a[/b]" in out


def test_empty_json_path_is_refused(tmp_path: Path) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    rc, _, err = cli(*eval_args(gt, pred, "--json", ""))
    assert_refused(rc, err, "--json")


def test_store_with_no_images_is_refused(tmp_path: Path) -> None:
    for side in ("gt", "pred"):
        create_stack(tmp_path / f"{side}.zarr", n=0, height=8, width=8)
    rc, _, err = cli(*eval_args(tmp_path / "gt.zarr", tmp_path / "pred.zarr"))
    assert_refused(rc, err, "image")


def test_jpeg_masks_are_warned_about(tmp_path: Path) -> None:
    from PIL import Image

    m = np.zeros((32, 32), dtype=np.uint8)
    m[8:20, 5:27] = 1
    m[25:, :10] = 1
    (tmp_path / "gt").mkdir()
    (tmp_path / "pred").mkdir()
    Image.fromarray(m).save(tmp_path / "gt" / "a.png")
    Image.fromarray(m).save(tmp_path / "pred" / "a.jpg", quality=75)  # changes labels
    rc, _, err = cli(*eval_args(tmp_path / "gt", tmp_path / "pred", "--pred-pattern", "*.jpg",
                                "--on-unexpected", "count"))  # fmt: skip
    assert rc in (0, 2), err
    assert re.search(r"jpe?g|lossy", err, re.IGNORECASE), (
        f"JPEG masks (lossy: labels change) accepted without a word; stderr {err!r}"
    )


def test_sets_lower_casefolds() -> None:
    assert set_overlap(["ß"], ["SS"], lower=True).jaccard == 1.0
    rc, out, _ = cli("sets", "ß", "SS", "--lower")
    assert rc == 0
    assert re.search(r"Jaccard\s+1\.0", out), out


# -- found while looking for the same classes ---------------------------------------------------
def test_a_pipe_where_a_chunk_should_be_is_a_chunk_error_not_a_hang(tmp_path: Path) -> None:
    gt, pred = stack_pair(tmp_path, halves())
    chunk = gt / "c" / "1" / "0" / "0"
    chunk.unlink()
    os.mkfifo(chunk)  # reading it would block forever
    rc, _, err = cli(*eval_args(gt, pred))
    assert_refused(rc, err, "(1, 0, 0)")


def test_nightly_date_must_name_one_folder(tmp_path: Path) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "nightly_eval", Path(__file__).resolve().parents[1] / "pipelines" / "nightly_eval.py"
    )
    assert spec is not None
    assert spec.loader is not None
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    cfg = tmp_path / "c.toml"
    cfg.write_text('[eval]\ngt = "g"\npred = "p"\n', encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        job.main([str(cfg), "--date", "../../gt.zarr"])
    assert info.value.code == 2
    assert "not a folder name" in err.getvalue()


def test_a_missing_prediction_is_never_a_prediction_of_a_category(tmp_path: Path) -> None:
    # the spec lists a void id of the 'vehicle' category (trailer) before 'unlabeled': a
    # missing prediction must score as all-void, not as 'vehicle' in category iIoU
    import zarr

    spec = {"name": "roads",
            "classes": [{"name": "road", "category": "flat"},
                        {"name": "car", "category": "vehicle"}],
            "ignore": [255], "instance_sizes": {"car": 20.0},
            "raw": [{"id": 30, "name": "trailer", "class": None, "category": "vehicle"},
                    {"id": 0, "name": "unlabeled", "class": None},
                    {"id": 7, "name": "road", "class": "road"},
                    {"id": 26, "name": "car", "class": "car"}]}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    g = np.full((2, 8, 8), 7, np.uint8)
    g[:, 2:6, 2:6] = 26
    inst = np.where(g == 26, 26000, g.astype(np.uint16)).astype(np.uint16)
    root = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    for name, a, names in (("gt", g, ["a", "b"]), ("instances", inst, ["a", "b"]),
                           ("pred", g[:1], ["a"])):  # fmt: skip
        arr = root.create_array(name, shape=a.shape, chunks=(1, 8, 8), dtype=a.dtype,
                                fill_value=0)  # fmt: skip
        arr[:] = a
        arr.attrs["segiou"] = {"names": names}
    cm = evaluate_zarr(tmp_path / "s.zarr/gt", tmp_path / "s.zarr/pred",
                       labels=str(tmp_path / "spec.json"), gt_ids="raw", missing_pred="void",
                       scheduler="synchronous")  # fmt: skip
    ref = ConfusionMatrix(str(tmp_path / "spec.json"), gt_ids="raw", instances=True,
                          per_image=True)  # fmt: skip
    ref.update(g[:1], g[:1], key="a", names=["a"], instances=inst[:1])
    ref.update(g[1:], np.zeros_like(g[1:]), key="b", names=["b"], instances=inst[1:])
    got, want = segiou.evaluate(cm).instances, segiou.evaluate(ref).instances
    assert got["category_iiou"][1] == want["category_iiou"][1] == 0.5
    assert got["iiou"][1] == want["iiou"][1]
