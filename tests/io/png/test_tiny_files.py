"""A mask file of 0 to 4 bytes is refused by name like any other damaged file.

Opening files through Pillow's format registry (without its decompression-bomb guard) called
each format's test outside Image.open's protection: Pillow's DIB test unpacks 4 bytes, and an
empty prediction file crashed eval and ingest with a bare struct.error (exit 1, no file)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from PIL import Image

from segiou.cli import main
from segiou.io.png._decode import decode_file, read_header


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4])
def test_a_tiny_file_is_refused_naming_it(tmp_path, size):
    bad = tmp_path / "x.png"
    bad.write_bytes(b"\x89PNG"[:size])
    for read in (read_header, decode_file):
        with pytest.raises(Exception, match=r"x\.png") as info:
            read(str(bad))
        assert not isinstance(info.value, struct.error)


def test_eval_with_an_empty_prediction_file_exits_2_with_one_line(tmp_path, capsys):
    for side in ("gt", "pred"):
        (tmp_path / side).mkdir()
        Image.fromarray(np.zeros((4, 4), np.uint8)).save(tmp_path / side / "a.png")
    (tmp_path / "pred" / "a.png").write_bytes(b"")
    code = main(["eval", "--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred"),
                 "--labels", "3", "--quiet", "--bootstrap", "0", "--scheduler", "synchronous"])  # fmt: skip
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a.png" in line
