"""Two batches into one ``--out`` at once: the second replaced the first one's job files (its
``events.jsonl`` and captures then named the second batch's run under the first one's summary
line) and interleaved both batches' lines in one summary. The summary is locked for the batch's
life, so the second is refused (111, one line) and the first one's files stay its own
(docs/batch.md, "Outputs"). Process-level: two real CLIs; synchronised on a file the first
batch's job makes, and it ends when the test opens the FIFO it waits on."""

from __future__ import annotations

import json
import os

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_file
from test_batch import write_manifest

SETUP = 111


def test_a_second_batch_into_a_busy_out_is_refused_and_the_first_keeps_its_files(tmp_path):
    out, started, gate = tmp_path / "out", tmp_path / "started", tmp_path / "gate"
    os.mkfifo(gate)
    held = [{"id": "a", "args": ["sh", "-c", f'touch "{started}"; read line < "{gate}"; echo first']}]
    first = start_cli("batch", write_manifest(tmp_path / "first.jsonl", held), "--out", out)
    try:
        wait_for_file(started)
        second = run_cli("batch", "--out", out, "--", "echo", "second", ":::", "a")
    finally:
        try:  # the first batch's job reads its line and ends; one that never came to read it is ended
            release = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: no reader
            first.kill()
        else:
            os.write(release, b"go\n")
            os.close(release)
        _, first_err = first.communicate(timeout=SAFETY_NET)
    assert second.returncode == SETUP, second.stderr
    said = second.stderr.decode().splitlines()
    assert len(said) == 1 and "another batch is writing into it now" in said[0], said
    assert b"Traceback" not in second.stderr
    assert first.returncode == 0, first_err
    lines = [json.loads(line) for line in (out / "summary.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == ["a"]
    assert (out / "a" / "capture" / "stdout.log").read_bytes() == b"first\n"
    run_ids = {e.get("run_id") for e in map(json.loads, (out / "a" / "events.jsonl").read_text().splitlines())}
    assert lines[0]["run_id"] in run_ids


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
