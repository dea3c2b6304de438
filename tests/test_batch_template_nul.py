"""A NUL byte in a template's argument line, through the real CLI beside the real ``parallel``:
parallel passes it on as the text ``\\0`` with a warning; the batch refuses it (100), naming the
job by its number (a template has no manifest line: the message said ``manifest line 2``),
whichever way the jobs are read (as they come, the jobs before it having run; whole, before
any runs; ``--dry-run``)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import run_cli

USAGE = 100
SAID = b"processkit-cli: job 2: args item 1 holds a NUL character (at offset 1)"


@pytest.mark.parametrize("flags", [[], ["--history", "/dev/null"], ["--dry-run"]])
def test_a_nul_in_an_argument_line_is_refused_naming_the_job(tmp_path, flags):
    (tmp_path / "args").write_bytes(b"ok\na\0b\n")
    out = tmp_path / "out"
    done = run_cli(
        "batch", *flags, *([] if "--dry-run" in flags else ["--out", out]), "--", "echo", "::::", tmp_path / "args"
    )
    assert done.returncode == USAGE, done.stderr
    assert SAID in done.stderr, done.stderr


@pytest.mark.skipif(shutil.which("parallel") is None, reason="GNU parallel is not installed")
def test_gnu_parallel_passes_a_nul_on_as_text(tmp_path):
    """The difference docs/differences.md states: parallel's job gets ``a\\0b``, four characters."""
    (tmp_path / "args").write_bytes(b"a\0b\n")
    peer = subprocess.run(["parallel", "--will-cite", "echo", "::::", tmp_path / "args"], capture_output=True)
    assert peer.returncode == 0 and peer.stdout == b"a\\0b\n", peer
    assert b"NUL" in peer.stderr
