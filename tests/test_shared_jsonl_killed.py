"""A run whose ``--jsonl`` another run held (it goes on without a stream, its record saying so)
and whose runner is then killed: its record stays, stale, and nothing of its own says how it
ended. ``wait --report-outcome`` took the newest tombstone of any run of that id (an earlier clean
run's code as this run's), and ``events --run-id`` left the held record's file out of the
reference's rule that the records of one id must name one stream, showing another record's
stream as this id's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from conftest import SAFETY_NET, UNTIL_RELEASED, reaped, run_cli, start_cli, wait_for_event
from test_shared_jsonl_runs import _records


def _until(tmp_path, jsonl: str, run_id: str, release) -> subprocess.Popen:
    """A CLI run of ``run_id`` on ``jsonl`` whose child waits for ``release``."""
    child = (sys.executable, "-c", UNTIL_RELEASED, str(release))
    return start_cli("run", "--jsonl", jsonl, "--run-id", run_id, "--", *child, cwd=tmp_path)


def _held_and_killed(tmp_path, run_id: str, holder_id: str, release) -> None:
    """``run_id`` run on ``events.jsonl`` while the run ``holder_id`` writes it, its runner killed
    (its child goes on until ``release``); the holder ends cleanly."""
    holder_release = tmp_path / "holder-release"
    holder = _until(tmp_path, "events.jsonl", holder_id, holder_release)
    with reaped(holder):
        wait_for_event(tmp_path / "events.jsonl", "run_started")
        held = _until(tmp_path, "events.jsonl", run_id, release)
        with reaped(held):
            _records(2, holder, held)
            held.send_signal(signal.SIGKILL)  # no tombstone, no record removed
            held.communicate(timeout=SAFETY_NET)
        holder_release.touch()
        holder.communicate(timeout=SAFETY_NET)
    assert holder.returncode == 0


@pytest.mark.parametrize("holder_id", ["holder", "other"])
def test_wait_reports_unknown_for_a_held_run_whose_runner_was_killed_not_an_earlier_runs_code(tmp_path, holder_id):
    """An earlier clean run of the id (exit 5) and, with ``other``, the holder itself of the same
    id (two builds started with the same flags): their tombstones are theirs, and the killed run
    has none of its own, so its outcome is ``unknown``."""
    earlier = run_cli("run", "--jsonl", "earlier.jsonl", "--run-id", "other", "--", "sh", "-c", "exit 5", cwd=tmp_path)
    assert earlier.returncode == 5, earlier.stderr  # a clean end: its tombstone kept, its record gone
    release = tmp_path / "release"
    try:
        _held_and_killed(tmp_path, "other", holder_id, release)
        waited = run_cli("wait", "--run-id", "other", "--report-outcome", cwd=tmp_path)
    finally:
        release.touch()
    assert waited.returncode == 0, waited.stderr
    reported = json.loads(waited.stdout)
    assert reported["status"] == "unknown", reported


def test_events_by_id_is_ambiguous_between_a_stale_record_and_a_held_one_naming_another_file(tmp_path):
    """A stale record of ``x`` naming ``old.jsonl`` and a live run ``x`` whose ``events.jsonl``
    another run holds: the records name two streams, so the id is ambiguous (103), as the
    reference's; before, the dead run's ``old.jsonl`` was shown as this id's events."""
    release, later_release, holder_release = tmp_path / "release", tmp_path / "later", tmp_path / "holder"
    old = _until(tmp_path, "old.jsonl", "x", release)
    try:
        with reaped(old):
            wait_for_event(tmp_path / "old.jsonl", "run_started")
            old.send_signal(signal.SIGKILL)
            old.communicate(timeout=SAFETY_NET)
        holder = _until(tmp_path, "events.jsonl", "holder", holder_release)
        with reaped(holder):
            wait_for_event(tmp_path / "events.jsonl", "run_started")
            later = _until(tmp_path, "events.jsonl", "x", later_release)
            with reaped(later):
                _records(2, holder, later)
                events = run_cli("events", "--run-id", "x", cwd=tmp_path)
                later_release.touch()
                later.communicate(timeout=SAFETY_NET)
            holder_release.touch()
            holder.communicate(timeout=SAFETY_NET)
    finally:
        release.touch()
    assert (events.returncode, events.stdout) == (103, b""), events.stderr
    assert events.stderr.decode() == (
        "processkit-cli: cannot read events for run `x`: ambiguous run id — 2 registered records name 2 different "
        "event streams; read the one you mean directly with `--file <events.jsonl>`\n"
    )
