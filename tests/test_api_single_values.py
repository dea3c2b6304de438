"""A single value where the API takes a list of them, as a Python caller naturally writes it:
``env_file="b.env"`` is the one-item list ``["b.env"]``, in ``run`` and in a job's keys (a
manifest line's and ``processkit.batch``'s)."""

from __future__ import annotations

import json
import os

import processkit
from conftest import run_cli

SAY_B = ["sh", "-c", 'printf "%s" "$B"']


def test_env_file_given_one_path_runs_exactly_as_a_one_item_list(tmp_path):
    path = tmp_path / "b.env"
    path.write_text("B=from-file\n")
    listed = processkit.run(SAY_B, env_file=[str(path)], capture_output=True)
    assert (listed.returncode, listed.stdout) == (0, b"from-file")
    for one in (str(path), path, os.fsencode(path)):
        got = processkit.run(SAY_B, env_file=one, capture_output=True)
        assert (got.returncode, got.stdout, got.exit_code) == (0, b"from-file", 0), one
    missing = str(tmp_path / "missing.env")  # a setup failure, named as the list's is
    alone = processkit.run(SAY_B, env_file=missing, capture_output=True)
    in_list = processkit.run(SAY_B, env_file=[missing], capture_output=True)
    assert alone.returncode == in_list.returncode == 111
    said = [json.loads(result.diagnostics)["message"] for result in (alone, in_list)]
    assert alone.source == in_list.source == "setup" and said[0] == said[1] and "missing.env" in said[0]


def test_a_jobs_env_file_given_one_path_is_read_as_a_one_item_list(tmp_path):
    (tmp_path / "b.env").write_text("B=from-file\n")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": SAY_B, "id": "a", "env_file": "b.env"}) + "\n")
    proc = run_cli("batch", manifest, "--out", tmp_path / "cli", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "cli" / "a" / "capture" / "stdout.log").read_bytes() == b"from-file"
    lines = processkit.batch(
        [{"args": SAY_B, "id": "a", "env_file": str(tmp_path / "b.env")}], out=str(tmp_path / "api")
    )
    assert [line["exit_code"] for line in lines] == [0]
    assert (tmp_path / "api" / "a" / "capture" / "stdout.log").read_bytes() == b"from-file"
