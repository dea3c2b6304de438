"""A batch's env file is read in the one thread every job shares, so one that can wait is refused
before anything starts; /dev/null reads as empty at once and is taken, as ``run`` takes it. The
refusal names the file as the user wrote it: ``--env-file`` in template mode, ``env_file`` in a
manifest. Process-level: the real CLI, real children."""

from __future__ import annotations

import json

from conftest import run_cli

USAGE = 100
WHY = "not a regular file or /dev/null: the batch reads it as each job starts"


def test_dev_null_is_an_empty_env_file_in_a_batch_as_in_run(tmp_path):
    said = run_cli(
        "batch", "--out", "bo", "--show-output", "--env-file", "/dev/null", "--",
        "sh", "-c", 'echo "job {} HOME=$HOME"', ":::", "x", cwd=tmp_path,
    )  # fmt: skip
    assert said.returncode == 0, said.stderr
    assert b"job x HOME=/" in said.stdout, said.stdout
    alone = run_cli("run", "--jsonl", "run.jsonl", "--env-file", "/dev/null", "--", "true", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr


def test_a_device_that_can_wait_is_refused_naming_the_flag_or_the_key(tmp_path):
    flag = run_cli("batch", "--out", "bo", "--env-file", "/dev/zero", "--", "touch", "ran-{}", ":::", "x", cwd=tmp_path)
    said = flag.stderr.decode()
    assert flag.returncode == USAGE, said
    assert (
        said
        == f"processkit-cli: job 1: --env-file /dev/zero is a character device, {WHY}, so one that can wait would hold up every job\n"
    )
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(json.dumps({"args": ["touch", "ran"], "env_file": "/dev/zero"}) + "\n")
    key = run_cli("batch", str(manifest), "--out", "bo", cwd=tmp_path)
    assert (
        key.returncode == USAGE
        and f"manifest line 1: env_file /dev/zero is a character device, {WHY}" in key.stderr.decode()
    )
    assert not (tmp_path / "bo").exists() and not list(tmp_path.glob("ran*"))
