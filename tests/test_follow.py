"""The one JSONL follower (processkit/events/follow.py) and its rule for the end of a stream,
driven through both of its users: ``processkit-cli events --follow`` and the Python API's
``RunHandle.events()``.

The stream's writer is played by this process: a registry record naming the stream, whose lock
this process holds while it "writes" (tests/test_registry.py's helpers), so every step is
synchronised on what the follower has printed or yielded, never on a sleep.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import sys
import threading
import time
import types

import pytest

from conftest import SAFETY_NET, reaped, run_cli, start_cli
from control_support import registry_record
from processkit.api.handle import RunHandle
from processkit.cli.events import SETTLE_SECONDS
from processkit.events.follow import Follower
from processkit.events.types import RootExited, RunnerExit, RunStarted
from test_registry import _hold, _write

RUN_ID = "followed"


def _line(event) -> bytes:
    return json.dumps(event.to_json()).encode() + b"\n"


STARTED = _line(RunStarted(run_id=RUN_ID, labels={}, root_pid=1, mechanism="process_group", cwd="/"))
ROOT_EXITED = _line(RootExited(outcome="exited", code=0, signal=None))
RUNNER_EXIT = _line(RunnerExit(code=0, source="child_exit", child_code=0))
AFTER = b'{"schema_version": 1, "event": "written_after_the_end"}\n'


@pytest.fixture
def writer(isolated_registry, tmp_path):
    """A live writer of ``stream.jsonl``: the stream path, and a function that makes it gone."""
    jsonl = tmp_path / "stream.jsonl"
    jsonl.write_bytes(b"")
    _write(isolated_registry, "run-f", registry_record(RUN_ID, "run-f.lock", jsonl=str(jsonl)))
    held = [_hold(isolated_registry, "run-f")]

    def gone() -> None:
        os.close(held.pop())

    yield jsonl, gone
    if held:
        gone()


def _append(path, data: bytes) -> None:
    with open(path, "ab") as file:
        file.write(data)


def _attached(jsonl) -> RunHandle:
    """What ``processkit.attach`` gives for a live run (which also asks for a control endpoint,
    one this hand-played writer has not)."""
    return RunHandle(RUN_ID, str(jsonl))


@contextlib.contextmanager
def _following(*args):
    """``events ... --follow``, killed if the test fails before it has ended."""
    with reaped(start_cli("events", *args, "--follow")) as proc:
        yield proc


def _printed_lines(proc, count: int, timeout: float = SAFETY_NET) -> bytes:
    """What the follower printed once it has printed ``count`` lines: proof it read them."""
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while data.count(b"\n") < count:
            assert selector.select(deadline - time.monotonic()), f"the follower printed only {data!r}"
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"the follower ended after printing only {data!r}"
            data += chunk
    return data


@pytest.mark.parametrize("locator", ["--file", "--run-id"])
def test_cli_follows_a_stream_still_written_to_its_runner_exit_and_no_further(writer, locator):
    jsonl, _ = writer
    _append(jsonl, STARTED + ROOT_EXITED[:20])  # the second line is still being written
    with _following(locator, jsonl if locator == "--file" else RUN_ID, "--json") as proc:
        assert _printed_lines(proc, 1) == STARTED  # never the half-written line
        time.sleep(3 * SETTLE_SECONDS)  # a chance to give up wrongly: the stream is still, its writer live
        assert proc.poll() is None
        _append(jsonl, ROOT_EXITED[20:])
        assert _printed_lines(proc, 1) == ROOT_EXITED  # it waited: the writer is live
        _append(jsonl, RUNNER_EXIT + AFTER)  # a line after runner_exit is not the run's
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == RUNNER_EXIT
    assert b"without a terminal" not in err


def test_cli_reads_the_truncated_last_line_once_the_writer_is_gone(writer):
    jsonl, gone = writer
    _append(jsonl, STARTED + ROOT_EXITED.rstrip(b"\n"))  # the writer died before its newline
    with _following("--file", jsonl, "--json") as proc:
        assert _printed_lines(proc, 1) == STARTED
        gone()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == ROOT_EXITED
    assert b"the stream ends without a terminal `runner_exit` event: no live registry record still publishes" in err


def test_cli_reports_a_half_written_last_line_once_the_writer_is_gone(writer):
    jsonl, gone = writer
    _append(jsonl, STARTED + ROOT_EXITED[:20])
    with _following("--file", jsonl, "--json") as proc:
        assert _printed_lines(proc, 1) == STARTED
        gone()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == b""
    assert b"line 2: not valid JSON" in err and b"ends without a terminal `runner_exit`" in err


def test_api_follows_a_stream_still_written_to_its_runner_exit_and_no_further(writer):
    jsonl, _ = writer
    _append(jsonl, STARTED + ROOT_EXITED[:20])
    handle = _attached(jsonl)
    events = handle.events()
    assert next(events).event == "run_started"
    completed = threading.Thread(target=_append, args=(jsonl, ROOT_EXITED[20:]))
    completed.start()  # the rest of the line arrives while the API waits for it
    ended = next(events)
    completed.join()
    assert isinstance(ended, RootExited) and ended.code == 0
    _append(jsonl, RUNNER_EXIT + AFTER)
    assert [event.event for event in events] == ["runner_exit"]


def test_api_reads_the_truncated_last_line_once_the_writer_is_gone(writer):
    jsonl, gone = writer
    _append(jsonl, STARTED + ROOT_EXITED.rstrip(b"\n"))
    handle = _attached(jsonl)
    events = handle.events()
    assert next(events).event == "run_started"
    gone()
    assert [event.event for event in events] == ["root_exited"]


def test_api_events_end_where_another_run_empties_the_file(writer):
    """The API's follower as the CLI's: the file emptied and written by a retry (its stream
    longer than the offset read so far) ends the events there, none of the retry's given."""
    jsonl, _ = writer
    _append(jsonl, STARTED)
    events = _attached(jsonl).events()
    assert next(events).event == "run_started"
    retry = _line(RunStarted(run_id="retry", labels={}, root_pid=2, mechanism="process_group", cwd="/"))
    jsonl.write_bytes(retry + ROOT_EXITED + RUNNER_EXIT)
    assert [event.event for event in events] == []


