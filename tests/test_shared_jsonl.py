"""Two runs given one ``--jsonl`` at once: the second emptied the first's stream and both wrote
into it (lines of two runs, the first's ``run_started`` gone). Now a run holds its stream's file
alone (an exclusive ``flock``, taken without waiting, for its life): the second, foreground or
detached, is refused before it writes or empties anything (111, one line, as an ``--jsonl``
that cannot be opened), and the first's stream stays whole. Once the first has ended, the path
is anyone's again; a device (``/dev/null``) is shared as before."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import SAFETY_NET, run_cli, start_cli, wait_for_event

UNTIL_RELEASED = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)\n"


def _refused(proc: subprocess.CompletedProcess) -> None:
    said = proc.stderr.decode()
    assert (proc.returncode, said.count("\n")) == (111, 1), said
    assert "could not open the JSONL events file `shared.jsonl`: another run is writing it" in said, said


def test_a_second_run_on_a_stream_in_use_is_refused_and_the_first_stays_whole(tmp_path):
    stream, release = tmp_path / "shared.jsonl", tmp_path / "release"
    first = start_cli(
        "run", "--jsonl", "shared.jsonl", "--run-id", "first", "--", sys.executable, "-c", UNTIL_RELEASED, str(release),
        cwd=tmp_path,
    )  # fmt: skip
    try:
        wait_for_event(stream, "run_started")
        _refused(run_cli("run", "--jsonl", "shared.jsonl", "--run-id", "second", "--", "true", cwd=tmp_path))
        _refused(run_cli("run", "--detach", "--jsonl", "shared.jsonl", "--", "true", cwd=tmp_path))
        beside = run_cli("run", "--jsonl", "/dev/null", "--", "true", cwd=tmp_path)
        assert beside.returncode == 0, beside.stderr
    finally:
        release.touch()
        _, err = first.communicate(timeout=SAFETY_NET)
    assert first.returncode == 0, err
    events = [json.loads(line) for line in stream.read_text().splitlines()]
    assert {event.get("run_id", "first") for event in events} == {"first"}, events
    assert (events[0]["event"], events[-1]["event"]) == ("run_started", "runner_exit"), events
    again = run_cli("run", "--jsonl", "shared.jsonl", "--run-id", "again", "--", "true", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(stream.read_text().splitlines()[0])["run_id"] == "again"
