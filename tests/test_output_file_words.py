"""An output file a run or a batch cannot write is said in the reference's frame for a file it
could not open (``could not open the JSONL events file `P`: Is a directory (os error 21)``):
what the file is, its path once, then the system's error with its number."""

from __future__ import annotations

import json

from conftest import run_cli

SETUP = 111
IS_A_DIRECTORY = "Is a directory (os error 21)"


def test_a_junit_file_at_a_directory_is_said_in_the_reference_frame_before_any_job(tmp_path):
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["touch", str(tmp_path / "ran")]}) + "\n")
    done = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", tmp_path)
    assert done.returncode == SETUP, done.stderr
    assert done.stderr == f"processkit-cli: could not open the JUnit file `{tmp_path}`: {IS_A_DIRECTORY}\n".encode()
    assert not (tmp_path / "ran").exists()


def test_a_junit_file_a_job_made_a_directory_is_said_in_the_reference_frame(tmp_path):
    junit = tmp_path / "junit.xml"
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["mkdir", str(junit)]}) + "\n")
    done = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", junit)
    assert done.returncode == SETUP, done.stderr
    said = f"processkit-cli: could not write the JUnit file `{junit}`: {IS_A_DIRECTORY}"
    assert done.stderr.decode().splitlines()[-1] == said


def test_a_usage_file_at_a_directory_is_warned_of_in_the_reference_frame(tmp_path):
    done = run_cli("run", "--jsonl", tmp_path / "run.jsonl", "--usage-file", tmp_path, "--", "true")
    assert done.returncode == 0, done.stderr
    said = f"processkit-cli: warning: could not write the usage file `{tmp_path}`: {IS_A_DIRECTORY}\n"
    assert done.stderr == said.encode()


def test_a_path_that_names_a_directory_by_its_shape_is_said_as_one_that_is_a_directory(tmp_path):
    """``dir/``, ``.``, ``..`` and ``/`` said the old way: the path twice, no number."""
    (tmp_path / "rod").mkdir()
    for shape in ("rod/", ".", "..", "/"):
        done = run_cli("run", "--jsonl", "run.jsonl", "--usage-file", shape, "--", "true", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said = f"processkit-cli: warning: could not write the usage file `{shape}`: {IS_A_DIRECTORY}\n"
        assert done.stderr == said.encode()
    manifest = tmp_path / "jobs.jsonl"
    manifest.write_text(json.dumps({"id": "a", "args": ["true"]}) + "\n")
    done = run_cli("batch", manifest, "--out", tmp_path / "out", "--junit", ".", cwd=tmp_path)
    assert done.returncode == SETUP, done.stderr
    assert done.stderr == f"processkit-cli: could not open the JUnit file `.`: {IS_A_DIRECTORY}\n".encode()
