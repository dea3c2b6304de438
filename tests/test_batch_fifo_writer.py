"""A FIFO named as a batch's input whose writer comes after the batch opened it, through the
real CLI beside the real ``parallel``: its lines are the jobs' arguments (or the manifest), as
parallel and ``cat`` wait for a FIFO's writer. Before, a FIFO read whole (a ``::::`` file after
the first source, the manifest, ``--dry-run``'s sources) had no writer yet, read as empty, and
the batch said ``no jobs in the manifest`` and exited 0: every job lost without a word.

The writer arrives once the reader waits for it, an event every kernel shows: the batch asleep
(``/proc/PID/stat``'s state ``S``) holding the FIFO open (``/proc/PID/fd``); parallel, which waits
in its open of the FIFO, once that open counts it as the FIFO's reader (a writer's open that does
not wait then succeeds instead of failing ENXIO). Every wait has a deadline that fails the test,
and the reader is killed on any failure."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from conftest import SAFETY_NET, cli_command, full_pipe
from processkit.engine.endings import stop_named
from fifo_ends import opened_by, writer_of

needs_parallel = pytest.mark.skipif(shutil.which("parallel") is None, reason="GNU parallel is not installed")
DEADLINE = 120.0  # seconds a reader may take to get to its wait on a loaded machine: past it, the test fails


def _late_writer(fifo, data: bytes, reader: subprocess.Popen, held: bool = True) -> None:
    """Write ``data`` into ``fifo`` once ``reader`` waits for it (``held``: asleep holding the FIFO
    open, as the batch waits; else in its open, as parallel), or write nothing once it has ended
    (a reader that takes a writerless FIFO for an empty one ends before any writer comes)."""
    if held and not _until(lambda: _asleep_holding(reader.pid, fifo), reader, "asleep holding the FIFO"):
        return
    fd = _until(lambda: writer_of(fifo), reader, "the FIFO's reader")
    if fd is None:
        return
    try:
        os.set_blocking(fd, True)
        os.write(fd, data)
    finally:
        os.close(fd)


def _until(found, reader: subprocess.Popen, what: str):
    """``found()`` once it is true, or None once ``reader`` ended first; past ``DEADLINE``, a failure."""
    deadline = time.monotonic() + DEADLINE
    while True:
        result = found()
        if result:
            return result
        if reader.poll() is not None:
            return None
        if time.monotonic() > deadline:
            pytest.fail(f"the reader (pid {reader.pid}) was not {what} after {DEADLINE:.0f}s")
        time.sleep(0.005)


def _asleep_holding(pid: int, fifo) -> bool:
    """``pid`` asleep (state ``S``) with ``fifo`` among its open descriptors."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state == "S" and opened_by(pid, fifo)


