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


def test_met_once_a_job_ran_the_refusal_is_the_json_envelope(tmp_path):
    """Under ``--error-format json`` a refusal met once the jobs before it ran is no parse error:
    the batch had begun (its ``--out``, job 1's line there), so stderr holds the envelope alone,
    as for a usage code a detached ``run`` relays; it was human text, the one prose line a
    machine reader of that stderr met. Read whole before any job (``--history``), it stays the
    parse error it is, human text as ``run``'s are."""
    import json

    (tmp_path / "args").write_bytes(b"ok\na\0b\n")
    ran = run_cli("--error-format", "json", "batch", "--out", tmp_path / "o", "--", "echo", "::::", tmp_path / "args")
    assert ran.returncode == USAGE, ran.stderr
    assert ran.stderr.count(b"\n") == 1, ran.stderr
    envelope = json.loads(ran.stderr)
    assert (envelope["code"], envelope["kind"], envelope["operation"]) == (USAGE, "usage", "batch"), envelope
    assert envelope["message"].startswith("job 2: args item 1 holds a NUL character"), envelope
    assert [json.loads(line)["id"] for line in (tmp_path / "o" / "summary.jsonl").read_text().splitlines()] == ["ok"]
    whole = run_cli(
        "--error-format",
        "json",
        "batch",
        "--history",
        "/dev/null",
        "--out",
        tmp_path / "w",
        "--",
        "echo",
        "::::",
        tmp_path / "args",
    )
    assert whole.returncode == USAGE and whole.stderr.startswith(SAID), whole.stderr


def test_met_after_a_resumed_skip_it_is_the_envelope_too(tmp_path):
    """Deliberate: ``--resume`` skipping every job before the bad line (nothing run by this call)
    leaves the refusal the batch's failure, not a parse error: the first job was taken (skipped
    as passed before, the summary opened for this batch's lines), so the batch had begun."""
    import json

    (tmp_path / "args").write_bytes(b"ok\n")
    first = run_cli("batch", "--out", tmp_path / "o", "--", "echo", "::::", tmp_path / "args")
    assert first.returncode == 0, first.stderr
    (tmp_path / "args").write_bytes(b"ok\na\0b\n")
    again = run_cli(
        "--error-format", "json", "batch", "--resume", "--out", tmp_path / "o", "--", "echo", "::::", tmp_path / "args"
    )
    assert again.returncode == USAGE, again.stderr
    envelope = json.loads(again.stderr)
    assert envelope["kind"] == "usage" and envelope["message"].startswith("job 2: args item 1 holds a NUL"), envelope


def test_in_the_first_line_read_as_they_come_it_stays_human_text(tmp_path):
    """The first job is made before the batch begins: its refusal is a parse error, however the
    jobs are read."""
    (tmp_path / "args").write_bytes(b"a\0b\n")
    done = run_cli("--error-format", "json", "batch", "--out", tmp_path / "o", "--", "echo", "::::", tmp_path / "args")
    assert done.returncode == USAGE, done.stderr
    assert done.stderr.startswith(b"processkit-cli: job 1: args item 1 holds a NUL character"), done.stderr
