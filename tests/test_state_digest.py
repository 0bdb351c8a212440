"""A saved state carries its SHA-256 and refuses to load once changed.

Found by a review that corrupted saved states at every position: most single-character
changes were refused by the state's invariants, but a count moved from one image to another, a
renamed batch key, an edited spec or absent-chunk counts loaded with other numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from segiou import ConfusionMatrix, evaluate
from segiou.errors import CheckpointError
from segiou.testing.synthetic import cityscapes_like

CHANGED = "changed after segiou wrote it"


def _saved(tmp_path: Path) -> tuple[ConfusionMatrix, Path]:
    gt, pred = cityscapes_like(3, 32, 48, seed=1)
    cm = ConfusionMatrix("cityscapes", per_image=True)
    cm.update(gt[:2], pred[:2], key="b0", names=["a", "b"])
    cm.update(gt[2:], pred[2:], key="b1", names=["c"])
    path = tmp_path / "s.json"
    cm.save(path)
    return cm, path


def _edit(path: Path, change) -> None:
    d = json.loads(path.read_text())
    change(d)
    path.write_text(json.dumps(d))


def test_a_saved_state_loads_back_and_records_its_digest(tmp_path):
    cm, path = _saved(tmp_path)
    d = json.loads(path.read_text())
    sha = d["writer"]["sha256"]
    assert len(sha) == 64
    assert int(sha, 16) >= 0
    assert "sha256" not in cm.to_dict()["writer"]  # to_dict() has none
    back = ConfusionMatrix.load(path)
    assert back.to_dict() == cm.to_dict()
    path.write_text(json.dumps(d, indent=2, sort_keys=True))  # layout is not content
    assert ConfusionMatrix.load(path).to_dict() == cm.to_dict()
    assert ConfusionMatrix.from_dict(d).to_dict() == cm.to_dict()  # a parsed file: checked too


def _move_an_entry(d: dict) -> None:
    """Move one per-image cell to another image: the totals still add up."""
    e = d["image_rows"]["entries"]
    cells = {(i, g, p) for i, g, p in zip(e["image"], e["gt"], e["pred"], strict=True)}
    j = next(j for j, (i, g, p) in enumerate(zip(e["image"], e["gt"], e["pred"], strict=True))
             if i == 0 and (1, g, p) not in cells)  # fmt: skip
    e["image"][j] = 1


def _rename_a_key(d: dict) -> None:
    d["keys"][0] = "b7"


def _category(d: dict) -> None:
    d["labels"]["class_categories"][0] = 1 - d["labels"]["class_categories"][0] % 2


def _writer_version(d: dict) -> None:
    d["writer"]["sha256"] = "0" * 64


@pytest.mark.parametrize("change", [_move_an_entry, _rename_a_key, _category, _writer_version])
def test_a_change_every_invariant_allows_is_refused(tmp_path, change):
    cm, path = _saved(tmp_path)
    d = json.loads(path.read_text())
    change(d)
    sha = d["writer"].pop("sha256")
    if change is not _writer_version:  # the review's edits: each loads without a digest ...
        edited = ConfusionMatrix.from_dict(d)
        assert edited.to_dict() != cm.to_dict()
    d["writer"]["sha256"] = sha
    path.write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match=CHANGED) as info:  # ... and is refused with it
        ConfusionMatrix.load(path)
    assert str(path) in str(info.value)


def test_a_renamed_key_would_have_counted_its_batch_twice(tmp_path):
    gt, pred = cityscapes_like(2, 16, 16, seed=2)
    cm = ConfusionMatrix("cityscapes")
    cm.update(gt, pred, key="batch1")
    path = tmp_path / "s.json"
    cm.save(path)
    _edit(path, _rename_a_key)
    with pytest.raises(CheckpointError, match=CHANGED):
        ConfusionMatrix.load(path)
    _edit(path, lambda d: d["writer"].pop("sha256"))  # edited on purpose: loads, and then ...
    resumed = ConfusionMatrix.load(path)
    resumed.update(gt, pred, key="batch1")  # ... the batch is counted again
    assert resumed.n_pixels == 2 * cm.n_pixels


def test_one_flipped_bit_anywhere_is_refused_or_loads_the_same(tmp_path):
    """Every 7th byte of a saved state, each bit: refused, or (whitespace-like) the same."""
    cm, path = _saved(tmp_path)
    data = path.read_bytes()
    want = cm.to_dict()
    for i in range(0, len(data), 7):
        for bit in range(8):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            path.write_bytes(bytes(bad))
            try:
                got = ConfusionMatrix.load(path).to_dict()
            except CheckpointError:
                continue
            assert got == want, (i, bit)


def test_states_without_a_digest_load_as_before(tmp_path):
    cm, path = _saved(tmp_path)
    _edit(path, lambda d: d["writer"].pop("sha256"))
    assert ConfusionMatrix.load(path).to_dict() == cm.to_dict()
    _edit(path, lambda d: d.pop("writer"))  # (the writer is optional)
    assert ConfusionMatrix.load(path).to_dict() == cm.to_dict()


def test_a_state_saved_merged_and_saved_again_keeps_loading(tmp_path):
    _, path = _saved(tmp_path)
    other = ConfusionMatrix("cityscapes", per_image=True)
    gt, pred = cityscapes_like(1, 32, 48, seed=9)
    other.update(gt, pred, key="b2", names=["d"])
    other.save(tmp_path / "o.json")
    merged = ConfusionMatrix.load(path).merge(ConfusionMatrix.load(tmp_path / "o.json"))
    merged.save(tmp_path / "m.json")
    back = ConfusionMatrix.load(tmp_path / "m.json")
    assert back.to_dict() == merged.to_dict()
    assert back.n_images == 4
    assert evaluate(back).miou == evaluate(merged).miou


@pytest.mark.parametrize(("version", "match"), [
    (0, "no version segiou writes: the file was altered"),
    (-2, "no version segiou writes"),
    (9, r"reads versions \[1, 2, 3\]: the file was altered"),  # written by this segiou
])  # fmt: skip
def test_a_version_no_segiou_writes_says_the_file_was_altered(tmp_path, version, match):
    """Found by review: version 0 said 'upgrade segiou', which cannot help."""
    _, path = _saved(tmp_path)
    _edit(path, lambda d: d.update(version=version))
    with pytest.raises(CheckpointError, match=match):
        ConfusionMatrix.load(path)
    _edit(path, lambda d: d["writer"].update(segiou="99.0"))  # a newer segiou's: upgrade
    if version > 3:
        with pytest.raises(CheckpointError, match=r"upgrade segiou \(if segiou 99\.0 is not"):
            ConfusionMatrix.load(path)


def test_the_file_is_the_state_its_digest_covers(tmp_path):
    """One encoding: the fields after ``writer`` are the canonical text the digest covers."""
    import hashlib

    cm, path = _saved(tmp_path)
    text = path.read_text()
    d = json.loads(text)
    assert d == {**cm.to_dict(), "writer": d["writer"]}
    assert text.startswith('{"writer":')
    body = "{" + text[text.index("},") + 2 :]
    assert json.loads(body) == {k: v for k, v in d.items() if k != "writer"}
    assert hashlib.sha256(body.encode()).hexdigest() == d["writer"]["sha256"]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_sealed_state_holding_what_json_cannot_write_is_refused_by_name(tmp_path, value):
    """Found by review: the digest's own encoding raised a bare ValueError (Python's JSON reads
    NaN and Infinity); the server answered 500, the CLI printed a traceback."""
    _, path = _saved(tmp_path)
    path.write_text(path.read_text().replace('"images":3', f'"images":{value}'))
    with pytest.raises(CheckpointError, match="holds a value no state holds") as info:
        ConfusionMatrix.load(path)
    assert str(path) in str(info.value)
    d = json.loads(path.read_text())
    d["labels"] = {1: "a", "b": 2}  # keys JSON cannot sort (a dict given to from_dict)
    with pytest.raises(CheckpointError, match="changed after segiou wrote it"):
        ConfusionMatrix.from_dict(d)


def test_a_ratio_of_one_written_back_as_an_int_loads(tmp_path):
    """Found by review: jq and JavaScript write the Boundary IoU ratio 1.0 back as 1 (the same
    number); the state loaded before the digest and must still."""
    cm = ConfusionMatrix(3, boundary=1.0)
    cm.update(np.zeros((1, 8, 8), np.uint8), np.zeros((1, 8, 8), np.uint8))
    path = tmp_path / "r.json"
    cm.save(path)
    assert '"ratio":1.0' in path.read_text()  # written as it is
    assert ConfusionMatrix.load(path).to_dict() == cm.to_dict()
    path.write_text(path.read_text().replace('"ratio":1.0', '"ratio":1'))
    back = ConfusionMatrix.load(path)
    assert back.to_dict() == cm.to_dict()
    path.write_text(path.read_text().replace('"ratio":1', '"ratio":0.5'))
    with pytest.raises(CheckpointError, match="changed after segiou wrote it"):
        ConfusionMatrix.load(path)


def test_a_pixel_total_written_as_a_float_is_refused_as_every_count(tmp_path):
    """Found by review: ``pixels: 9216.0`` loaded while every other count refused floats."""
    cm, _ = _saved(tmp_path)
    d = cm.to_dict()
    d["pixels"] = float(d["pixels"])
    with pytest.raises(CheckpointError, match="pixels"):
        ConfusionMatrix.from_dict(d)
    assert np.isclose(d["pixels"], cm.n_pixels)
