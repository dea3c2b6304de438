"""``--out ''`` (a CI script's ``--out "$OUT"`` with the variable unset): the jobs' directories
and the summary were joined onto the empty text as ``/ID`` and ``/summary.jsonl``, so a batch run
as root wrote into the root directory. An empty ``--out`` names no directory: a usage error
(100), before the manifest is read or anything is made (docs/batch.md, "Output")."""

from __future__ import annotations

import subprocess
import sys

from conftest import SAFETY_NET, run_cli

USAGE = 100


def test_an_empty_out_is_refused_before_anything(tmp_path):
    done = run_cli("batch", "--out", "", tmp_path / "never-read.jsonl", cwd=tmp_path)
    assert done.returncode == USAGE, done.stderr
    assert done.stderr.decode().splitlines() == [
        "processkit-cli: invalid value '' for '--out <DIR>': expected a directory (an empty path names none)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_the_apis_empty_out_is_refused_as_the_clis(tmp_path):
    # processkit.batch(out='') ran its jobs and wrote a/, summary.jsonl and index.html into the cwd
    code = (
        "import processkit\n"
        "try:\n    processkit.batch([{'id': 'a', 'args': ['touch', 'ran']}], out='')\n"
        "except ValueError as refused:\n    print(refused)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, timeout=SAFETY_NET)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"invalid value '' for 'out=': expected a directory (an empty path names none)\n"
    assert list(tmp_path.iterdir()) == []
