"""A handle acts on its own run only: the control plane goes by run id, and a run given the same
id once the handle's run ended (another thread's call, another process's) is not the handle's.
Before, a finished handle's ``cancel()`` cancelled that later run and ``inspect()`` showed it."""

from __future__ import annotations

import subprocess

import pytest

import processkit
from processkit.events.types import RunStarted
from conftest import SAFETY_NET


def _started(handle) -> RunStarted:
    event = next(iter(handle.events()))
    assert isinstance(event, RunStarted)
    return event


def _refused(call) -> None:
    with pytest.raises(processkit.ControlError) as raised:
        call()
    assert (raised.value.code, raised.value.kind) == (103, "not_found")
    assert "the run this handle holds" in str(raised.value)


def test_a_finished_handle_never_reaches_a_later_run_of_its_id(tmp_path):
    first = processkit.start(["true"], run_id="reused-id")
    assert first.wait(timeout=SAFETY_NET) == 0
    (tmp_path / "sub").mkdir()  # the later run's stream named with a `..`: its record's is normalized
    later = processkit.start(["sleep", "30"], run_id="reused-id", jsonl=str(tmp_path / "sub" / ".." / "later.jsonl"))
    root = _started(later).root_pid
    _refused(first.cancel)
    _refused(first.inspect)
    _refused(first.usage)
    first.terminate()  # Popen's: its run is over, nothing to stop
    assert later.poll() is None and later.inspect()["root_pid"] == root  # its own handle still reaches it
    later.kill()
    result = later.result(timeout=SAFETY_NET)
    assert (result.exit_code, result.source) == (109, "control_kill")  # not the first handle's cancel (108)


def test_a_finished_handle_never_reaches_a_later_run_of_its_id_and_its_stream(tmp_path):
    """A job rerun under a fixed id and log file: the later run's record names the same stream."""
    jsonl = str(tmp_path / "job.jsonl")
    first = processkit.start(["true"], run_id="reused-id-and-path", jsonl=jsonl)
    assert first.wait(timeout=SAFETY_NET) == 0
    # its stream's first run_started may still be the first run's (the same id): its child's own line says it runs
    later = processkit.start(
        ["sh", "-c", "echo up; exec sleep 30"], run_id="reused-id-and-path", jsonl=jsonl, stdout=subprocess.PIPE
    )
    assert later.stdout is not None and later.stdout.readline() == b"up\n"
    _refused(first.cancel)
    _refused(first.inspect)
    _refused(first.usage)
    assert later.poll() is None and later.inspect()["run_id"] == "reused-id-and-path"
    later.kill()
    result = later.result(timeout=SAFETY_NET)
    assert (result.exit_code, result.source) == (109, "control_kill")  # not the first handle's cancel (108)


def test_an_attached_handle_keeps_to_the_run_it_attached_to():
    earlier = processkit.start(["sleep", "30"], run_id="attached-id")
    _started(earlier)
    attached = processkit.attach("attached-id")
    assert attached.inspect()["root_pid"] == earlier.pid
    earlier.kill()
    assert earlier.wait(timeout=SAFETY_NET) == -9
    later = processkit.start(["sleep", "30"], run_id="attached-id")
    _started(later)
    assert attached.poll() == 109  # its run's end, not the later run's life
    _refused(attached.cancel)
    _refused(attached.inspect)
    later.kill()
    result = later.result(timeout=SAFETY_NET)
    assert (result.exit_code, result.source) == (109, "control_kill")
