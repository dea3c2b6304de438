"""The native pump's stay (csrc/stay.c): while a fast writer floods a pipe, the runner keeps
pumping in C between wakeups, and must still hand the loop back for everything else at once.

Each case floods the runner first (50 MB from ``yes``, which makes the stream "fast" and so
served by stays), then checks that what the loop alone handles acts while the flood goes on: a
``--timeout``, a control ``cancel``, a SIGTERM, the child's own exit. And that bytes are echoed as
they are read, a short write with no newline included, capture or not: the child waits for a
file the test makes only once it has seen that write in the echo. Run under both pumps (the
Python pump has no stay, and must behave the same). Then, on the pump itself: the stay's pause
to gather small pieces is bounded (a writer that waits to see each piece echoed before writing
the next is served by one stay), and a stay makes what the Python pump makes.
"""

from __future__ import annotations

import fcntl
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from conftest import read_events, start_cli, wait_for_event, wait_for_file
from control_support import cli_json
from processkit.engine import pump, pump_python, spawn, streams
from processkit.engine.capture import CaptureTarget
from processkit.engine.echo import EchoSink
from processkit.loop import Loop

try:
    from processkit import _native
except ImportError:
    _native = None

FLOOD = "yes | head -c 50000000"  # then the case's own part, the flood still going where it says
FOREVER = f"{FLOOD}; exec yes"


def ended(proc, jsonl) -> int:
    """The runner's exit code; one that does not end (a stay that kept the loop) is killed with
    its child, whose ``yes`` would otherwise flood on, and the test fails."""
    try:
        return proc.wait(60)
    finally:
        stop(proc, jsonl)


