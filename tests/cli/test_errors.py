"""Every subcommand, given bad input, exits 2 with one clear line on stderr and no traceback.

Run as a user runs it: a real ``python -m segiou`` process, so that nothing between the
command line and the library (argument parsing, lazy imports, the error mapping of
:func:`segiou.cli.main`) is skipped.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def segiou(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "segiou", *args],
        capture_output=True, text=True, timeout=300, check=False, cwd=cwd,
    )  # fmt: skip


#: (subcommand, arguments, what the message must say). Paths are relative to a fresh folder.
BAD = [
    ("demo", ["d", "--size", "12xfoo"], "--size"),
    ("demo", ["d", "--images", "0"], "at least one image"),
    ("eval", ["--gt", "missing.zarr", "--pred", "missing2.zarr"], "does not exist"),
    ("eval", ["--gt", "g", "--pred", "p", "--preset", "bogus"], "is not a preset"),
    ("eval", ["--gt", "g", "--pred", "p", "--labels", "nope"], "neither a built-in spec"),
    ("eval", ["--gt", "g", "--pred", "p", "--json", "no/such/folder/r.json"], "does not exist"),
    ("ingest", ["--gt", "missing", "--out", "o.zarr"], "does not exist"),
    ("ingest", ["--gt", "g", "--out", "o.zarr", "--labels", "nope"], "neither a built-in spec"),
    ("box", ["1,2,3", "0,0,1,1"], "has 3 number(s)"),
    ("box", ["0,0,1,1", "0,0,1,1", "--threshold", "2"], "--threshold 2"),
    ("sets", ["a,b", "b", "--empty", "3"], "--empty 3"),
    ("sets", ["a,b", "b", "--sep", ""], "--sep is empty"),
]


@pytest.mark.parametrize(("command", "args", "says"), BAD, ids=lambda v: str(v)[:40])
def test_bad_input_exits_2_with_one_line_and_no_traceback(
    tmp_path: Path, command: str, args: list[str], says: str
) -> None:
    (tmp_path / "g").mkdir()
    (tmp_path / "p").mkdir()
    done = segiou(command, *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"segiou {command}: error: "), lines[0]
    assert says in lines[0], lines[0]
    assert done.stdout == ""


def test_argparse_errors_name_the_subcommand_and_exit_2(tmp_path: Path) -> None:
    done = segiou("eval", "--gt", "g", cwd=tmp_path)  # --pred missing: argparse refuses
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "the following arguments are required: --pred" in done.stderr