def _started(command: list) -> subprocess.Popen:
    """The reader, Ctrl-C its default (a test run with SIGINT ignored would pass that on)."""
    return subprocess.Popen(
        [str(word) for word in command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _ended(reader: subprocess.Popen, act) -> subprocess.CompletedProcess:
    """``act()`` then the reader's end, the reader killed (by its pid) if either fails or it outlasts the deadline."""
    try:
        act()
        stdout, stderr = reader.communicate(timeout=DEADLINE)
    except BaseException:
        reader.kill()
        reader.communicate()
        raise
    return subprocess.CompletedProcess(reader.args, reader.returncode, stdout, stderr)


def _fed(command: list, fifo, data: bytes, held: bool = True) -> subprocess.CompletedProcess:
    reader = _started(command)
    return _ended(reader, lambda: _late_writer(fifo, data, reader, held))


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def _args(out) -> list[list[str]]:
    return sorted(line["command"] for line in map(json.loads, (out / "summary.jsonl").read_text().splitlines()))


def test_a_later_sources_fifo_waits_for_its_writer(tmp_path, fifo):
    (tmp_path / "a").write_text("1\n2\n")
    out = tmp_path / "out"
    done = _fed([*cli_command(), "batch", "--out", out, "--", "echo", "::::", tmp_path / "a", fifo], fifo, b"x\ny\n")
    assert done.returncode == 0, done.stderr
    assert _args(out) == [["echo", a, b] for a in "12" for b in "xy"], done.stderr


@needs_parallel
def test_a_later_sources_fifo_matches_gnu_parallel(tmp_path, fifo):
    (tmp_path / "a").write_text("1\n2\n")
    peer = _fed(["parallel", "--will-cite", "-k", "echo", "::::", tmp_path / "a", fifo], fifo, b"x\ny\n", held=False)
    assert peer.returncode == 0, peer.stderr
    assert peer.stdout.decode().splitlines() == [f"{a} {b}" for a in "12" for b in "xy"]


def test_a_manifest_fifo_waits_for_its_writer(tmp_path, fifo):
    out = tmp_path / "out"
    done = _fed([*cli_command(), "batch", fifo, "--out", out], fifo, b'{"id": "one", "args": ["true"]}\n')
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[-1] == "batch: 1 of 1 job exited 0"


def test_a_dry_runs_fifo_waits_for_its_writer(tmp_path, fifo):
    done = _fed([*cli_command(), "batch", "--dry-run", "--", "echo", "::::", fifo], fifo, b"x\n")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["args"] for line in done.stdout.splitlines()] == [["echo", "x"]]


def test_a_fifo_whose_writer_writes_nothing_is_an_empty_source(tmp_path, fifo):
    """A writer that came and closed with nothing written: the end of an empty source, no wait."""
    done = _fed([*cli_command(), "batch", "--out", tmp_path / "out", "--", "echo", ":::", "q", "::::", fifo], fifo, b"")
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[-1] == "batch: no inputs: a :::: source gave no lines, so no job was made"


def _stopped(command: list, fifo, number: int) -> subprocess.CompletedProcess:
    reader = _started(command)

    def stop() -> None:
        if not _until(lambda: _asleep_holding(reader.pid, fifo), reader, "asleep holding the FIFO"):
            pytest.fail(f"the batch ended before it waited for the FIFO's writer: {reader.communicate()}")
        reader.send_signal(number)

    return _ended(reader, stop)


@pytest.mark.parametrize(
    ("number", "code", "source"),
    [(signal.SIGTERM, 107, "sigterm"), (signal.SIGHUP, 107, "sighup"), (signal.SIGINT, -signal.SIGINT, "ctrl_c")],
)
@pytest.mark.parametrize("where", ["manifest", "later source", "first source"])
def test_a_stop_while_a_fifo_is_awaited_is_the_batchs_stop(tmp_path, fifo, number, code, source, where):
    """A stop signal in the wait for the FIFO's writer, which comes before the host watches the
    signals: 107 for SIGTERM and SIGHUP, death by SIGINT for Ctrl-C, the stop said (docs/batch.md),
    as a batch's stop; before, SIGTERM and SIGHUP killed it and Ctrl-C gave 107 without a word."""
    out = tmp_path / "out"
    tail = {
        "manifest": [fifo],
        "later source": ["--", "echo", ":::", "q", "::::", fifo],
        "first source": ["--", "echo", "::::", fifo],
    }
    done = _stopped([*cli_command(), "batch", "--out", out, *tail[where]], fifo, number)
    assert done.returncode == code, done.stderr
    assert (
        done.stderr.decode().splitlines()[-1]
        == f"batch: no job started, cancelled by {stop_named(source)} (its input awaited)"
    )
    assert not out.exists()


def test_a_stop_while_a_fifo_is_awaited_ends_with_a_stderr_nobody_reads(tmp_path, fifo):
    """The stop's line to a stderr pipe whose reader takes nothing waits a bounded while, as a
    batch's lines after a stop do: it was a blocking write, and the batch never ended."""
    read_end, write_end = full_pipe()
    reader = subprocess.Popen(
        [*cli_command(), "batch", "--out", str(tmp_path / "out"), str(fifo)], stderr=write_end, stdin=subprocess.DEVNULL
    )
    os.close(write_end)
    try:
        if not _until(lambda: _asleep_holding(reader.pid, fifo), reader, "asleep holding the FIFO"):
            pytest.fail("the batch ended before it waited for the FIFO's writer")
        reader.send_signal(signal.SIGTERM)
        reader.wait(timeout=SAFETY_NET)
    finally:
        reader.kill()
        reader.wait()
        os.close(read_end)
    assert reader.returncode == 107
