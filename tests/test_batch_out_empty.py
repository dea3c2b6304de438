"""``--out ''`` (a CI script's ``--out "$OUT"`` with the variable unset): the jobs' directories
and the summary were joined onto the empty text as ``/ID`` and ``/summary.jsonl``, so a batch run
as root wrote into the root directory. An empty ``--out`` names no directory: a usage error
(100), before the manifest is read or anything is made (docs/batch.md, "Output")."""

from __future__ import annotations

from conftest import run_cli

USAGE = 100


def test_an_empty_out_is_refused_before_anything(tmp_path):
    done = run_cli("batch", "--out", "", tmp_path / "never-read.jsonl", cwd=tmp_path)
    assert done.returncode == USAGE, done.stderr
    assert done.stderr.decode().splitlines() == [
        "processkit-cli: invalid value '' for '--out <DIR>': expected a directory (an empty path names none; "
        "the default is batch-out)"
    ]
    assert list(tmp_path.iterdir()) == []
