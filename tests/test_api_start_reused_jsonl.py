"""``processkit.start`` with a ``jsonl=`` an earlier run wrote (a harness that names one stream
per job slot): ``start`` follows the path as soon as its request is sent, and its runner empties
the file only when it sets up, so the follower could read the earlier run's stream first and
raised ``ForeignStream`` ("holds another run's events") for a run that started fine. The earlier
stream is now read again until the runner has emptied it. The service is held stopped
(``SIGSTOP``) until the follower has the old file open, so the order is the losing one every time."""

from __future__ import annotations

import os
import signal
import sys
import threading

import pytest

import processkit
from conftest import SAFETY_NET, run_cli
from processkit.events.follow import Follower
from streams import wait_until


def opened_here(path) -> bool:
    """Whether this process holds a descriptor on ``path`` (the follower opened it)."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                return True
        except OSError:
            continue
    return False


def started_stopped(service: int, jsonl, call) -> dict:
    """``call(outcome)`` run in a thread while ``service`` is held stopped until this process
    holds ``jsonl`` open (the follower's, before the runner empties it), or the thread ended;
    ``outcome`` as the thread left it (an ``error`` raised in it kept there)."""
    outcome: dict = {}

    def started() -> None:
        try:
            call(outcome)
        except BaseException as exc:  # the failure is the test's to report
            outcome["error"] = exc

    os.kill(service, signal.SIGSTOP)
    caller = threading.Thread(target=started)
    try:
        caller.start()
        assert wait_until(lambda: opened_here(jsonl) or not caller.is_alive(), SAFETY_NET)
    finally:
        os.kill(service, signal.SIGCONT)
    caller.join(SAFETY_NET)
    assert "error" not in outcome, outcome.get("error")
    return outcome


def test_start_on_a_jsonl_an_earlier_run_wrote_follows_its_own_run(tmp_path):
    jsonl = tmp_path / "slot.jsonl"
    earlier = processkit.start(["true"], jsonl=str(jsonl))
    assert earlier.wait(SAFETY_NET) == 0

    def started(outcome: dict) -> None:
        handle = processkit.start(["true"], jsonl=str(jsonl))
        outcome["code"] = handle.wait(SAFETY_NET)
        outcome["run_id"] = handle.run_id

    outcome = started_stopped(earlier.runner_pid, jsonl, started)
    assert outcome["code"] == 0
    first = jsonl.read_text().splitlines()[0]
    assert outcome["run_id"] in first


def test_a_run_that_ends_between_the_read_and_the_judgement_is_followed(tmp_path):
    """The follower read the earlier run's stream while its own run's runner lived, and asked
    again whether it lived before judging that stream: a short run (``true``) that had emptied
    the file, written its whole stream and ended in between made it raise ``ForeignStream``
    though the file held the right stream. Here the new run is started, and waited for, at the
    follower's second question, the order that lost."""
    jsonl = tmp_path / "slot.jsonl"
    assert run_cli("run", "--run-id", "earlier-run", "--jsonl", jsonl, "--", "true").returncode == 0
    found = os.stat(jsonl)
    asked: list[int] = []

    def writer_gone() -> bool:
        asked.append(1)
        if len(asked) == 1:
            return False  # asked before the first read: its runner has not opened the file yet
        if len(asked) == 2:
            assert run_cli("run", "--run-id", "later-run", "--jsonl", jsonl, "--", "true").returncode == 0
        return True

    follower = Follower(str(jsonl), writer_gone, run_id="later-run", previous=(found.st_dev, found.st_ino))
    events = []
    try:
        while not follower.done:
            events += follower.read_events()
    finally:
        follower.close()
    assert [event.event for event in events][:1] == ["run_started"]
    assert events[0].run_id == "later-run" and events[-1].event == "runner_exit"


@pytest.mark.parametrize("earlier", ["spawn_failed", "not_a_stream"])
def test_start_on_a_jsonl_that_held_no_runs_stream_returns_once_its_run_started(tmp_path, earlier):
    """The earlier file held no run's stream (a run that failed at spawn: ``spawn_failed`` then
    ``runner_exit``; a line that is not JSON): the follower took its end (that ``runner_exit``,
    or the emptying) for its own run's, and ``start`` returned only when the run was over, with
    no pid. It now reads the emptied file again from its start while the runner lives."""
    jsonl, go = tmp_path / "slot.jsonl", tmp_path / "go"
    if earlier == "spawn_failed":
        assert run_cli("run", "--jsonl", jsonl, "--", str(tmp_path / "no-such-program")).returncode == 101
    else:
        jsonl.write_text("not a stream\n")
    service = processkit.start(["true"])
    assert service.wait(SAFETY_NET) == 0
    waits = f"import os, time\nend = time.monotonic() + {SAFETY_NET / 2}\nwhile not os.path.exists({str(go)!r}) and time.monotonic() < end: time.sleep(0.01)"

    def started(outcome: dict) -> None:
        outcome["handle"] = processkit.start([sys.executable, "-c", waits], jsonl=str(jsonl))

    try:
        outcome = started_stopped(service.runner_pid, jsonl, started)
    finally:
        go.touch()  # the child's end, whatever start did
    handle = outcome["handle"]
    assert handle.pid is not None and handle.wait(SAFETY_NET) == 0


def test_start_rerun_under_the_same_id_and_jsonl_follows_its_own_run(tmp_path):
    """The earlier run had the same run id too (a job rerun under a fixed id and log file): its
    stream named this run, so ``start`` took the earlier ``run_started`` for its own start (the
    earlier child's pid) and ``events()`` yielded the earlier run's events before the runner
    emptied the file. The earlier stream's first bytes, kept as the run is asked for, now tell it apart."""
    jsonl = tmp_path / "slot.jsonl"
    earlier = processkit.start(["true"], run_id="rerun-id", jsonl=str(jsonl))
    assert earlier.wait(SAFETY_NET) == 0

    def started(outcome: dict) -> None:
        handle = processkit.start(["true"], run_id="rerun-id", jsonl=str(jsonl))
        outcome["pid"] = handle.pid
        outcome["events"] = list(handle.events())
        outcome["code"] = handle.wait(SAFETY_NET)

    outcome = started_stopped(earlier.runner_pid, jsonl, started)
    assert outcome["code"] == 0 and outcome["pid"] not in (None, earlier.pid)
    started_events = [event for event in outcome["events"] if event.event == "run_started"]
    assert [event.root_pid for event in started_events] == [outcome["pid"]]
    assert [event.event for event in outcome["events"]].count("runner_exit") == 1
