"""processkit.start / attach / runs: a handle's live events, the control plane, the context manager."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest

import processkit
from processkit.events.types import Cancelled, Killed, MembersSnapshot, ResourceSummary, RunnerExit, RunStarted
from conftest import SAFETY_NET, pid_alive, start_cli, wait_for_event


def test_start_returns_once_the_child_runs_and_events_stream_live():
    """Interval snapshots arrive while the child runs; cancelling from inside the loop ends the
    same stream with cancelled and runner_exit 108."""
    handle = processkit.start(["sleep", "30"], snapshot_interval="50ms", grace="2s")
    seen = []
    for event in handle.events():
        seen.append(event)
        if isinstance(event, MembersSnapshot) and sum(getattr(e, "reason", None) == "interval" for e in seen) == 2:
            handle.cancel()
    assert isinstance(seen[0], RunStarted) and seen[0].run_id == handle.run_id
    assert pid_alive(seen[0].root_pid) is False
    assert isinstance(seen[-1], RunnerExit) and seen[-1].code == 108 and seen[-1].source == "control_cancel"
    assert any(isinstance(e, Cancelled) and e.source == "control_cancel" for e in seen)
    result = handle.result()
    assert (result.returncode, result.source) == (108, "control_cancel")
    assert [e.event for e in result.events] == [e.event for e in seen]
    assert list(handle.events()) == result.events  # replayed once the scratch stream is gone


def test_inspect_then_kill():
    with processkit.start(["sleep", "30"]) as handle:
        started = next(iter(handle.events()))
        snapshot = handle.inspect()
        assert snapshot["run_id"] == handle.run_id and snapshot["root_pid"] == started.root_pid
        assert started.root_pid in [member["pid"] for member in snapshot["members"]] or snapshot["members"] == []
        assert handle.kill() is None  # Popen's: the tree killed, the returncode Popen's
        result = handle.result(timeout=SAFETY_NET)
    assert (result.returncode, result.exit_code, result.source) == (-9, 109, "control_kill")
    assert isinstance(result.ending, Killed)
    assert not pid_alive(started.root_pid)


def test_context_manager_cancels_a_run_still_going(isolated_registry):
    with processkit.start(["sleep", "30"], grace=0) as handle:
        root = next(iter(handle.events())).root_pid
        assert pid_alive(root)
    result = handle.result()
    assert (handle.poll(), result.returncode, result.source) == (108, 108, "control_cancel")
    assert not pid_alive(root)
    assert processkit.runs() == []


def test_context_manager_cancels_when_the_body_raises():
    with pytest.raises(RuntimeError):
        with processkit.start(["sleep", "30"], grace=0) as handle:
            raise RuntimeError("the caller failed")
    assert handle.poll() == 108


def test_a_dropped_handle_leaves_no_scratch_files():
    """The live stream of a start() without jsonl is a file in the service's scratch directory,
    removed once its result is taken, or its handle dropped."""
    import gc

    from processkit.api import shared

    scratch = shared.connection().scratch
    handle = processkit.start(["true"])
    assert os.listdir(scratch) == [os.path.basename(handle.jsonl)]
    handle.wait()
    assert os.listdir(scratch) == []
    dropped = processkit.start(["sleep", "0.1"])
    assert os.listdir(scratch) == [os.path.basename(dropped.jsonl)]
    del dropped
    gc.collect()
    assert os.listdir(scratch) == []


def test_wait_timeout_leaves_the_run_going():
    with processkit.start(["sleep", "30"]) as handle:
        with pytest.raises(subprocess.TimeoutExpired):
            handle.wait(timeout=0.1)
        assert handle.poll() is None
        assert handle.inspect()["run_id"] == handle.run_id


def test_start_of_a_run_that_cannot_spawn_raises_as_popen_does():
    with pytest.raises(FileNotFoundError) as raised:
        processkit.start(["/nonexistent/program"])
    assert raised.value.filename == "/nonexistent/program" and raised.value.result.returncode == 101
    with pytest.raises(FileNotFoundError) as raised:  # a bare name: "not found on PATH", the same cause
        processkit.start(["no-such-program-on-path"])
    assert raised.value.filename == "no-such-program-on-path" and raised.value.result.returncode == 101
    handle = processkit.start(["true"], jsonl="/nonexistent/dir/run.jsonl")  # a setup failure: a result
    assert handle.wait() == 111
    with pytest.raises(processkit.ControlError) as gone:
        handle.inspect()
    assert gone.value.code == 103
    with pytest.raises(processkit.RunError) as caught:
        processkit.start(["true"], jsonl="/nonexistent/dir/run.jsonl", check=True)
    assert caught.value.returncode == 111


def test_runs_lists_the_registry_with_label_filter():
    with processkit.start(["sleep", "30"], labels={"team": "a"}, run_id="api-listed") as first:
        with processkit.start(["sleep", "30"], labels={"team": "b"}):
            listed = processkit.runs()
            assert len(listed) == 2 and {info.health for info in listed} == {"live"}
            (only,) = processkit.runs(labels={"team": "a"})
            assert (only.run_id, only.labels, only.jsonl) == ("api-listed", {"team": "a"}, first.jsonl)
    assert processkit.runs() == []


def test_attach_to_a_run_started_by_the_cli(tmp_path):
    jsonl = tmp_path / "cli.jsonl"
    runner = start_cli("run", "--jsonl", jsonl, "--run-id", "api-attached", "--no-echo", "--", "sleep", "30")
    try:
        wait_for_event(jsonl, "run_started")
        handle = processkit.attach("api-attached")
        assert handle.pid is None and handle.inspect()["run_id"] == "api-attached"
        names = []
        for event in handle.events():
            names.append(event.event)
            if names == ["run_started", "members_snapshot"]:
                handle.cancel()
        assert names[0] == "run_started" and names[-1] == "runner_exit" and "cancelled" in names
        result = handle.result(timeout=SAFETY_NET)
        assert (result.returncode, result.source, result.jsonl) == (108, "control_cancel", str(jsonl))
        assert runner.wait(timeout=60) == 108
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_an_attached_runs_figures_are_its_streams_and_its_usage_file_keeps_the_whole_trees(tmp_path):
    """An attached handle has no usage of the run's (``result.usage`` None): its ``resources``
    are the stream's, the reference's (memory and CPU null after a natural exit, not zeros), and
    ``run --usage-file`` is where the whole tree's are (docs/api.md)."""
    jsonl, usage_file, go = tmp_path / "cli.jsonl", tmp_path / "usage.json", tmp_path / "go"
    burn = "import os, sys, time\nwhile time.process_time() < 0.3: pass\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.01)"
    args = ("--jsonl", jsonl, "--run-id", "api-attached-figures", "--usage-file", usage_file, "--no-echo")
    runner = start_cli("run", *args, "--", sys.executable, "-c", burn, go)
    try:
        wait_for_event(jsonl, "run_started")
        handle = processkit.attach("api-attached-figures")
        go.touch()
        result = handle.result(timeout=SAFETY_NET)
        assert runner.wait(timeout=SAFETY_NET) == 0
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    streamed = next(event for event in result.events if isinstance(event, ResourceSummary))
    assert result.usage is None and result.resources is not None
    assert result.resources.__dict__ == streamed.__dict__
    assert (result.resources.peak_memory_bytes, result.resources.total_cpu_ms) == (None, None)
    assert json.loads(usage_file.read_text())["total_cpu_ms"] >= 250


