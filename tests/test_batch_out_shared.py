"""Two batches into one ``--out`` at once: the second replaced the first one's job files (its
``events.jsonl`` and captures then named the second batch's run under the first one's summary
line) and interleaved both batches' lines in one summary. The summary is locked for the batch's
life, so the second is refused (111, one line) and the first one's files stay its own
(docs/batch.md, "Outputs"). Process-level: two real CLIs; synchronised on a file the first
batch's job makes, and it ends when the test opens the FIFO it waits on."""

from __future__ import annotations

import contextlib
import json
import os
import signal

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_file
from test_batch import write_manifest

SETUP = 111


@contextlib.contextmanager
def _held(tmp_path, out):
    """A first batch writing into ``out``, its job waiting on a FIFO until the block is left;
    yields that batch, ended (its stderr in ``.held_err``) once the block is over."""
    started, gate = tmp_path / "started", tmp_path / "gate"
    os.mkfifo(gate)
    held = [{"id": "a", "args": ["sh", "-c", f'touch "{started}"; read line < "{gate}"; echo first']}]
    first = start_cli("batch", write_manifest(tmp_path / "first.jsonl", held), "--out", out)
    try:
        wait_for_file(started)
        yield first
    finally:
        try:  # the first batch's job reads its line and ends; one that never came to read it is ended
            release = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader
            os.kill(first.pid, signal.SIGKILL)
        else:
            os.write(release, b"go\n")
            os.close(release)
        _, first.held_err = first.communicate(timeout=SAFETY_NET)


def _refused_as_busy(proc, *before: str) -> None:
    """Exit 111 and one line saying why, after the lines ``before`` it."""
    assert proc.returncode == SETUP, proc.stderr
    said = proc.stderr.decode().splitlines()
    assert said[:-1] == list(before) and "another batch is writing into it now" in said[-1], said
    assert b"Traceback" not in proc.stderr


def test_a_second_batch_into_a_busy_out_is_refused_and_the_first_keeps_its_files(tmp_path):
    out = tmp_path / "out"
    with _held(tmp_path, out) as first:
        second = run_cli("batch", "--out", out, "--", "echo", "second", ":::", "a")
    _refused_as_busy(second)
    assert first.returncode == 0, first.held_err
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == ["a"]
    assert (out / "a" / "capture" / "stdout.log").read_bytes() == b"first\n"
    run_ids = {e.get("run_id") for e in map(json.loads, (out / "a" / "events.jsonl").read_text().splitlines())}
    assert lines[0]["run_id"] in run_ids


def test_an_empty_batch_into_a_busy_out_is_refused_as_one_with_jobs_is(tmp_path):
    """An empty manifest with ``--junit`` into an ``--out`` another batch is writing into
    exited 0 (smoke65's empty batch writes its reports empty): now 111, the same line, and
    the first batch's summary stays its own."""
    out, empty, junit = tmp_path / "out", tmp_path / "empty.jsonl", tmp_path / "junit.xml"
    empty.write_text("")
    with _held(tmp_path, out) as first:
        second = run_cli("batch", empty, "--out", out, "--junit", junit)
    _refused_as_busy(second)  # the one line: no "no jobs" line before it
    assert first.returncode == 0, first.held_err
    assert [json.loads(line)["id"] for line in (out / "summary.jsonl").read_text().splitlines()] == ["a"]


def test_a_resume_into_a_busy_out_is_refused(tmp_path):
    """``--resume`` appends to the summary another batch is writing (it is not emptied): it is
    refused all the same, and the first batch's lines stay whole and its own."""
    out = tmp_path / "out"
    with _held(tmp_path, out) as first:
        resumed = run_cli("batch", "--out", out, "--resume", "--", "echo", "second", ":::", "a", "b")
    _refused_as_busy(resumed)
    assert first.returncode == 0, first.held_err
    assert [json.loads(line)["id"] for line in (out / "summary.jsonl").read_text().splitlines()] == ["a"]
    assert (out / "a" / "capture" / "stdout.log").read_bytes() == b"first\n"
    assert not (out / "b").exists()


def test_a_batch_into_an_out_a_finished_batch_left_runs(tmp_path):
    out = tmp_path / "out"
    assert run_cli("batch", "--out", out, "--", "true", ":::", "a").returncode == 0
    again = run_cli("batch", "--out", out, "--", "true", ":::", "b")
    assert again.returncode == 0, again.stderr
    resumed = run_cli("batch", "--out", out, "--resume", "--", "true", ":::", "b", "c")
    assert resumed.returncode == 0, resumed.stderr
    ids = [json.loads(line)["id"] for line in (out / "summary.jsonl").read_text().splitlines()]
    assert ids == ["b", "c"]


def test_a_fifo_in_place_of_the_summary_is_refused_not_waited_on(tmp_path):
    """A FIFO at ``OUT/summary.jsonl`` (this user's own, left by a tool of theirs) held the batch
    in its open for ever, waiting for a reader; now one line, 111, before any job."""
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "summary.jsonl")
    proc = run_cli("batch", "--out", out, "--", "true", ":::", "a")
    assert proc.returncode == SETUP, proc.stderr
    assert proc.stderr.decode() == (
        f"processkit-cli: cannot write the summary {out}/summary.jsonl: it is a FIFO, not a regular file\n"
    )
    assert not (out / "a").exists()
