"""The runner's own lines into a file whose reader it once doubted wait one bound at most, never
for ever (``writeall.write_own``): a stdout given up once whose pipe took a later run's few bytes
into the room its last page had left (its reader took nothing), and a stderr whose echo a stop
signal cut; but not a pipe merely slow after a stop (only a terminal is doubted then). Process-level:
the real CLI, real children, real pipes nobody reads; the bounds made short
(``teardown.ECHO_STALL_SECONDS``, ``writeall.OWN_STALL_SECONDS``)."""

from __future__ import annotations

import array
import fcntl
import json
import os
import signal
import subprocess
import termios
import time

from conftest import SAFETY_NET, patched_cli, read_events_tolerant, reaped

STALL = 0.5  # the echo's stall and the own lines' bound, patched
SET_PIPE_SIZE = 1031  # F_SETPIPE_SZ
PAGE, ROOM = 4096, 96  # a one-page pipe; what the first run's echo leaves free in it
MORE = 200_000  # past any pipe: the echo holds a backlog
# The scenario itself, not a wait for something: a reader (``| tee`` stalled, ``| less``) that
# takes nothing for longer than the own lines' bound (STALL, patched), well within SAFETY_NET.
READER_PAUSE = STALL * 3


def _held(fd: int) -> int:
    """How many bytes the pipe whose read end is ``fd`` holds."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def _until(ready, runner: subprocess.Popen) -> None:
    deadline = time.monotonic() + SAFETY_NET
    while not ready():
        assert runner.poll() is None and time.monotonic() < deadline, "never came"
        time.sleep(0.01)


def test_a_stdout_given_up_once_holds_the_printout_one_bound_at_most(tmp_path, pump_backend):
    """``bench --runs 2 --show-output`` into a one-page pipe the test never reads: the first run's
    echo fills it but ROOM bytes, then stalls and is given up. The second run (held by
    ``--prepare`` until then) writes one byte, which the pipe takes into that room while the run
    lasts: the file counts as read again, but its reader took nothing, so the printout waits one
    bound for it, and is cut, where it waited for ever."""
    filled, go, echoed, started = tmp_path / "filled", tmp_path / "go", tmp_path / "echoed", tmp_path / "started"
    prepare = f'[ -e "{tmp_path / "first"}" ] || {{ touch "{tmp_path / "first"}"; exit 0; }}; until [ -e "{go}" ]; do sleep 0.01; done'
    first = f'until [ -e "{started}" ]; do sleep 0.01; done; head -c {PAGE - ROOM} /dev/zero; until [ -e "{filled}" ]; do sleep 0.01; done; head -c {MORE} /dev/zero'
    second = f'printf h; until [ -e "{echoed}" ]; do sleep 0.01; done'  # alive until its byte is echoed
    child = f'if [ -e "{go}" ]; then {second}; else {first}; fi'
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, SET_PIPE_SIZE, PAGE)
    said = tmp_path / "said"
    try:
        with open(said, "wb") as stderr:
            runner = subprocess.Popen(
                patched_cli(
                    "teardown",
                    "ECHO_STALL_SECONDS",
                    repr(STALL),
                    "processkit.writeall",
                    "OWN_STALL_SECONDS",
                    repr(STALL),
                )
                + ["bench", "--runs", "2", "--show-output", "--prepare", prepare, child],
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=stderr,
            )
        os.close(write_end)
        with reaped(runner):
            header = b""  # hyperfine's, before the first run (held until it is read): the pipe emptied
            while not (b"Benchmark 1: " in header and header.endswith(b"\n")):
                chunk = os.read(read_end, PAGE)
                assert chunk, header
                header += chunk
            started.touch()
            _until(lambda: _held(read_end) == PAGE - ROOM, runner)  # echoed in one write: room left in its page
            filled.touch()
            _until(lambda: b"stopped reading; live echo abandoned" in said.read_bytes(), runner)  # given up
            go.touch()
            _until(lambda: _held(read_end) == PAGE - ROOM + 1, runner)  # its echo "took" the run's byte
            echoed.touch()
            assert runner.wait(timeout=SAFETY_NET) == 0
    finally:
        os.close(read_end)
    assert b"the results were cut after" in said.read_bytes()


def test_a_stop_during_the_echos_stall_ends_the_run(tmp_path):
    """stderr a pipe nobody reads, filled by the child's echo; a SIGTERM while the drain waits
    out the echo's (long) stall: the echo is cut, and the warning saying so waits one bound at
    most for that reader, where it waited for ever."""
    jsonl = tmp_path / "run.jsonl"
    read_end, write_end = os.pipe()
    try:
        runner = subprocess.Popen(
            patched_cli(
                "teardown",
                "ECHO_STALL_SECONDS",
                repr(SAFETY_NET),
                "processkit.writeall",
                "OWN_STALL_SECONDS",
                repr(STALL),
            )
            + ["run", "--jsonl", str(jsonl), "--", "sh", "-c", f"head -c {MORE} /dev/zero >&2"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=write_end,
        )
        os.close(write_end)
        with reaped(runner):
            _until(lambda: any(e.get("event") == "root_exited" for e in read_events_tolerant(jsonl)), runner)
            runner.send_signal(signal.SIGTERM)
            assert runner.wait(timeout=SAFETY_NET / 2) == 0  # the stall alone is SAFETY_NET
    finally:
        os.close(read_end)


def test_a_stop_leaves_a_slow_pipe_the_whole_export(tmp_path):
    """``bench --export-json -`` into a one-page pipe whose reader takes nothing until well past
    the own lines' bound after a SIGTERM: the whole document of the commands done (and the stop's
    line), as hyperfine's blocking writes give it, where the stop's doubt of every stdout cut it
    at the pipe's page (invalid JSON) and ended 107 with a warning that the results were cut."""
    # The fourth run (the first command's second) says bench's pid and waits to be stopped.
    counted = "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n"
    hold = f"{counted}; if [ $n -eq 3 ]; then echo $PPID > held.tmp; mv held.tmp held; until [ -e go ]; do sleep 0.01; done; fi"
    bench = ["bench", "--style", "basic", "--runs", "2", "-L", "k", "1,2,3", "--export-json", "-", f": {{k}}; {hold}"]
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, SET_PIPE_SIZE, PAGE)
    held, said = tmp_path / "held", tmp_path / "said"
    try:
        with open(said, "wb") as stderr:
            runner = subprocess.Popen(
                patched_cli("processkit.writeall", "OWN_STALL_SECONDS", repr(STALL)) + bench,
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=stderr,
                cwd=tmp_path,
            )
        os.close(write_end)
        with reaped(runner):
            _until(held.exists, runner)
            os.kill(int(held.read_text()), signal.SIGTERM)
            _until(lambda: _held(read_end) == PAGE, runner)  # the export's write waits for its reader
            time.sleep(READER_PAUSE)
            with os.fdopen(os.dup(read_end), "rb") as reader:
                out = reader.read()
            assert runner.wait(timeout=SAFETY_NET) == 107
    finally:
        os.close(read_end)
        (tmp_path / "go").touch()  # a run left by a failed assertion ends too
    assert len(out) > PAGE and len(json.loads(out)["results"]) == 3, out[-200:]
    assert b"benchmark stopped during" in said.read_bytes() and b"cut" not in said.read_bytes()
