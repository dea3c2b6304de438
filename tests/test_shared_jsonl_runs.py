"""Runs started at once with one ``--jsonl`` file, as the reference's own tests start them
(``tests/registry.rs``: two or three runs in one scratch directory, each given its
``events.jsonl``, waited for by their registry records). The reference opens the file
create-or-truncate and the later run writes it too; here the first run holds it alone and the
later one was refused (111) before its child started, so those tests waited for a record that
never came. A later run now goes on without a stream, as the reference's run whose stream
stopped: one warning, its child's exit code, registered and controllable, the first run's stream
whole. Its record names the file it was given, as the reference's does; the readers that follow it
find another run's events there and say so, never taking them for the later run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import processkit

from conftest import SAFETY_NET, UNTIL_RELEASED, read_events, reaped, run_cli, start_cli, wait_for_event
from control_support import check_schema
from streams import wait_until

NO_STREAM = (
    "its registry record publishes no JSONL stream of its own — another run held its `--jsonl` file `{}` when it "
    "started, so it went on without writing its events, and that file holds the other run's"
)
DISABLED = "JSONL event logging disabled: could not open the JSONL events file `events.jsonl`: a process holds a lock"


def _records(count: int, *runs: subprocess.Popen) -> list[dict]:
    """``list --json``'s entries once it lists ``count`` live runs (each run registers itself;
    a record being written is not listed yet), while every one of ``runs`` still goes on."""
    found: list[dict] = []

    def registered() -> bool:
        assert all(run.poll() is None for run in runs), "a run ended before it was registered"
        listed = run_cli("list", "--json")
        assert listed.returncode == 0, listed.stderr
        found[:] = [entry for entry in map(json.loads, listed.stdout.splitlines()) if entry["health"] == "live"]
        return len(found) >= count

    wait_until(registered, what=f"{count} live runs listed")
    return found


def _start(tmp_path, run_id: str, *child: str) -> subprocess.Popen:
    return start_cli("run", "--jsonl", "events.jsonl", "--run-id", run_id, "--", *child, cwd=tmp_path)


def test_two_runs_of_one_id_and_one_stream_are_both_registered_and_refused_by_id(tmp_path):
    """The reference's duplicate run id tests (``inspect``, ``cancel``/``kill``, ``wait``,
    ``cancel --all``): both runs live at once; by id each verb is ambiguous (103) and ends
    neither; ``cancel --all`` reaches both, each ending 108."""
    release = tmp_path / "release"
    first = _start(tmp_path, "dup", sys.executable, "-c", UNTIL_RELEASED, str(release))
    with reaped(first):
        wait_for_event(tmp_path / "events.jsonl", "run_started")
        second = _start(tmp_path, "dup", sys.executable, "-c", UNTIL_RELEASED, str(release))
        with reaped(second):
            records = _records(2, first, second)
            assert [record["jsonl"] for record in records] == [str(tmp_path / "events.jsonl")] * 2
            for verb in (("inspect",), ("cancel",), ("kill",), ("wait", "--timeout", "30s")):
                refused = run_cli(*verb, "--run-id", "dup")
                assert (refused.returncode, refused.stdout) == (103, b""), refused.stderr
                assert b"ambiguous" in refused.stderr and b"dup" in refused.stderr
            assert len(_records(2, first, second)) == 2  # neither ended
            cancelled = run_cli("cancel", "--all")
            assert cancelled.returncode == 0, cancelled.stderr
            assert [entry["status"] for entry in json.loads(cancelled.stdout)] == ["accepted", "accepted"]
            _, first_said = first.communicate(timeout=SAFETY_NET)
            _, second_said = second.communicate(timeout=SAFETY_NET)
    assert (first.returncode, second.returncode) == (108, 108), (first_said, second_said)
    assert DISABLED not in first_said.decode() and second_said.decode().count(DISABLED) == 1, second_said
    events = read_events(tmp_path / "events.jsonl")  # the first run's stream, whole
    assert [event["event"] for event in events].count("run_started") == 1, events
    assert (events[0]["run_id"], events[-1]["event"], events[-1]["code"]) == ("dup", "runner_exit", 108), events


def test_a_later_run_whose_stream_is_held_runs_and_its_readers_refuse_the_other_runs_events(tmp_path):
    """The later run's child runs and its exit is the run's; its record, ``list`` and ``inspect``
    name the file it was given (a snapshot_version 2 runner always publishes a path), and its
    record says that file is not its stream: ``events --run-id`` says it has none of its own (103,
    as the reference's for a run without one), an attached handle's ``events()`` raises so, and its
    ``wait()`` (as ``wait --report-outcome``, begun while it was live or once it ended) reports
    its own code (its tombstone); the first run's stream has nothing of it."""
    release, later_release = tmp_path / "release", tmp_path / "later-release"
    ends_seven = UNTIL_RELEASED + "sys.exit(7)\n"
    stream = str(tmp_path / "events.jsonl")
    first = _start(tmp_path, "first", sys.executable, "-c", UNTIL_RELEASED, str(release))
    with reaped(first):
        wait_for_event(tmp_path / "events.jsonl", "run_started")
        later = _start(tmp_path, "later", sys.executable, "-c", ends_seven, str(later_release))
        with reaped(later):
            (record,) = [record for record in _records(2, first, later) if record["run_id"] == "later"]
            assert record["jsonl"] == stream, record
            check_schema("list", record)
            events = run_cli("events", "--run-id", "later", "--json")
            assert (events.returncode, events.stdout) == (103, b""), events.stderr
            assert (
                events.stderr.decode()
                == f"processkit-cli: cannot read events for run `later`: {NO_STREAM.format(stream)}\n"
            )
            inspected = run_cli("inspect", "--run-id", "later", "--json")
            assert inspected.returncode == 0, inspected.stderr
            snapshot = json.loads(inspected.stdout)
            assert snapshot["jsonl"] == stream, snapshot
            check_schema("inspect", snapshot)
            attached = processkit.attach("later")
            assert attached.poll() is None  # seen live: its ending is read from the stream its record names
            with pytest.raises(OSError) as foreign:
                next(iter(attached.events()))
            assert str(foreign.value) == f"run `later`: {NO_STREAM.format(stream)}", (
                "no [Errno 13]: it is no permission refused"
            )
            later_release.touch()
            assert attached.wait() == 7  # its tombstone's: the file is not its stream
            assert (attached.result().events, attached.result().jsonl) == ([], None)  # none of the first run's
            _, said = later.communicate(timeout=SAFETY_NET)
        assert later.returncode == 7, said
        waited = run_cli("wait", "--run-id", "later", "--report-outcome")
        assert waited.returncode == 0, waited.stderr
        reported = json.loads(waited.stdout)
        assert (reported["status"], reported["code"], reported["child_code"]) == ("reported", 7, 7), reported
        release.touch()
        first.communicate(timeout=SAFETY_NET)
    assert first.returncode == 0
    events_written = read_events(tmp_path / "events.jsonl")
    assert {event["run_id"] for event in events_written if "run_id" in event} == {"first"}, events_written
    assert (events_written[-1]["event"], events_written[-1]["code"]) == ("runner_exit", 0)


def test_a_later_runs_usage_file_never_replaces_the_stream_it_left(tmp_path):
    """``--usage-file F`` on the later run: the file is the first run's stream, kept as a run's own
    stream is (one warning); before, the usage file was written by rename over it, the first run's
    stream lost from the path."""
    release = tmp_path / "release"
    first = _start(tmp_path, "first", sys.executable, "-c", UNTIL_RELEASED, str(release))
    with reaped(first):
        wait_for_event(tmp_path / "events.jsonl", "run_started")
        before = os.stat(tmp_path / "events.jsonl")
        written = (tmp_path / "events.jsonl").read_bytes()
        later = run_cli("run", "--jsonl", "events.jsonl", "--usage-file", "events.jsonl", "--", "true", cwd=tmp_path)
        after = os.stat(tmp_path / "events.jsonl")
        assert (tmp_path / "events.jsonl").read_bytes() == written
        assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
        release.touch()
        first.communicate(timeout=SAFETY_NET)
    assert later.returncode == 0, later.stderr
    assert b"could not write the usage file `events.jsonl`: it is the --jsonl stream: not overwritten" in later.stderr
    assert first.returncode == 0
    events_written = read_events(tmp_path / "events.jsonl")
    assert (events_written[0]["run_id"], events_written[-1]["event"]) == ("first", "runner_exit"), events_written


def test_a_later_run_of_the_same_id_never_takes_the_first_runs_exit_for_its_own(tmp_path):
    """Two runs of one id and one ``--jsonl`` (two builds started with the same flags): the first
    ends, exit 3, while the later one goes on without a stream. The file's head names that id, so
    a handle attached to the later run (as ``wait --report-outcome`` begun while it was live) read
    the first run's ``runner_exit`` as its own: 3, for a run that exited 7. Its record says the
    file is not its stream, so its own outcome (its tombstone) answers: 7."""
    release, later_release = tmp_path / "release", tmp_path / "later-release"
    first = _start(tmp_path, "twin", sys.executable, "-c", UNTIL_RELEASED + "sys.exit(3)\n", str(release))
    with reaped(first):
        wait_for_event(tmp_path / "events.jsonl", "run_started")
        later = _start(tmp_path, "twin", sys.executable, "-c", UNTIL_RELEASED + "sys.exit(7)\n", str(later_release))
        with reaped(later):
            _records(2, first, later)
            release.touch()
            first.communicate(timeout=SAFETY_NET)
            attached = processkit.attach("twin")  # the later run: the first one's record is gone
            assert attached.poll() is None
            later_release.touch()
            assert attached.wait() == 7
            assert (attached.result().events, attached.result().jsonl) == ([], None)  # the file's head names twin
            _, said = later.communicate(timeout=SAFETY_NET)
    assert (first.returncode, later.returncode) == (3, 7), said
    waited = run_cli("wait", "--run-id", "twin", "--report-outcome")  # begun once it ended: its tombstone
    assert (waited.returncode, json.loads(waited.stdout)["code"]) == (0, 7), waited


def test_a_later_run_of_the_same_id_shows_no_events_of_the_first_run_as_its_own(tmp_path):
    """The same two runs: once the first ended, the later one's record is the only one of that id,
    and the file's head names it; ``events --run-id`` and an attached handle's ``events()`` showed
    the first run's events (its ``runner_exit`` 3 too) as the later run's, while it was live.
    Nothing but its record could tell them apart before its tombstone: it now says the file is
    not its stream, and both say it has no stream of its own (103, the reference's exit for a run
    without one)."""
    release, later_release = tmp_path / "release", tmp_path / "later-release"
    stream = str(tmp_path / "events.jsonl")
    first = _start(tmp_path, "twin", sys.executable, "-c", UNTIL_RELEASED + "sys.exit(3)\n", str(release))
    with reaped(first):
        wait_for_event(tmp_path / "events.jsonl", "run_started")
        later = _start(tmp_path, "twin", sys.executable, "-c", UNTIL_RELEASED, str(later_release))
        with reaped(later):
            _records(2, first, later)
            release.touch()
            first.communicate(timeout=SAFETY_NET)
            (record,) = _records(1, later)
            assert record["jsonl"] == stream, record  # the path it was given, as the reference's record
            for verb in (("events", "--run-id", "twin"), ("events", "--run-id", "twin", "--json", "--follow")):
                events = run_cli(*verb)
                assert (events.returncode, events.stdout) == (103, b""), (verb, events.stdout)
                said = f"processkit-cli: cannot read events for run `twin`: {NO_STREAM.format(stream)}\n"
                assert events.stderr.decode() == said, events.stderr
            attached = processkit.attach("twin")
            with pytest.raises(OSError) as foreign:
                next(iter(attached.events()))
            assert str(foreign.value) == f"run `twin`: {NO_STREAM.format(stream)}"
            later_release.touch()
            later.communicate(timeout=SAFETY_NET)
    assert (first.returncode, later.returncode) == (3, 0)
    events_written = read_events(stream)  # the first run's stream, whole, and nothing of the later one
    assert [event["event"] for event in events_written].count("run_started") == 1, events_written
    assert (events_written[-1]["event"], events_written[-1]["code"]) == ("runner_exit", 3), events_written


def test_an_api_runs_cancel_reaches_it_beside_a_held_cli_run_of_its_id_and_file(tmp_path):
    """An API run and a CLI run of one id and one ``--jsonl``, the CLI run's held: the handle's
    run is the one whose own stream is that file, so its ``cancel()`` reaches it; it was refused,
    ambiguous, for both records name the file."""
    release = tmp_path / "release"
    stream = str(tmp_path / "events.jsonl")
    handle = processkit.start([sys.executable, "-c", UNTIL_RELEASED, str(release)], run_id="n1", jsonl=stream)
    try:
        held = _start(tmp_path, "n1", sys.executable, "-c", UNTIL_RELEASED, str(release))
        with reaped(held):
            assert [record["run_id"] for record in _records(2, held)] == ["n1", "n1"]
            handle.cancel()
            assert handle.wait(timeout=SAFETY_NET) == 108, handle.result()
            assert held.poll() is None  # the CLI run goes on
            release.touch()
            held.communicate(timeout=SAFETY_NET)
        assert held.returncode == 0
    finally:
        release.touch()
        handle.close()