def stop(proc, jsonl) -> None:
    """Kills a runner still running, and its child (the root execs ``yes``)."""
    if proc.poll() is None:
        started = [e for e in read_events(jsonl) if e["event"] == "run_started"]
        for pid in [e["root_pid"] for e in started] + [proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.wait()
    for handle in (proc.stdout, proc.stderr):
        if handle is not None:
            handle.close()


def test_a_timeout_ends_a_flooding_run(pump_backend, tmp_path):
    jsonl = tmp_path / "run.jsonl"
    proc = start_cli("run", "--timeout", "1s", "--jsonl", jsonl, "--", "sh", "-c", FOREVER, stdout=subprocess.DEVNULL)
    assert ended(proc, jsonl) == 106
    assert read_events(jsonl)[-1]["source"] == "timeout"


def test_sigterm_ends_a_flooding_run(pump_backend, tmp_path):
    jsonl, flooding = tmp_path / "run.jsonl", tmp_path / "flooding"
    script = f"{FLOOD}; touch {flooding}; exec yes"
    proc = start_cli("run", "--jsonl", jsonl, "--", "sh", "-c", script, stdout=subprocess.DEVNULL)
    wait_for_file(flooding, timeout=60)
    proc.send_signal(signal.SIGTERM)
    assert ended(proc, jsonl) == 107
    assert read_events(jsonl)[-1]["source"] == "cancelled"


def test_a_control_cancel_ends_a_flooding_run(pump_backend, tmp_path):
    jsonl, flooding = tmp_path / "run.jsonl", tmp_path / "flooding"
    script = f"{FLOOD}; touch {flooding}; exec yes"
    proc = start_cli("run", "--run-id", "flood", "--jsonl", jsonl, "--", "sh", "-c", script, stdout=subprocess.DEVNULL)
    try:
        wait_for_event(jsonl, "run_started", timeout=60)
        wait_for_file(flooding, timeout=60)
        assert cli_json("cancel", "--run-id", "flood")["accepted"]
    except BaseException:
        stop(proc, jsonl)
        raise
    assert ended(proc, jsonl) == 108
    assert read_events(jsonl)[-1]["source"] == "control_cancel"


@pytest.mark.parametrize("capture", [False, True], ids=["echo", "echo+capture"])
def test_a_short_write_reaches_the_echo_while_the_child_runs(pump_backend, tmp_path, capture):
    """A stay that held bytes for more to come (or the gathering pause into a capture, unbounded)
    would keep ``ready`` from the echo, and the child would wait for ever."""
    jsonl, go = tmp_path / "run.jsonl", tmp_path / "go"
    script = f"{FLOOD}; printf ready; while [ ! -e {go} ]; do sleep 0.01; done; printf done"
    options = ["--capture-dir", tmp_path / "captures", "--capture-max-bytes", "1g"] if capture else []
    proc = start_cli("run", "--jsonl", jsonl, *options, "--", "sh", "-c", script)
    seen = bytearray()
    while not seen.endswith(b"ready"):
        chunk = os.read(proc.stdout.fileno(), 1 << 20)
        assert chunk, "the echo ended before the short write came"
        seen += chunk
    assert len(seen) == 50_000_005
    go.touch()
    assert proc.stdout.read() == b"done"
    assert ended(proc, jsonl) == 0
    captured = [e for e in read_events(jsonl) if e["event"] == "output_captured"]
    if capture:
        assert captured[0]["stdout"]["bytes"] == 50_000_009


# The child of the next test: writes a piece into the stream's pipe, waits until it has read that
# piece back from the echo, writes the next, and then says it is done on a third pipe.
PIECES_CHILD = """
import os, sys
stream, echo, done = (int(fd) for fd in sys.argv[1:4])
for piece in (b"a" * 100, b"no newline"):
    os.write(stream, piece)
    seen = b""
    while len(seen) < len(piece):
        seen += os.read(echo, len(piece) - len(seen))
    assert seen == piece, seen
os.write(done, b"x")
"""


@pytest.mark.skipif(_native is None, reason="the native module is not built")
@pytest.mark.parametrize("capture", [True, False], ids=["capture", "echo-only"])
def test_a_stay_echoes_each_piece_before_the_next_comes(tmp_path, capture):
    """The stay's pause to gather small pieces (at most pump.GATHER_SECONDS; echo only, the
    echo is spliced) is bounded:
    each piece is echoed while the writer waits for it, the stay's own end 30 s away. Only the
    third pipe becoming ready ends the stay, after both pieces: a pause that lasted to the
    stay's end would take a second stay."""
    loop = Loop()
    stream_read, stream_write = os.pipe()
    echo_read, echo_write = os.pipe()
    done_read, done_write = os.pipe()
    os.set_blocking(stream_read, False)
    capture_fd = os.open(tmp_path / "out.log", os.O_WRONLY | os.O_CREAT, 0o600)
    fds = (stream_write, echo_read, done_write)
    child = subprocess.Popen([sys.executable, "-c", PIECES_CHILD, *map(str, fds)], pass_fds=fds)
    try:
        for fd in fds:
            os.close(fd)
        sink = EchoSink(loop, echo_write, lambda: None)
        target = CaptureTarget(str(tmp_path / "out.log"), capture_fd, 1 << 20) if capture else None
        stay_pump = pump.NativePump(stream_read, target, sink)
        loop.add_reader(done_read, lambda: None)
        epoll_fd, _ = loop.stay_bound(30)
        total, stays = 0, 0
        while not select.select([done_read], [], [], 0)[0]:
            total += max(stay_pump.stay(1 << 20, epoll_fd, loop.clock() + 30, 2**64 - 1, 48 * 1024), 0)
            stays += 1
        assert (total, stays) == (110, 1)  # the one stay ended for the third pipe, not at its end
        assert stay_pump.stay_counts.gathers >= 1
        assert child.wait(60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for fd in (stream_read, echo_write, done_read, capture_fd):
            os.close(fd)
        loop.close()
    assert (tmp_path / "out.log").read_bytes() == (b"a" * 100 + b"no newline" if capture else b"")


def pumped(make, tmp_path, data: bytes, cap: int | None, name: str, stays: bool):
    """What a pump made of ``data`` (already in a pipe whose writer is gone): the capture's
    report and file, and the echo (a regular file: it never pushes back)."""
    read_fd, write_fd = os.pipe()
    fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, len(data))
    os.set_blocking(read_fd, False)
    os.write(write_fd, data)
    os.close(write_fd)
    loop = Loop()
    echo_fd = os.open(tmp_path / f"{name}.echo", os.O_WRONLY | os.O_CREAT, 0o600)
    capture_fd = os.open(tmp_path / f"{name}.log", os.O_WRONLY | os.O_CREAT, 0o600)
    target = CaptureTarget(str(tmp_path / f"{name}.log"), capture_fd, cap) if cap is not None else None
    try:
        made = make(read_fd, target, EchoSink(loop, echo_fd, lambda: None))
        epoll_fd, _ = loop.stay_bound(30)
        while True:
            if stays:
                count = made.stay(1 << 16, epoll_fd, loop.clock() + 30, 2**64 - 1, 48 * 1024)
            else:
                count = made.drain(1 << 16)
            if count == pump.EOF_REACHED:
                break
        report = made.report()
    finally:
        for fd in (read_fd, echo_fd, capture_fd):
            os.close(fd)
        loop.close()
    return (
        report and (report.bytes_seen, report.bytes_written, report.sha256, report.write_error),
        made.seen,
        (tmp_path / f"{name}.log").read_bytes(),
        (tmp_path / f"{name}.echo").read_bytes(),
    )


@pytest.mark.skipif(_native is None, reason="the native module is not built")
@pytest.mark.parametrize("cap", [None, 100, 300_000, 1 << 20], ids=["no-capture", "tiny", "mid", "whole"])
def test_a_stay_makes_what_the_python_pump_makes(cap, tmp_path):
    """Bytes, their order, the caps, the counts and the digest are the stay's as the Python
    pump's, across many drains in one stay (a 64 KiB budget over 768 KiB)."""
    data = bytes(random.Random(7).randbytes(768 * 1024))
    native = pumped(pump.NativePump, tmp_path, data, cap, "native", stays=True)
    python = pumped(pump_python.PythonPump, tmp_path, data, cap, "python", stays=False)
    assert native == python
    assert native[1] == len(data) and native[3] == data


def test_a_run_keeps_no_turn_in_c_while_another_run_of_its_host_waits_to_be_resumed():
    """A stay holds the host's turn until something in the loop is ready or its bound passes; a
    run queued for after the turn (a batch's next job, woken by its slot) is not in the loop, so
    a stream's stay is refused while one waits, and allowed once none does."""
    from processkit.engine.runloop import RunLoop
    from processkit.loop import Loop

    loop = Loop()
    try:
        waiting = [True]
        view = RunLoop(loop, lambda: None, lambda: waiting[0], lambda exc: None)
        assert view.stay_bound(0.01) is None
        waiting[0] = False
        bound = view.stay_bound(0.01)
        assert bound is not None and bound[0] >= 0
    finally:
        loop.close()


@pytest.mark.skipif(_native is None, reason="the native module is not built")
def test_an_echo_only_stay_stops_pausing_for_a_writer_that_fills_the_pipe_in_a_pause(tmp_path):
    """A writer that half fills the pipe in each pause is slowed by any pause (it blocks on the
    full pipe, and its pages go cold in a pile): an echo-only stay halves its pause down to none.
    ``dd`` writing 4 KiB pieces as fast as it can into a 1 MiB pipe whose "nearly full" is set
    at 64 KiB (so the rule's threshold, half of that in a 0.3 ms pause, holds for any writer over
    about 110 MB/s, even a sanitized build's): over 0.2 s of one stay the pause follows a few
    drains in a thousand (when a window shows the writer slowed, it is tried again), not about
    every other one (the rule before: the pause never below 0.3 ms)."""
    loop = Loop()
    stream_read, stream_write = os.pipe()
    fcntl.fcntl(stream_read, fcntl.F_SETPIPE_SZ, 1 << 20)
    os.set_blocking(stream_read, False)
    echo_fd = os.open(os.devnull, os.O_WRONLY)
    child = subprocess.Popen(["dd", "if=/dev/zero", "bs=4096", "status=none"], stdout=stream_write)
    os.close(stream_write)
    try:
        stay_pump = pump.NativePump(stream_read, None, EchoSink(loop, echo_fd, lambda: None))
        epoll_fd, _ = loop.stay_bound(30)
        stay_pump.stay(1 << 30, epoll_fd, loop.clock() + 0.2, 2**64 - 1, 64 * 1024)
        counts = stay_pump.stay_counts
        assert counts.drains > 20, "the writer should have kept the stay draining"
        assert counts.gathers * 10 < counts.drains, (counts.drains, counts.gathers)
    finally:
        child.kill()
        child.wait()
        os.close(stream_read)
        os.close(echo_fd)
        loop.close()


@pytest.mark.skipif(_native is None, reason="the native module is not built")
def test_a_stay_whose_drains_end_on_their_budget_still_ends_at_its_bound():
    """A writer faster than the runner keeps every drain ending on its budget with bytes left in
    the pipe; the stay must still hand the loop back at ``until`` (the loop's next timer: a
    ``--timeout``, a grace period's SIGKILL), not drain on until the pipe is empty. A pipe holding
    1 MiB (its writer still open), a 4 KiB budget and an ``until`` already past: one drain (the
    rule before drained on to the pipe's end)."""
    loop = Loop()
    stream_read, stream_write = os.pipe()
    fcntl.fcntl(stream_read, fcntl.F_SETPIPE_SZ, 1 << 20)
    os.write(stream_write, b"x" * (1 << 20))
    os.set_blocking(stream_read, False)
    echo_fd = os.open(os.devnull, os.O_WRONLY)
    try:
        stay_pump = pump.NativePump(stream_read, None, EchoSink(loop, echo_fd, lambda: None))
        epoll_fd, _ = loop.stay_bound(30)
        count = stay_pump.stay(4096, epoll_fd, loop.clock() - 1, 2**64 - 1, 768 * 1024)
        assert stay_pump.stay_counts.drains == 1
        assert 0 < count < 1 << 20  # a drain takes at least one read's chunk, never the whole pipe
    finally:
        for fd in (stream_read, stream_write, echo_fd):
            os.close(fd)
        loop.close()


def in_the_set(epoll_fd: int, fd: int) -> bool:
    """Whether ``fd`` is in this process's epoll set ``epoll_fd`` (its fdinfo's ``tfd:`` lines)."""
    with open(f"/proc/self/fdinfo/{epoll_fd}") as info:
        return any(line.split()[1] == str(fd) for line in info if line.startswith("tfd:"))


@pytest.mark.skipif(_native is None, reason="the native module is not built")
def test_a_stay_serves_its_pipe_out_of_the_loops_epoll_set(tmp_path):
    """While a pipe is in an epoll set, each of the writer's writes runs epoll's callback under
    the pipe's wait-queue lock, whether or not anyone waits: 2 M writes of 100 B cost the writer
    about a seventh more CPU while stays served it (bench/README.md, "Capture against tee"). So a
    stream takes its pipe out of the loop's set for a stay, and the stay puts it back only for
    its own waits while it has no pause (an echo-only stream keeping up with its writer: a wait
    every few writes). A real loop and stream capturing ``dd``'s 20 MB in 4 KiB writes, served by
    one stay after another (a captured stream's pause never goes to none); a
    thread looks at the loop's set in /proc while a stay runs in C (the look counts only when the
    same stay was on before and after it): the pipe is in the set in none of the looks, where it
    was in all of them (the rule before: in the set all along)."""
    loop = Loop()
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(["dd", "if=/dev/zero", "bs=4096", "count=5000", "status=none"], stdout=write_fd)
    os.close(write_fd)
    echo_fd = os.open(os.devnull, os.O_WRONLY)
    run = SimpleNamespace(
        loop=loop,
        pump_backend="native",
        unpolled_pipes=False,
        spawn_backend=spawn.select_backend(),
        output_limit=None,
        saw_output=lambda stream: None,
    )
    capture_fd = os.open(tmp_path / "out.log", os.O_WRONLY | os.O_CREAT, 0o600)
    target = CaptureTarget(str(tmp_path / "out.log"), capture_fd, 1 << 30)
    stream = streams.OutputStream(run, "stdout", read_fd, target, echo_fd)
    epoll_fd = loop.stay_bound(1)[0]
    stays = [0]  # odd while a stay runs
    real_stay = stream.pump.stay

    def counted_stay(*args):
        stays[0] += 1
        try:
            return real_stay(*args)
        finally:
            stays[0] += 1

    stream.pump.stay = counted_stay
    looks: list[bool] = []
    over = threading.Event()

    def look() -> None:
        while not over.is_set():
            before = stays[0]
            if before % 2:
                seen = in_the_set(epoll_fd, read_fd)
                if stays[0] == before:
                    looks.append(seen)
            time.sleep(0.0002)  # the loop's thread needs the interpreter between stays

    watcher = threading.Thread(target=look)
    watcher.start()
    try:
        while stream.open:  # stays one after another, as a writer judged fast gets them (pacing aside)
            stream._stay()
    finally:
        over.set()
        watcher.join()
        child.wait()
        stream.close()
        os.close(echo_fd)
        os.close(capture_fd)
        loop.close()
    assert os.path.getsize(tmp_path / "out.log") == 4096 * 5000
    assert stays[0] > 0 and looks, (stays[0], len(looks))
    assert sum(looks) == 0, (sum(looks), len(looks))


@pytest.mark.skipif(_native is None, reason="the native module is not built")
def test_a_stay_tells_the_last_byte_echoed_by_any_of_its_drains():
    """A stay's ``echo_last`` is the last byte any of its drains echoed, not its last drain's:
    ``x\\ntail`` in a pipe whose writer is gone is read by the first drain, echoed, and the
    second finds the end and echoes nothing; the runner must still hear ``l``, to start its own
    line after it (the rule before: the last drain's 0, so no newline)."""
    ffi, lib = _native.ffi, _native.lib
    read_fd, write_fd = os.pipe()
    echo_read, echo_write = os.pipe()
    os.write(write_fd, b"x\ntail")
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    epoll = select.epoll()
    stream = lib.pk_stream_new(read_fd, -1, 0, 0, pump.CHUNK_SIZE, 0)
    result, counts = ffi.new("pk_drain_result *"), ffi.new("pk_stay_counts *")
    try:
        until = time.monotonic_ns() + 1_000_000_000
        lib.pk_stream_stay(
            stream, echo_write, 0, 1 << 20, epoll.fileno(), until, 2**63, 48 * 1024, 300_000, 1_000_000, result, counts
        )
        assert (counts.drains, result.eof, result.total) == (2, 1, 6)
        assert result.echo_last == ord("l") + 1
        assert os.read(echo_read, 100) == b"x\ntail"
    finally:
        lib.pk_stream_free(stream)
        epoll.close()
        for fd in (read_fd, echo_read, echo_write):
            os.close(fd)
