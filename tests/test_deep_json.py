"""JSON nested deeper than Python's parser goes (``"[" * 10000``, 20 KB) raised RecursionError,
not ValueError, past every reader that names what it reads: a traceback from the CLI, 500 "a bug
in segiou" from the service (retried by clients). It is refused by name now, and so is a state
whose field parses but is too deep to check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from segiou import ConfusionMatrix
from segiou.cli import main
from segiou.client._http import _message, _refused, _reply_json
from segiou.errors import CheckpointError, LabelSpecError, RefusedError, UsageError
from segiou.labels import load_spec
from segiou.stats import read_metadata

DEEP = "[" * 10000 + "]" * 10000


def _state() -> dict[str, object]:
    cm = ConfusionMatrix(3, per_image=True)
    g = np.zeros((2, 4, 4), np.uint8)
    cm.update(g, g, key="a", names=["x", "y"])
    return cm.to_dict()


def test_a_state_file_nested_too_deeply_is_refused_by_name(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    with pytest.raises(CheckpointError, match=r"deep\.json' is not readable JSON: nested too deep"):
        ConfusionMatrix.load(deep)
    # parsed (900 levels), yet too deep for the checks that walk it
    field = tmp_path / "field.json"
    field.write_text(json.dumps(_state() | {"void": json.loads("[" * 900 + "]" * 900)}))
    with pytest.raises(CheckpointError, match=r"field\.json: not a segiou confusion state: nested"):
        ConfusionMatrix.load(field)


@pytest.mark.parametrize("command", ["report", "compare"])
def test_the_cli_refuses_a_state_nested_too_deeply(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_state()))
    argv = [str(deep), "-o", str(tmp_path / "r.md")] if command == "report" else [str(good),
                                                                                 str(deep)]  # fmt: skip
    assert main([command, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"segiou {command}: error: ")
    assert "deep.json" in err
    assert "nested too deeply" in err


def test_a_label_spec_or_metadata_file_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    with pytest.raises(LabelSpecError, match="cannot be read: nested too deeply"):
        load_spec(deep)
    with pytest.raises(UsageError, match="is not valid JSON: nested too deeply"):
        read_metadata(deep)


def test_the_client_reads_a_reply_nested_too_deeply_as_not_segiou() -> None:
    data = DEEP.encode()
    with pytest.raises(RefusedError, match="is not segiou's"):
        _reply_json("GET", "/v1/runs", 200, data)
    assert _message(data) == DEEP[:300]
    refused = _refused("PUT", "/v1/runs/r/batches/k", 400, data)
    assert refused.error == ""
    assert "refused (400)" in str(refused)