def test_the_follower_waits_its_settle_once_the_writer_is_gone(tmp_path, monkeypatch):
    """A runner unregisters just before its last line: a follower that sees the writer gone reads
    on for ``settle`` seconds of a still file before it ends. Counted on a clock this test moves
    (a process-level check timed the settle from outside, which a loaded host's stalls blur)."""
    from processkit.events import follow

    clock = [100.0]
    monkeypatch.setattr(follow, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    stream = tmp_path / "s.jsonl"
    stream.write_text('{"event":"run_started"}\n')
    gone = [False]
    follower = follow.Follower(str(stream), lambda: gone[0], settle=SETTLE_SECONDS)
    assert [line.event for line in follower.read()] == [{"event": "run_started"}]
    gone[0] = True
    clock[0] += SETTLE_SECONDS * 0.8
    assert follower.read() == [] and not follower.done, "ended before its settle"
    with open(stream, "a") as late:
        late.write('{"event":"root_exited"}\n')  # the line a runner writes after unregistering
    clock[0] += SETTLE_SECONDS * 0.1
    assert [line.event for line in follower.read()] == [{"event": "root_exited"}] and not follower.done
    clock[0] += SETTLE_SECONDS
    follower.read()
    assert follower.done and follower.gone


def test_cli_follow_ends_where_a_new_run_empties_the_file_it_follows(writer):
    """A CI step's run killed, and its retry given the same ``--jsonl``: the retry's runner
    truncates the file and writes its own stream there. The follower of the killed run ends
    with it, and never reads the retry's stream from the middle (at its offset in the old one)
    nor takes the retry's ``runner_exit`` for its run's. (The held record keeps the stream
    published throughout, so only the emptied file can end the follower.)"""
    jsonl, _ = writer
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    with reaped(start_cli("run", "--jsonl", jsonl, "--", *sleeper)) as first:
        with _following("--file", jsonl, "--json") as proc:
            printed = _printed_lines(proc, 2)  # run_started, members_snapshot: the killed run's all
            first.kill()
            first.communicate(timeout=SAFETY_NET)
            retry = run_cli("run", "--jsonl", jsonl, "--", sys.executable, "-c", "raise SystemExit(9)")
            assert retry.returncode == 9, retry.stderr
            out, err = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 0, err
    assert out == b"" and [json.loads(line)["event"] for line in printed.splitlines()] == [
        "run_started",
        "members_snapshot",
    ]
    assert b"not valid JSON" not in err
    assert b"the stream ends without a terminal `runner_exit` event: the file was emptied under the reader" in err


def _emptied_before_second_read(path, data: bytes) -> str:
    """The follower's ``os`` (a ``patched_cli`` value) whose first read past the file's start
    first empties ``path`` and writes ``data`` there, as a retry's runner does: the file emptied
    between two reads of one drain, which no outside timing can hit."""
    return (
        "(lambda real, fired: type('EmptiedBetweenReads', (), {"
        "'__getattr__': lambda self, name: getattr(real, name), "
        "'read': lambda self, fd, n: (real.lseek(fd, 0, 1) > 0 and not fired "
        f"and fired.append(open({str(path)!r}, 'wb').write({data!r})), real.read(fd, n))[1]"
        "})())(__import__('os'), [])"
    )


def test_cli_follow_keeps_the_runs_last_line_when_the_file_is_emptied_between_two_reads(writer):
    """The killed run's lines, its last one without its newline, came in a drain's first read; a
    retry emptied the file and wrote its own stream (longer) before the second. What the first
    read took is the run's: handed out, the unterminated line too, and none of the retry's. The
    follower dropped the whole drain, printing nothing of the run."""
    jsonl, _ = writer
    _append(jsonl, STARTED + ROOT_EXITED.rstrip(b"\n"))
    retry = _line(RunStarted(run_id="retry", labels={}, root_pid=2, mechanism="process_group", cwd="/"))
    fault = (
        "processkit.events.follow",
        "os",
        _emptied_before_second_read(jsonl, retry + ROOT_EXITED * 4 + RUNNER_EXIT),
    )
    with reaped(start_cli("events", "--file", jsonl, "--json", "--follow", patched=fault)) as proc:
        out, err = proc.communicate(timeout=SAFETY_NET)
    assert proc.returncode == 0, err
    assert out == STARTED + ROOT_EXITED
    assert b"the stream ends without a terminal `runner_exit` event: the file was emptied under the reader" in err


def test_a_stream_sharing_only_a_half_written_earlier_first_line_is_the_runs(tmp_path):
    """``previous`` caught the file's first line half-written, and the run's own first line begins
    with those bytes: the stream is the run's, its events handed out once the writer is gone. Its
    start compared as far as the shorter reached, it counted as the earlier run's: ForeignStream."""
    jsonl = tmp_path / "run.jsonl"
    jsonl.write_bytes(STARTED + ROOT_EXITED + RUNNER_EXIT)
    found = os.stat(jsonl)
    half = STARTED[: len(STARTED) // 2]
    follower = Follower(str(jsonl), lambda: True, run_id=RUN_ID, previous=(found.st_dev, found.st_ino, half))
    try:
        events = follower.read_events()
    finally:
        follower.close()
    assert [event.event for event in events] == ["run_started", "root_exited", "runner_exit"]
