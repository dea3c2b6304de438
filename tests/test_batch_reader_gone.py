"""``batch`` whose stdout or stderr reader went away (``| head -c1``): the showing there ends,
never the batch. Its jobs run to their own ends, every one gets its summary line, and the batch
exits with their verdict (117 here), as ``run``'s broken echo leaves its child running; it was
an internal error (104, a BrokenPipeError) that cancelled the jobs running and started no more.
Process-level: the real CLI, real children, the reader gone before the first write."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import cli_command
from test_batch import summary, write_manifest

BATCH_FAILED = 117
JOBS = [
    {"id": "first", "args": ["sh", "-c", "echo out; echo err >&2"]},
    {"id": "bad", "args": ["sh", "-c", "echo broke >&2; exit 3"]},
    {"id": "last", "args": ["sh", "-c", "printf 'no newline'"]},
]


@pytest.mark.parametrize("gone", ["stdout", "stderr", "both"])
def test_a_reader_gone_ends_the_showing_not_the_batch(tmp_path, gone):
    out = tmp_path / "out"
    manifest = write_manifest(tmp_path / "m.jsonl", JOBS)
    read_end, write_end = os.pipe()
    os.close(read_end)
    kept = tmp_path / "kept"
    try:
        with open(kept, "wb") as file:
            streams = {"stdout": file, "stderr": file}
            for name in ("stdout", "stderr") if gone == "both" else (gone,):
                streams[name] = write_end
            proc = subprocess.run(
                cli_command() + ["batch", "--jobs", "1", "--show-output", "--out", str(out), manifest],
                stdin=subprocess.DEVNULL,
                timeout=60,
                **streams,
            )
    finally:
        os.close(write_end)
    said = kept.read_bytes()
    assert proc.returncode == BATCH_FAILED, said
    assert b"internal error" not in said
    lines = summary(out)
    assert {job: (line["exit_code"], line["source"]) for job, line in lines.items()} == {
        "first": (0, "child_exit"),
        "bad": (3, "child_exit"),
        "last": (0, "child_exit"),
    }
    if gone == "stdout":  # the other stream still says everything
        assert b"batch: 2 of 3 jobs exited 0, 1 failed" in said
        assert b"broke" in said
    if gone == "stderr":
        assert b"==> last (exit 0) <==\nno newline\n" in said


def test_an_empty_manifest_with_its_stderr_reader_gone_is_still_no_failure(tmp_path):
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("")
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            cli_command() + ["batch", "--out", str(tmp_path / "out"), str(manifest)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=write_end,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stdout) == (0, b"")