def test_an_attached_run_whose_outcome_is_unknown_is_a_control_error(tmp_path, isolated_registry):
    # Its record publishes a stream with no runner_exit of the run (as a runner killed outright
    # leaves): wait --report-outcome says unknown, so there is no returncode to give.
    release = tmp_path / "release"
    held = ["sh", "-c", f"while [ ! -e {release} ]; do sleep 0.05; done"]
    runner = start_cli("run", "--jsonl", tmp_path / "run.jsonl", "--run-id", "api-unknown", "--", *held)
    try:
        wait_for_event(tmp_path / "run.jsonl", "run_started")
        handle = processkit.attach("api-unknown")
        (record,) = isolated_registry.glob("*.json")
        garbled = tmp_path / "elsewhere.jsonl"
        garbled.write_text("not-json\n")
        record.write_text(record.read_text().replace(str(tmp_path / "run.jsonl"), str(garbled)))
        assert handle.poll() is None  # its watch saw the run live, publishing that stream
        release.touch()
        assert runner.wait(timeout=SAFETY_NET) == 0
        with pytest.raises(processkit.ControlError) as caught:
            handle.wait(timeout=SAFETY_NET)
        assert (caught.value.code, caught.value.kind) == (103, "stale")
        assert "ended, but its outcome is unknown" in str(caught.value)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_attach_to_nothing_is_a_control_error():
    with pytest.raises(processkit.ControlError) as caught:
        processkit.attach("no-such-run")
    assert caught.value.code == 103 and caught.value.kind == "not_found"
    with pytest.raises(TypeError):
        processkit.attach(42)


def test_async_event_iterator_and_wait_async():
    async def main():
        handle = processkit.start(["sh", "-c", "sleep 0.2; exit 5"])
        names = [event.event async for event in handle.aevents()]
        code = await handle.wait_async(timeout=SAFETY_NET)
        return names, (code, handle.result())

    names, result = asyncio.run(main())
    assert names[0] == "run_started" and names[-1] == "runner_exit" and "root_exited" in names
    assert result[0] == result[1].returncode == 5


def test_start_interrupted_before_the_start_raises_the_interruption_not_a_warning(monkeypatch):
    """Interrupted while waiting for the run's start, ``start`` waits for the run's end and raises
    the interruption: what the run lost was warned there, and under ``-W error`` the warning (an
    ``EventsLost``, say) replaced the KeyboardInterrupt. No result is handed over: nothing is said."""
    from processkit.api import handle, launch
    from processkit.api.result import EventsLost

    def interrupted(self):
        raise KeyboardInterrupt
        yield

    def warned_as_error(self, report, result):
        raise EventsLost("a warning under -W error")

    monkeypatch.setattr(handle.RunHandle, "events", interrupted)
    monkeypatch.setattr(launch.Call, "warned", warned_as_error)
    with pytest.raises(KeyboardInterrupt):
        processkit.start(["true"])
