"""A single value where the API takes a list of them, as a Python caller naturally writes it:
``env_file="b.env"`` is the one-item list ``["b.env"]``, in ``run`` and in a job's keys (a
manifest line's and ``processkit.batch``'s); ``run("true")`` is ``run(["true"])``, as
``subprocess.run`` takes it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

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


def test_run_takes_a_program_alone_as_subprocess_does(tmp_path):
    """``subprocess.run("true")`` runs ``true`` on POSIX (a str, bytes or path alone is the
    program): ``processkit.run`` and ``start`` take it the same, where they raised TypeError."""
    script = tmp_path / "say"
    script.write_text("#!/bin/sh\necho said\n")
    script.chmod(0o755)
    for one in (str(script), script, os.fsencode(script)):
        ours, theirs = processkit.run(one, capture_output=True), subprocess.run(one, capture_output=True)
        assert (ours.returncode, ours.stdout) == (theirs.returncode, theirs.stdout) == (0, b"said\n"), one
    assert processkit.run("true").returncode == 0
    assert processkit.start("true").wait() == 0
    # a whole line is a program's name, as subprocess's (no shell splits it): its FileNotFoundError
    with pytest.raises(FileNotFoundError) as ours_raised:
        processkit.run("true --version")
    with pytest.raises(FileNotFoundError) as theirs_raised:
        subprocess.run("true --version")
    assert ours_raised.value.filename == theirs_raised.value.filename == "true --version"
