"""``events --run-id`` and a stream whose first ``run_started`` names another run: a path names a
file, not a run, so a ``--jsonl`` a later run reused, or a link on the way changed, leads a read
by run id to another run's events, which it refuses (111) before showing any, as
``wait --report-outcome`` reads such a stream as ``unknown`` (``events.names_run``). A FIFO's
stream is judged as it comes, with the same refusal."""

from __future__ import annotations

import os
import select
import subprocess
import time

from conftest import SAFETY_NET, listed_when, run_cli, start_cli, wait_for_event
from fifo_ends import opened_by


def refusal(path) -> bytes:
    """The whole line: the run, its stream named once, and why."""
    return (
        f"cannot read events for run `first`: its stream `{path}` holds another run's events: "
        "its first run_started names run `second`, not `first`\n"
    ).encode()


def started(jsonl, *, fifo: bool = False):
    """A run ``first`` of ``sleep 600`` writing ``jsonl``, published."""
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", "first", "--", "sleep", "600")
    if not fifo:
        wait_for_event(jsonl, "run_started")
    listed_when(lambda runs: "first" in runs)
    return runner


def cancel(runner) -> None:
    """The run ended by its cancel (acknowledged before its teardown, so waited for); killed only
    where the cancel did not end it, and what the killed runner left pruned."""
    if run_cli("cancel", "--run-id", "first").returncode == 0:
        try:
            runner.wait(timeout=SAFETY_NET)
            return
        except subprocess.TimeoutExpired:
            pass
    runner.kill()
    runner.wait(timeout=SAFETY_NET)
    run_cli("prune")


def test_a_jsonl_a_later_run_reused_is_refused(tmp_path):
    jsonl = tmp_path / "run.jsonl"
    runner = started(jsonl)
    try:
        # The live run holds its file (one stream, one run): a later run takes the path once that
        # file is unlinked, as a cleaner or a rotated log leaves it, and writes a new file there.
        jsonl.unlink()
        assert run_cli("run", "--jsonl", jsonl, "--run-id", "second", "--", "true").returncode == 0
        for follow in ([], ["--follow"]):
            read = run_cli("events", "--run-id", "first", "--json", *follow)
            assert read.returncode == 111 and refusal(jsonl) in read.stderr, (follow, read.returncode, read.stderr)
            assert read.stdout == b"", read.stdout
        named = run_cli("events", "--file", jsonl, "--json")  # a file named is read as it is
        assert named.returncode == 0 and b'"second"' in named.stdout, named.stderr
    finally:
        cancel(runner)


def test_a_fifo_that_another_run_writes_is_refused(tmp_path):
    first_dir, second_dir = tmp_path / "a", tmp_path / "b"
    first_dir.mkdir()
    second_dir.mkdir()
    os.mkfifo(first_dir / "s.jsonl")
    os.mkfifo(second_dir / "s.jsonl")
    drain = os.open(first_dir / "s.jsonl", os.O_RDONLY | os.O_NONBLOCK)  # the first run's reader
    runner = started(first_dir / "s.jsonl", fifo=True)
    try:
        os.rename(first_dir, tmp_path / "a.real")
        os.symlink(second_dir, first_dir)  # the record's path now leads to the other FIFO
        reader = start_cli("events", "--run-id", "first", "--json", "--follow")
        deadline = time.monotonic() + SAFETY_NET
        while not opened_by(reader.pid, str(second_dir / "s.jsonl")):  # waits for a writer now
            assert reader.poll() is None and time.monotonic() < deadline, reader.communicate()
            time.sleep(0.01)
        second = start_cli("run", "--jsonl", second_dir / "s.jsonl", "--run-id", "second", "--", "true")
        out, err = reader.communicate(timeout=SAFETY_NET)
        assert reader.returncode == 111 and refusal(first_dir / "s.jsonl") in err, (reader.returncode, err)
        assert out == b"", out
        second.communicate(timeout=SAFETY_NET)  # its reader gone: however it ended
    finally:
        cancel(runner)
        while select.select([drain], [], [], 0)[0] and os.read(drain, 65536):
            pass
        os.close(drain)
